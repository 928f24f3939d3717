package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/valyala/fasthttp"
)

// TestJobTokenMAC compares the token's MAC with crypto/hmac's, for keys
// shorter and longer than a SHA-256 block.
func TestJobTokenMAC(t *testing.T) {
	for _, key := range []string{strings.Repeat("k", 32), strings.Repeat("long key ", 10)} {
		k, err := NewJobKeys([]byte(key))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			job       string
			submitted int64
		}{{"j1", 0}, {"j42", 1765000000123456789}, {"j18446744073709551615", -1}} {
			m := hmac.New(sha256.New, []byte(key))
			m.Write([]byte(jobTokenLabel + c.job + "\x00"))
			_ = binary.Write(m, binary.BigEndian, c.submitted)
			sum := sha256.Sum256([]byte(key))
			want := fmt.Sprintf("%s%x.%s.%s", JobTokenPrefix, sum[:4], c.job, base64.RawURLEncoding.EncodeToString(m.Sum(nil)))
			if got := k.Token(c.job, c.submitted); got != want {
				t.Errorf("key of %d bytes, %s at %d: token\n%s\nwant\n%s", len(key), c.job, c.submitted, got, want)
			}
		}
	}
}

// TestJobTokenCheckAllocs: checking a token allocates nothing.
func TestJobTokenCheckAllocs(t *testing.T) {
	k, err := NewJobKeys([]byte(strings.Repeat("k", 32)), []byte(strings.Repeat("o", 40)))
	if err != nil {
		t.Fatal(err)
	}
	tok := k.Token("j12345", 99)
	ok := true
	if n := testing.AllocsPerRun(100, func() {
		id, job, mac, parsed := parseJobToken(tok)
		ok = ok && parsed && k.check(id, job, mac, 99)
	}); n != 0 {
		t.Errorf("checking a token allocates %v times", n)
	}
	if !ok {
		t.Error("the token did not check")
	}
}

// TestJobTokenAuthAllocs: authenticating a request with a job token (the
// job looked up in the FSM, its MAC checked) allocates no more than with
// a token of the token file.
func TestJobTokenAuthAllocs(t *testing.T) {
	keys, err := NewJobKeys([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := ParseTokens(strings.NewReader("file-token admin\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(Config{ID: 1, Peers: map[uint64]string{1: ""}, Dir: t.TempDir(), HTTPAddr: "127.0.0.1:0",
		Tokens: tokens, JobKeys: keys, TickInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		if _, ok := s.Dispatcher().Leading(); ok {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the replica does not lead")
		case <-time.After(5 * time.Millisecond):
		}
	}
	spec := api.JobSpec{Name: "am", Appmaster: true}
	ids, _, err := s.Dispatcher().Submit(ctx, []api.JobSpec{spec})
	if err != nil {
		t.Fatal(err)
	}
	facts, ok := s.FSM().JobFacts(ids[0])
	if !ok {
		t.Fatal("no job")
	}
	allocs := func(token string) float64 {
		var rc fasthttp.RequestCtx
		rc.Request.Header.Set("Authorization", "Bearer "+token)
		var fail *httpError
		n := testing.AllocsPerRun(200, func() {
			if _, e := s.Handler().authenticate(&rc); e != nil {
				fail = e
			}
		})
		if fail != nil {
			t.Fatalf("authenticate: %+v", fail.resp)
		}
		return n
	}
	file, job := allocs("file-token"), allocs(keys.Token(ids[0], facts.Submitted))
	t.Logf("allocations a request: file token %v, job token %v", file, job)
	if job > file {
		t.Errorf("a job token costs %v allocations a request, a file token %v", job, file)
	}
}

// BenchmarkTokenCheck compares checking a job token's MAC (parse, two
// SHA-256 blocks, compare) with its anchor, looking a token up in a token
// file of 10,000 node tokens (one SHA-256 and a map lookup).
func BenchmarkTokenCheck(b *testing.B) {
	k, err := NewJobKeys([]byte(strings.Repeat("k", 32)))
	if err != nil {
		b.Fatal(err)
	}
	tok := k.Token("j123456", 1765000000123456789)
	var file strings.Builder
	for i := range 10_000 {
		fmt.Fprintf(&file, "node-token-%d-0123456789abcdef nodelet n%d\n", i, i)
	}
	tokens, err := ParseTokens(strings.NewReader(file.String()))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("job", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			id, job, mac, ok := parseJobToken(tok)
			if !ok || !k.check(id, job, mac, 1765000000123456789) {
				b.Fatal("not checked")
			}
		}
	})
	b.Run("file", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := tokens.Lookup("node-token-5000-0123456789abcdef"); !ok {
				b.Fatal("not found")
			}
		}
	})
}
