package raftkv

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestEntryRoundTrip(t *testing.T) {
	cmds := [][]byte{nil, []byte("x"), bytes.Repeat([]byte("ab"), 5000), make([]byte, 70000)}
	var enc [][]byte
	for _, c := range cmds {
		enc = append(enc, encodeCommand(c, 4096))
	}
	if enc[2][0] != cmdS2 || enc[1][0] != cmdPlain {
		t.Fatalf("compression choices: %x %x", enc[1][0], enc[2][0])
	}
	data := encodeEntry(entryHeader{nonce: 42, firstSeq: 1000}, enc)
	h, body, err := decodeEntryHeader(data)
	if err != nil || h.nonce != 42 || h.firstSeq != 1000 || h.count != len(cmds) {
		t.Fatalf("header %+v, %v", h, err)
	}
	split, err := splitCommands(nil, h, body)
	if err != nil {
		t.Fatal(err)
	}
	var buf []byte
	for i, s := range split {
		got, err := decodeCommand(s, &buf)
		if err != nil || !bytes.Equal(got, cmds[i]) {
			t.Fatalf("command %d: %d bytes, %v", i, len(got), err)
		}
	}
	for cut := range data {
		h, body, err := decodeEntryHeader(data[:cut])
		if err == nil {
			if _, err = splitCommands(nil, h, body); err == nil {
				t.Fatalf("an entry cut at %d of %d decoded", cut, len(data))
			}
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut at %d: %v", cut, err)
		}
	}
}

// FuzzApplyInput feeds arbitrary entry data through everything apply does
// with it: no input may panic, and a valid entry decodes to its commands.
func FuzzApplyInput(f *testing.F) {
	f.Add(encodeEntry(entryHeader{1, 1, 0}, nil))
	f.Add(encodeEntry(entryHeader{1, 5, 2}, [][]byte{encodeCommand(PutCommand([]byte("k"), []byte("v")), 0), encodeCommand(bytes.Repeat([]byte{1}, 5000), 16)}))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 3, 3, 1, 2})
	f.Add(CASCommand([]byte("k"), nil, []byte("v")))
	db := func() *Batch {
		d := openTestDB(&testing.T{}, vfs.NewMem())
		var b Batch
		b.reset(d)
		return &b
	}()
	var kv KV
	maxDecodedCommand = 1 << 20
	f.Cleanup(func() { maxDecodedCommand = MaxCommandLimit })
	f.Fuzz(func(t *testing.T, data []byte) {
		var buf []byte
		// As an entry.
		if h, body, err := decodeEntryHeader(data); err == nil {
			if cmds, err := splitCommands(nil, h, body); err == nil {
				for _, c := range cmds {
					if cmd, err := decodeCommand(c, &buf); err == nil {
						db.reset(db.db)
						_, _ = kv.Apply(db, 1, cmd)
					}
				}
			}
		}
		// As one command, and as a KV command.
		_, _ = decodeCommand(data, &buf)
		db.reset(db.db)
		_, _ = kv.Apply(db, 1, data)
	})
}

// FuzzDecodeSnapshot: arbitrary snapshot data never panics the decoder.
func FuzzDecodeSnapshot(f *testing.F) {
	f.Add([]byte("SLKV\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := decodeSnapshot(snapshotWithData(data))
		if err == nil {
			_ = r.forEach(func(k, v []byte) error { return nil })
		}
	})
}
