package server

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/sluicehq/sluice/api"
	"github.com/valyala/fasthttp"
)

// openInternal starts a single replica on loopback and waits until it
// leads.
func openInternal(t *testing.T) *Server {
	t.Helper()
	s, err := Open(Config{ID: 1, Peers: map[uint64]string{1: ""}, Dir: t.TempDir(), HTTPAddr: "127.0.0.1:0", TickInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	deadline := time.After(10 * time.Second)
	for {
		changed := s.disp.Changed() // before Leading, so that no change is missed
		if _, ok := s.disp.Leading(); ok {
			return s
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("the replica did not lead within 10s")
		}
	}
}

// streamed is a body stream that gives n bytes of filler, then fails: it
// panics when panics is set, else returns err.
type streamed struct {
	filler []byte
	n      int
	panics bool
	err    error
}

func (r *streamed) Read(p []byte) (int, error) {
	if r.n == 0 {
		if r.panics {
			panic("the body stream broke")
		}
		return 0, r.err
	}
	k := min(len(p), r.n, len(r.filler))
	copy(p, r.filler[:k])
	r.filler, r.n = r.filler[k:], r.n-k
	return k, nil
}

// serveStreamed serves a POST of path whose body streams from body,
// declaring length, with headers h; it returns the status and the reply.
func serveStreamed(h *Handler, path string, body io.Reader, length int, hdr map[string]string) (int, string) {
	var req fasthttp.Request
	req.Header.SetMethod("POST")
	req.SetRequestURI(path)
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, nil, nil)
	for k, v := range hdr {
		ctx.Request.Header.Set(k, v)
	}
	ctx.Request.SetBodyStream(body, length)
	h.ServeFastHTTP(&ctx)
	return ctx.Response.StatusCode(), string(ctx.Response.Body())
}

// TestBodyMemoryGivenBack serves bodies that end every way a handler can
// after reading them: a panic while reading, a read error, a corrupt or
// oversized compressed body, a refusal after the read, a success. Each
// time the memory the body held is given back, and the pools keep no
// buffer over maxPooledBuffer.
func TestBodyMemoryGivenBack(t *testing.T) {
	s := openInternal(t)
	h := s.handler
	spaces := bytes.Repeat([]byte(" "), 8<<20)
	job := `{"name":"j","tasks":[{"count":1,"pod":{"sim":{"run_time":"1h"},"containers":[{"image":{"rootfs":"/r"},"command":["x"],"resources":{"cpu":100,"memory":"1Mi"}}]}}]}`
	big := append([]byte(job), spaces[:4<<20]...)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(append(spaces, spaces...))
	_ = zw.Close()
	broken := errors.New("connection reset")
	// Two gzip members of one job each: the first alone is a whole gzip
	// stream.
	var member bytes.Buffer
	mw := gzip.NewWriter(&member)
	_, _ = mw.Write([]byte(job + "\n"))
	_ = mw.Close()
	twoMembers := append(bytes.Clone(member.Bytes()), member.Bytes()...)
	gzHeader := map[string]string{"Content-Encoding": "gzip"}
	cases := []struct {
		name   string
		path   string
		body   io.Reader
		length int
		hdr    map[string]string
		status int
		want   string
	}{
		{"panic while reading", api.PathJobs, &streamed{filler: spaces, n: 3 << 20, panics: true}, 6 << 20, nil, 500, "internal"},
		{"cut short", api.PathJobs, bytes.NewReader(big[:len(big)/2]), len(big), nil, 400, "ended after"},
		{"read error", api.PathJobs, &streamed{filler: spaces, n: 3 << 20, err: broken}, 6 << 20, nil, 400, "connection reset"},
		{"chunked read error", api.PathJobs, &streamed{filler: spaces, n: 3 << 20, err: broken}, -1, nil, 400, "connection reset"},
		{"gzip cut short", api.PathJobs, bytes.NewReader(gz.Bytes()[:gz.Len()/2]), -1, gzHeader, 400, "gzip body is corrupt or truncated"},
		{"gzip's wire broken", api.PathJobs, &streamed{filler: gz.Bytes(), n: gz.Len() / 2, err: io.ErrUnexpectedEOF}, gz.Len(), gzHeader, 400, "reading the body: unexpected EOF"},
		{"gzip cut between members", api.PathJobs, bytes.NewReader(twoMembers[:len(twoMembers)/2]), len(twoMembers), gzHeader, 400, "ended after"},
		{"gzip over the limit", api.PathNodes, bytes.NewReader(gz.Bytes()), gz.Len(), gzHeader, 413, "decompresses"},
		{"refused after the read", api.PathNodes, bytes.NewReader(spaces[:1<<20]), 1 << 20, nil, 400, "object"},
		{"read to its end", api.PathJobs, bytes.NewReader(big), len(big), nil, 200, `"jobs"`},
		{"chunked to its end", api.PathJobs, bytes.NewReader(big), -1, nil, 200, `"jobs"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, reply := serveStreamed(h, c.path, c.body, c.length, c.hdr)
			if status != c.status || !strings.Contains(reply, c.want) {
				t.Fatalf("%d %s; want %d mentioning %q", status, reply, c.status, c.want)
			}
			if n := h.BodyBytes(); n != 0 {
				t.Fatalf("%d body bytes still counted", n)
			}
		})
	}
	for range 64 {
		if bp := bodyBuffers.Get().(*[]byte); cap(*bp) > maxPooledBuffer {
			t.Fatalf("a pooled body or reply buffer of %d bytes", cap(*bp))
		}
	}
}

// TestBodyMemoryTake checks the count's arithmetic: it never goes over
// its limit and gives back exactly what was taken.
func TestBodyMemoryTake(t *testing.T) {
	m := &bodyMemory{limit: 100}
	if !m.take(60) || !m.take(40) || m.take(1) {
		t.Fatalf("took past the limit: %d", m.used.Load())
	}
	m.give(40)
	if m.take(41) || !m.take(40) {
		t.Fatalf("after giving 40 back: %d used", m.used.Load())
	}
	b := &heldBody{mem: m}
	m.give(100)
	if e := b.holdTo(30); e != nil || b.holdTo(20) != nil || b.n != 30 {
		t.Fatalf("holdTo: n %d", b.n)
	}
	if e := b.holdTo(101); e == nil || e.status != fasthttp.StatusServiceUnavailable || e.retryAfter != 1 {
		t.Fatalf("holdTo past the limit: %+v", e)
	}
	if e := b.holdDecoder(70); e != nil || m.used.Load() != 100 {
		t.Fatalf("holdDecoder: %v, %d used", e, m.used.Load())
	}
	b.release()
	if m.used.Load() != 0 {
		t.Fatalf("%d used after release", m.used.Load())
	}
}

// TestBodyMemoryFreesAfterBigBodies: when the last body held goes and a
// big one went since, the memory is returned to the operating system, at
// most once every minFreeInterval.
func TestBodyMemoryFreesAfterBigBodies(t *testing.T) {
	m := &bodyMemory{limit: 1 << 30}
	if !m.take(bigBody) || !m.take(1) {
		t.Fatal("take")
	}
	m.give(bigBody)
	if !m.big.Load() || m.freed.Load() != 0 {
		t.Fatalf("returned with a body still held: big %v, freed %d", m.big.Load(), m.freed.Load())
	}
	m.give(1)
	first := m.freed.Load()
	if m.big.Load() || first == 0 {
		t.Fatalf("not returned when the last body went: big %v, freed %d", m.big.Load(), first)
	}
	m.take(bigBody)
	m.give(bigBody)
	if !m.big.Load() || m.freed.Load() != first {
		t.Fatalf("returned again within %v: big %v", minFreeInterval, m.big.Load())
	}
	m.freed.Store(first - int64(minFreeInterval))
	m.take(1)
	m.give(1)
	if m.big.Load() || m.freed.Load() == first-int64(minFreeInterval) {
		t.Fatalf("not returned %v later: big %v", minFreeInterval, m.big.Load())
	}
}
