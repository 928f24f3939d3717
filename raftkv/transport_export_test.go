package raftkv

// Hooks into TCPTransport's wire format for the black-box tests, which
// speak it over raw connections to check what a transport refuses.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

const (
	TCPTestKindStream      = tcpKindStream
	TCPTestKindSnapshot    = tcpKindSnapshot
	TCPTestProtocolVersion = tcpProtocolVersion
	TCPTestFrameHeaderLen  = tcpFrameHeaderLen
	TCPTestHelloLen        = tcpHelloLen
)

// TCPTestHello encodes a hello.
func TCPTestHello(version, kind uint8, clusterID, from, to uint64) []byte {
	return tcpHello{version: version, kind: kind, clusterID: clusterID, from: from, to: to}.appendTo(nil)
}

// TCPTestReply encodes a reply.
func TCPTestReply(ok bool, clusterID, nodeID uint64, reason string) []byte {
	status := uint8(tcpStatusOK)
	if !ok {
		status = tcpStatusRejected
	}
	return tcpReply{status: status, clusterID: clusterID, nodeID: nodeID, reason: reason}.appendTo(nil)
}

// TCPTestReadReply reads a reply.
func TCPTestReadReply(r io.Reader) (ok bool, reason string, err error) {
	rep, err := readTCPReply(r)
	return rep.status == tcpStatusOK, rep.reason, err
}

// TCPTestFrame encodes msgs as one frame, as a sender does.
func TCPTestFrame(msgs ...*raftpb.Message) []byte {
	var e tcpFrameEncoder
	e.reset()
	for _, m := range msgs {
		if err := e.add(m, proto.Size(m)); err != nil {
			panic(err)
		}
	}
	return bytes.Clone(e.finish())
}

// TCPTestRawFrame builds a frame with the given count and payload and a
// correct checksum, whatever the payload holds.
func TCPTestRawFrame(count uint32, payload []byte) []byte {
	b := make([]byte, tcpFrameHeaderLen, tcpFrameHeaderLen+len(payload))
	copy(b, tcpFrameMagic)
	b[4] = tcpProtocolVersion
	binary.BigEndian.PutUint32(b[8:12], count)
	binary.BigEndian.PutUint32(b[12:16], uint32(len(payload)))
	b = append(b, payload...)
	crc := crc32.Update(crc32.Checksum(b[:16], tcpCRC), tcpCRC, payload)
	binary.BigEndian.PutUint32(b[16:20], crc)
	return b
}

// TCPTestReadFrames decodes the frames in data until it ends (nil error)
// or a frame fails (the frames before it are returned with the error).
func TCPTestReadFrames(data []byte, maxPayload int) ([][]*raftpb.Message, error) {
	fr := tcpFrameReader{r: bytes.NewReader(data), maxPayload: maxPayload}
	var frames [][]*raftpb.Message
	for {
		msgs, _, err := fr.readFrame()
		if errors.Is(err, io.EOF) {
			return frames, nil
		}
		if err != nil {
			return frames, err
		}
		frames = append(frames, msgs)
	}
}

// TCPTestSnapHeader encodes a snapshot header.
func TCPTestSnapHeader(length uint64, dataCRC uint32) []byte {
	return tcpSnapHeader{length: length, dataCRC: dataCRC}.appendTo(nil)
}

// TCPTestCRC is the checksum the wire format uses.
func TCPTestCRC(b []byte) uint32 { return crc32.Checksum(b, tcpCRC) }
