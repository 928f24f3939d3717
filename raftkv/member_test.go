package raftkv

import (
	"errors"
	"testing"
)

func TestMemberRecordEncoding(t *testing.T) {
	for _, rec := range []memberRecord{
		{addr: "10.0.0.1:7001"},
		{addr: "10.0.0.1:7001", meta: "http://10.0.0.1:8001"},
		{addr: "", meta: "m"},
		{addr: "h:1", meta: "\x00\xff"},
	} {
		got, err := decodeMemberRecord(rec.encode())
		if err != nil || got != rec {
			t.Errorf("%+v: decoded %+v, %v", rec, got, err)
		}
	}
	// A value written before records had metadata is an address.
	if got, err := decodeMemberRecord([]byte("127.0.0.1:7001")); err != nil || got != (memberRecord{addr: "127.0.0.1:7001"}) {
		t.Errorf("a bare address decodes to %+v, %v", got, err)
	}
	for _, bad := range [][]byte{{0x00}, {0x00, 0x05, 'a'}, {0x00, 0xff, 0xff}} {
		if got, err := decodeMemberRecord(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%q decoded to %+v, %v; want ErrCorrupt", bad, got, err)
		}
	}
}

func TestMemberContextEncoding(t *testing.T) {
	rec := memberRecord{addr: "127.0.0.1:7004", meta: "http://127.0.0.1:8004"}
	nonce, seq, got, ok := decodeMemberContext(encodeMemberContext(7, 300, rec))
	if !ok || nonce != 7 || seq != 300 || got != rec {
		t.Fatalf("decoded %d %d %+v %v", nonce, seq, got, ok)
	}
	// Version 1, the address alone after the sequence number.
	v1 := append([]byte{1, 0, 0, 0, 0, 0, 0, 0, 9, 5}, "h:1"...)
	if nonce, seq, got, ok := decodeMemberContext(v1); !ok || nonce != 9 || seq != 5 || got != (memberRecord{addr: "h:1"}) {
		t.Fatalf("version 1 decoded %d %d %+v %v", nonce, seq, got, ok)
	}
	for _, bad := range [][]byte{nil, {2}, {3, 0, 0, 0, 0, 0, 0, 0, 1, 1}, {2, 0, 0, 0, 0, 0, 0, 0, 1, 1, 9, 'a'}} {
		if _, _, got, ok := decodeMemberContext(bad); ok {
			t.Errorf("%q decoded to %+v", bad, got)
		}
	}
}
