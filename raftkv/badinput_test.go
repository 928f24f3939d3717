package raftkv_test

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/raftkv"
)

func TestBadInput(t *testing.T) {
	c := newCluster(t, 3, withCounting())
	ctx := ctxTimeout(t, 20*time.Second)
	l := c.waitLeader(time.Second)

	cases := []struct {
		name    string
		propose func() error
		want    error
	}{
		{"unknown KV operation", func() error { _, err := l.Propose(ctx, []byte{0x7f, 'k', 'v'}); return err }, raftkv.ErrBadCommand},
		{"empty command", func() error { _, err := l.Propose(ctx, nil); return err }, raftkv.ErrBadCommand},
		{"truncated put", func() error { _, err := l.Propose(ctx, []byte{0x01, 0x09, 'k'}); return err }, raftkv.ErrBadCommand},
		{"malformed CAS", func() error { _, err := l.Propose(ctx, []byte{0x03, 0x01, 'k', 0x07}); return err }, raftkv.ErrBadCommand},
		{"corrupt compressed command", func() error {
			enc := raftkv.EncodeCommand(raftkv.PutCommand([]byte("zip"), bytes.Repeat([]byte("abc"), 4096)), 4096)
			if enc[0] != 0x01 {
				t.Fatalf("the command was not compressed (header 0x%02x)", enc[0])
			}
			enc = append([]byte(nil), enc[:len(enc)/2]...) // cut in half
			_, err := raftkv.ProposeEncoded(ctx, l, enc)
			return err
		}, raftkv.ErrCorrupt},
		{"unknown command encoding", func() error {
			_, err := raftkv.ProposeEncoded(ctx, l, []byte{0x42, 1, 2, 3})
			return err
		}, raftkv.ErrCorrupt},
		{"state machine writes, then fails", func() error {
			_, err := l.Propose(ctx, []byte{opWriteBad, 'h', 'a', 'l', 'f'})
			return err
		}, errWriteBad},
		{"CAS mismatch", func() error {
			_, err := l.Propose(ctx, raftkv.CASCommand([]byte("half"), []byte("x"), []byte("y")))
			return err
		}, raftkv.ErrCASMismatch},
	}
	for _, tc := range cases {
		if err := tc.propose(); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
	}
	// A corrupt entry is rejected whole; the log goes on.
	if err := raftkv.ProposeRawEntry(ctx, l, []byte{0x01, 0, 0, 0, 0, 0, 0, 0, 0, 1, 3, 200, 1}); err != nil {
		t.Fatal(err)
	}
	if err := raftkv.ProposeRawEntry(ctx, l, []byte("garbage")); err != nil {
		t.Fatal(err)
	}

	// Commands packed with a bad one are applied; the bad one leaves nothing.
	var wg sync.WaitGroup
	errs := make([]error, 30)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := raftkv.PutCommand([]byte{'p', byte(i)}, []byte("ok"))
			if i%3 == 1 {
				cmd = []byte{opWriteBad, 'b', byte(i)}
			}
			_, errs[i] = l.Propose(ctx, cmd)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if (i%3 == 1) != errors.Is(err, errWriteBad) || (i%3 != 1 && err != nil) {
			t.Errorf("packed command %d: %v", i, err)
		}
	}
	if _, err := l.Propose(ctx, raftkv.PutCommand([]byte("after"), []byte("ok"))); err != nil {
		t.Fatalf("a write after the bad input: %v", err)
	}
	converge(t, c, 5*time.Second)
	for _, n := range c.running() {
		for _, k := range [][]byte{[]byte("half"), []byte("half2"), []byte("zip"), []byte("k")} {
			if v, err := n.Get(k); !errors.Is(err, raftkv.ErrNotFound) {
				t.Errorf("replica %d: %q = %q, %v; want nothing", n.Status().ID, k, v, err)
			}
		}
		for i := range 30 {
			_, err := n.Get([]byte{'b', byte(i)})
			if !errors.Is(err, raftkv.ErrNotFound) {
				t.Errorf("replica %d: the failed command %d left a write: %v", n.Status().ID, i, err)
			}
			if i%3 != 1 {
				if v, err := n.Get([]byte{'p', byte(i)}); err != nil || string(v) != "ok" {
					t.Errorf("replica %d: p%d = %q, %v", n.Status().ID, i, v, err)
				}
			}
		}
		if m := n.Metrics(); m.RejectedCommands == 0 {
			t.Errorf("replica %d rejected nothing: %+v", n.Status().ID, m)
		}
	}
}

// TestLargeCommands round-trips commands above the compression threshold,
// compressible and not.
func TestLargeCommands(t *testing.T) {
	c := newCluster(t, 3)
	ctx := ctxTimeout(t, 20*time.Second)
	l := c.waitLeader(time.Second)
	values := map[string][]byte{
		"text":   bytes.Repeat([]byte("sluice dispatches batch jobs; "), 10000),
		"random": randomBytes(300 << 10),
		"edge":   bytes.Repeat([]byte{7}, 4096),
	}
	for k, v := range values {
		if _, err := l.Propose(ctx, raftkv.PutCommand([]byte(k), v)); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
	}
	converge(t, c, 5*time.Second)
	for _, n := range c.running() {
		for k, v := range values {
			if got, err := n.Get([]byte(k)); err != nil || !bytes.Equal(got, v) {
				t.Fatalf("replica %d: %s differs (%d bytes, %v)", n.Status().ID, k, len(got), err)
			}
		}
	}
}
