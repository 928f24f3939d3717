package server_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/server"
)

// memWatch samples the process's heap (live and unswept objects) and
// resident memory every few milliseconds until stopped, keeping the
// peaks.
type memWatch struct {
	stop, done        chan struct{}
	baseHeap, baseRSS uint64
	peakHeap, peakRSS uint64
}

func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// rssBytes is the process's VmRSS.
func rssBytes() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func watchMemory() *memWatch {
	runtime.GC()
	w := &memWatch{stop: make(chan struct{}), done: make(chan struct{}), baseHeap: heapBytes(), baseRSS: rssBytes()}
	w.peakHeap, w.peakRSS = w.baseHeap, w.baseRSS
	go func() {
		defer close(w.done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			w.peakHeap, w.peakRSS = max(w.peakHeap, heapBytes()), max(w.peakRSS, rssBytes())
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// end stops the sampling; it returns the peaks' growth over the start.
func (w *memWatch) end() (heap, rss int64) {
	close(w.stop)
	<-w.done
	return int64(w.peakHeap - w.baseHeap), int64(w.peakRSS) - int64(w.baseRSS)
}

// rawConn is a connection to a server on which a test writes requests by
// hand.
type rawConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t testing.TB, s *server.Server) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(s.Addr(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{c: c, r: bufio.NewReader(c)}
}

// send writes a request's header (method, path, header lines) and the
// first bytes of its body.
func (rc *rawConn) send(t testing.TB, method, path string, header map[string]string, body []byte) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: sluice\r\n", method, path)
	for k, v := range header {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	if _, err := rc.c.Write(append([]byte(b.String()), body...)); err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
}

// reply reads the answer, waiting at most wait.
func (rc *rawConn) reply(wait time.Duration) (reply, error) {
	if err := rc.c.SetReadDeadline(time.Now().Add(wait)); err != nil {
		return reply{}, err
	}
	resp, err := http.ReadResponse(rc.r, nil)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, b, resp.Close}, err
}

// closedAfter reports whether the server closed the connection after its
// answer.
func (rc *rawConn) closedAfter(wait time.Duration) bool {
	_ = rc.c.SetReadDeadline(time.Now().Add(wait))
	_, err := rc.r.ReadByte()
	return err != nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// bigDeclared is the header of a submission that declares the largest body.
func bigDeclared(token string) map[string]string {
	h := map[string]string{"Content-Type": "application/json", "Content-Length": strconv.Itoa(api.MaxBodyBytes)}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	return h
}

// TestSlowDeclaredBodiesHoldLittleMemory opens many connections that
// declare a body of the largest size and send a little of it: the
// unauthenticated ones are answered 401 at once, the authenticated ones
// hold no memory until fasthttp's read-ahead is filled, and then only what
// arrived, while DefaultBodyMemory's worth of them count their declared
// lengths and the rest are answered 503. The heap grows by a few MiB, not
// the GiB they declare; /healthz answers at once meanwhile; when they go
// away the count is back to nothing.
func TestSlowDeclaredBodiesHoldLittleMemory(t *testing.T) {
	s := openOne(t, parseTokens(t, tokenFile))
	const n = 16
	holders := int(server.DefaultBodyMemory / api.MaxBodyBytes)
	w := watchMemory()
	var unauth, slow, past []*rawConn
	for range n {
		c := dialRaw(t, s)
		c.send(t, "POST", api.PathJobs, bigDeclared(""), []byte("["))
		unauth = append(unauth, c)
		c = dialRaw(t, s)
		c.send(t, "POST", api.PathJobs, bigDeclared("adm"), []byte("["))
		slow = append(slow, c)
		c = dialRaw(t, s)
		c.send(t, "POST", api.PathJobs, bigDeclared("sub-any"), append([]byte("["), bytes.Repeat([]byte(" "), 16<<10)...))
		past = append(past, c)
	}
	for i, c := range unauth {
		r, err := c.reply(5 * time.Second)
		if err != nil {
			t.Fatalf("unauthenticated connection %d: %v", i, err)
		}
		errorReply(t, r, http.StatusUnauthorized, api.CodeUnauthorized, "bearer")
		if !c.closedAfter(5 * time.Second) {
			t.Errorf("unauthenticated connection %d: still open after its 401, with its body unread", i)
		}
	}
	replies := make([]reply, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, c := range past {
		wg.Go(func() { replies[i], errs[i] = c.reply(time.Second) })
	}
	wg.Wait()
	var refused int
	for i, r := range replies {
		switch err := errs[i]; {
		case isTimeout(err):
			continue // reading its body
		case err != nil:
			t.Fatalf("authenticated connection %d: %v", i, err)
		}
		errorReply(t, r, http.StatusServiceUnavailable, api.CodeUnavailable, "memory")
		if r.header.Get("Retry-After") == "" {
			t.Errorf("a 503 without Retry-After: %s", r)
		}
		refused++
	}
	if refused != n-holders {
		t.Errorf("%d of %d bodies past the read-ahead refused 503; want %d (%d fit in %d bytes)", refused, n, n-holders, holders, server.DefaultBodyMemory)
	}
	if got, want := s.Handler().BodyBytes(), int64(holders*api.MaxBodyBytes); got != want {
		t.Errorf("%d body bytes counted, want %d: the declared lengths of the %d read", got, want, holders)
	}
	hc := dialServer(t, s)
	start := time.Now()
	if code, err := healthz(hc, 5*time.Second); code != http.StatusOK || time.Since(start) > time.Second {
		t.Errorf("healthz = %d, %v in %v with %d slow bodies open; want 200 at once", code, err, time.Since(start), 2*n)
	}
	for _, c := range slow {
		if _, err := c.reply(10 * time.Millisecond); !isTimeout(err) {
			t.Errorf("a body short of fasthttp's read-ahead was answered (%v); want it still waiting", err)
		}
	}
	heap, rss := w.end()
	t.Logf("%d connections declaring %d MiB each: heap grew %.1f MiB at the peak, RSS %.1f MiB",
		3*n, api.MaxBodyBytes>>20, float64(heap)/(1<<20), float64(rss)/(1<<20))
	if heap > 32<<20 {
		t.Errorf("the heap grew %d MiB at the peak; want under 32", heap>>20)
	}
	for _, c := range append(slow, past...) {
		c.c.Close()
	}
	waitFor(t, 10*time.Second, "the bodies' memory given back", func() bool { return s.Handler().BodyBytes() == 0 })
}

// TestRefusedBodiesAreNotRead declares large bodies and sends none of
// them: a request its header refuses is answered 401, 403, 404 or 405 at
// once, none of its body read, and its connection closed. One over its
// route's limit (a registration over 1 MiB, a body on a GET) is answered
// 413 having read at most a byte.
func TestRefusedBodiesAreNotRead(t *testing.T) {
	s := openOne(t, parseTokens(t, tokenFile))
	with := func(h map[string]string, k, v string) map[string]string {
		h[k] = v
		return h
	}
	cases := []struct {
		name, method, path string
		header             map[string]string
		body               []byte
		status             int
		code, want         string
	}{
		{"no token", "POST", api.PathJobs, bigDeclared(""), nil, 401, api.CodeUnauthorized, "bearer"},
		{"unknown token", "POST", api.PathJobs, bigDeclared("nope"), nil, 401, api.CodeUnauthorized, "unknown token"},
		{"no token, expecting 100-continue", "POST", api.PathJobs, with(bigDeclared(""), "Expect", "100-continue"), nil, 401, api.CodeUnauthorized, "bearer"},
		{"reader submits", "POST", api.PathJobs, bigDeclared("rd"), nil, 403, api.CodeForbidden, "reader"},
		{"nodelet submits", "POST", api.PathJobs, bigDeclared("nl"), nil, 403, api.CodeForbidden, "nodelet"},
		{"submitter reports", "POST", api.PathNode + "n1/reports", bigDeclared("sub-any"), nil, 403, api.CodeForbidden, "submitter"},
		{"a node reports for another", "POST", api.PathNode + "n2/reports", bigDeclared("nl"), nil, 403, api.CodeForbidden, "may not report for node"},
		{"no such path", "POST", "/v1/nope", bigDeclared("adm"), nil, 404, api.CodeNotFound, "/v1/nope"},
		{"no such method", "PUT", api.PathJobs, bigDeclared("adm"), nil, 405, "method_not_allowed", "PUT"},
		{"registration over its limit", "POST", api.PathNodes, bigDeclared("nl"), []byte("{"), 413, api.CodeTooLarge, "1048576"},
		{"submission over the limit", "POST", api.PathJobs, with(bigDeclared("adm"), "Content-Length", strconv.Itoa(api.MaxBodyBytes+1)), []byte("["), 413, api.CodeTooLarge, "67108864"},
		{"a body on the long-poll", "GET", api.PathNode + "n1/target", with(bigDeclared("nl"), "Content-Length", "10"), []byte("x"), 413, api.CodeTooLarge, "no body"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rc := dialRaw(t, s)
			rc.send(t, c.method, c.path, c.header, c.body)
			r, err := rc.reply(5 * time.Second)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			errorReply(t, r, c.status, c.code, c.want)
			if c.status == 401 && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
			}
			if !rc.closedAfter(5 * time.Second) {
				t.Errorf("the connection stayed open with the declared body unread")
			}
		})
	}
	if l := listJobs(t, s.Addr(), "adm", ""); len(l.Jobs) != 0 {
		t.Fatalf("%d jobs", len(l.Jobs))
	}
}

// zeros returns n zero bytes compressed with enc (gzip or zstd), written a
// MiB at a time.
func zeros(t testing.TB, enc string, n int, zopts ...zstd.EOption) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	switch enc {
	case "gzip":
		w = gzip.NewWriter(&buf)
	default:
		zw, err := zstd.NewWriter(&buf, append([]zstd.EOption{zstd.WithEncoderConcurrency(1)}, zopts...)...)
		if err != nil {
			t.Fatal(err)
		}
		w = zw
	}
	chunk := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, len(chunk))
		if _, err := w.Write(chunk[:k]); err != nil {
			t.Fatal(err)
		}
		n -= k
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestDecompressionBombs sends gzip and zstd bodies of a little over a
// hundred KiB that decompress to 96 MiB, four of each at once, to a
// server whose bodies may hold MinBodyMemory: each is answered 413, or
// 503 when the others hold the memory (all eight may be, when they
// decompress in step), and the heap grows by less than three times the
// bound; alone, each is answered 413; the memory is given back.
// A zstd frame whose window is over ZstdMaxWindow is refused before it is
// decoded.
func TestDecompressionBombs(t *testing.T) {
	s := openOneWith(t, func(c *server.Config) { c.BodyMemory = server.MinBodyMemory })
	bombs := map[string][]byte{"gzip": zeros(t, "gzip", 96<<20), "zstd": zeros(t, "zstd", 96<<20)}
	for enc, b := range bombs {
		t.Logf("%s bomb: %d bytes", enc, len(b))
	}
	// post sends a body, from any goroutine.
	post := func(enc string, body []byte) (reply, error) {
		hr, err := http.NewRequest("POST", s.Addr()+api.PathJobs, bytes.NewReader(body))
		if err != nil {
			return reply{}, err
		}
		hr.Header.Set("Content-Encoding", enc)
		resp, err := client.Do(hr)
		if err != nil {
			return reply{}, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return reply{resp.StatusCode, resp.Header, b, resp.Close}, err
	}
	send := func(enc string, body []byte) reply {
		r, err := post(enc, body)
		if err != nil {
			t.Fatalf("%s body: %v", enc, err)
		}
		return r
	}
	const each = 4
	w := watchMemory()
	type sent struct {
		enc string
		r   reply
		err error
	}
	var mu sync.Mutex
	var all []sent
	var wg sync.WaitGroup
	for enc, b := range bombs {
		for range each {
			wg.Go(func() {
				r, err := post(enc, b)
				mu.Lock()
				all = append(all, sent{enc, r, err})
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	got := map[string]map[int]int{"gzip": {}, "zstd": {}}
	for _, x := range all {
		if x.err != nil {
			t.Fatalf("%s bomb: %v", x.enc, x.err)
		}
		got[x.enc][x.r.status]++
		switch x.r.status {
		case http.StatusRequestEntityTooLarge:
			errorReply(t, x.r, x.r.status, api.CodeTooLarge, "decompresses to more than")
		case http.StatusServiceUnavailable:
			errorReply(t, x.r, x.r.status, api.CodeUnavailable, "memory")
			if x.r.header.Get("Retry-After") == "" {
				t.Errorf("a 503 without Retry-After: %s", x.r)
			}
		default:
			t.Errorf("%s bomb: %s; want 413 or 503", x.enc, x.r)
		}
	}
	heap, rss := w.end()
	t.Logf("%d gzip and %d zstd bombs at once: %v; heap grew %.1f MiB at the peak, RSS %.1f MiB",
		each, each, got, float64(heap)/(1<<20), float64(rss)/(1<<20))
	// The bound counts what bodies hold, not the buffers they grew out of,
	// nor the garbage of those refused, and the collector lets the heap
	// grow by its live memory before it runs: the heap's peak is a few
	// times the bound, and stays there however many bombs come.
	if heap > 3*server.MinBodyMemory {
		t.Errorf("the heap grew %d MiB at the peak; want under %d", heap>>20, 3*server.MinBodyMemory>>20)
	}
	waitFor(t, 10*time.Second, "the bodies' memory given back", func() bool { return s.Handler().BodyBytes() == 0 })
	for enc, b := range bombs {
		errorReply(t, send(enc, b), http.StatusRequestEntityTooLarge, api.CodeTooLarge, "decompresses to more than")
	}
	wide := zeros(t, "zstd", 1<<20, zstd.WithWindowSize(64<<20), zstd.WithSingleSegment(false))
	errorReply(t, send("zstd", wide), http.StatusRequestEntityTooLarge, api.CodeTooLarge, "window")
	if n := s.Handler().BodyBytes(); n != 0 {
		t.Errorf("%d body bytes still counted", n)
	}
}

// TestBodyMemoryFull fills the bodies' memory with one slow body: another
// body is answered 503 with Retry-After without being read, /healthz and
// /readyz are answered, and once the slow body goes away its memory is
// free for the next.
func TestBodyMemoryFull(t *testing.T) {
	s := openOneWith(t, func(c *server.Config) { c.BodyMemory = server.MinBodyMemory })
	hog := dialRaw(t, s)
	hog.send(t, "POST", api.PathJobs, map[string]string{"Content-Length": strconv.Itoa(60 << 20)}, bytes.Repeat([]byte(" "), 16<<10))
	waitFor(t, 10*time.Second, "the slow body counted", func() bool { return s.Handler().BodyBytes() >= 60<<20 })

	next := dialRaw(t, s)
	next.send(t, "POST", api.PathJobs, map[string]string{"Content-Length": strconv.Itoa(20 << 20)}, bytes.Repeat([]byte(" "), 16<<10))
	r, err := next.reply(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	errorReply(t, r, http.StatusServiceUnavailable, api.CodeUnavailable, "memory")
	if r.header.Get("Retry-After") != "1" {
		t.Errorf("Retry-After %q, want 1", r.header.Get("Retry-After"))
	}
	for _, path := range []string{api.PathHealth, api.PathReady} {
		if r := do(t, req{method: "GET", url: s.Addr() + path}); r.status != http.StatusOK {
			t.Errorf("%s = %s with the bodies' memory full", path, r)
		}
	}
	if got := s.Handler().BodyBytes(); got < 60<<20 || got > 61<<20 {
		t.Errorf("%d body bytes counted; want the slow body's 60 MiB, and nothing of the refused one", got)
	}
	hog.c.Close()
	waitFor(t, 10*time.Second, "the slow body's memory given back", func() bool { return s.Handler().BodyBytes() == 0 })
	body := bytes.Repeat([]byte(" "), 20<<20)
	copy(body, jobJSON("after", "", 1))
	if got := submit(t, s.Addr(), "", string(body), nil); len(got.Jobs) != 1 {
		t.Fatalf("submit after the memory was freed: %+v", got)
	}
	if n := s.Handler().BodyBytes(); n != 0 {
		t.Errorf("%d body bytes counted after the submit", n)
	}
}

// TestTruncatedBodyIsRefused sends two NDJSON jobs' worth of declared
// length and only the first job, then ends its side of the connection:
// the body is refused as cut short, not taken for a body of one job.
func TestTruncatedBodyIsRefused(t *testing.T) {
	s := openOne(t, nil)
	// Past fasthttp's 8 KiB read-ahead, which refuses a shorter body
	// itself.
	first, second := jobJSON("a", "", 1)+strings.Repeat(" ", 16<<10)+"\n", jobJSON("b", "", 1)+"\n"
	rc := dialRaw(t, s)
	rc.send(t, "POST", api.PathJobs, map[string]string{"Content-Type": "application/x-ndjson",
		"Content-Length": strconv.Itoa(len(first) + len(second))}, []byte(first))
	if err := rc.c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	r, err := rc.reply(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	errorReply(t, r, http.StatusBadRequest, api.CodeInvalid, "ended after")
	if l := listJobs(t, s.Addr(), "", ""); len(l.Jobs) != 0 {
		t.Fatalf("a body cut short submitted %d jobs", len(l.Jobs))
	}
}
