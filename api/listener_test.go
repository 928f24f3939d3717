package api_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/api"
)

// failingListener fails its first failures Accepts with EMFILE, as a
// process out of file descriptors does.
type failingListener struct {
	net.Listener
	failures atomic.Int32
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.failures.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	return l.Listener.Accept()
}

// signalingListener sends on accepted each time its listener accepts a
// connection.
type signalingListener struct {
	net.Listener
	accepted chan struct{}
}

func (l *signalingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted <- struct{}{}
	}
	return c, err
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

func listenFailing(t *testing.T, failures int32) *failingListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	fl := &failingListener{Listener: ln}
	fl.failures.Store(failures)
	return fl
}

func serveOK(ln net.Listener) (*fasthttp.Server, chan error) {
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("ok") }, Logger: quiet{}}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	return srv, done
}

// TestKeepAcceptingServesAfterEMFILE: fasthttp's Serve gives up on an
// accept error; behind KeepAccepting it serves once the error passes, and
// the errors are reported with growing waits.
func TestKeepAcceptingServesAfterEMFILE(t *testing.T) {
	// The failure it guards against: a bare fasthttp server stops serving.
	bare := listenFailing(t, 1)
	_, done := serveOK(bare)
	select {
	case err := <-done:
		if !errors.Is(err, syscall.EMFILE) {
			t.Fatalf("bare Serve returned %v, want EMFILE", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("bare Serve did not return on EMFILE; KeepAccepting may no longer be needed")
	}

	fl := listenFailing(t, 3)
	var waits []time.Duration
	ln := api.KeepAccepting(fl, func(err error, wait time.Duration) {
		if !errors.Is(err, syscall.EMFILE) {
			t.Errorf("onError(%v), want EMFILE", err)
		}
		waits = append(waits, wait)
	})
	srv, done := serveOK(ln)
	status, body, err := fasthttp.GetTimeout(nil, "http://"+fl.Addr().String()+"/", 10*time.Second)
	if err != nil || status != 200 || string(body) != "ok" {
		t.Fatalf("GET after three EMFILEs = %d %q, %v; want 200 ok", status, body, err)
	}
	if len(waits) != 3 || waits[0] != 5*time.Millisecond || waits[1] != 10*time.Millisecond || waits[2] != 20*time.Millisecond {
		t.Errorf("waits %v, want 5ms, 10ms, 20ms", waits)
	}
	if err := srv.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve after Shutdown = %v, want nil", err)
	}
}

func TestKeepAcceptingReturnsClosed(t *testing.T) {
	fl := listenFailing(t, 0)
	ln := api.KeepAccepting(fl, nil)
	ln.Close()
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on a closed listener = %v, want net.ErrClosed", err)
	}
}

// acceptAsync calls ln.Accept in a goroutine; the result arrives on the
// channel.
func acceptAsync(ln net.Listener) chan net.Conn {
	got := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			c = nil
		}
		got <- c
	}()
	return got
}

func dial(t *testing.T, ln net.Listener) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestConnLimitWaitsForAPlace: two listeners share a limit of two; a
// third connection waits in the listen queue until one of the first two
// is closed, and it is the one then accepted. A second Close frees nothing.
func TestConnLimitWaitsForAPlace(t *testing.T) {
	limit := api.NewConnLimit(2)
	a, b := listenFailing(t, 0), listenFailing(t, 0)
	la, lb := limit.Listener(a), limit.Listener(b)
	dial(t, la)
	dial(t, lb)
	first, second := <-acceptAsync(la), <-acceptAsync(lb)
	if first == nil || second == nil {
		t.Fatal("the first two connections were not accepted")
	}
	if limit.Open() != 2 || limit.Max() != 2 {
		t.Fatalf("open %d of %d, want 2 of 2", limit.Open(), limit.Max())
	}

	third := dial(t, la)
	got := acceptAsync(la)
	select {
	case c := <-got:
		t.Fatalf("a third connection was accepted (%v) with the limit of two reached", c)
	case <-time.After(200 * time.Millisecond):
	}
	second.Close()
	second.Close()
	var c net.Conn
	select {
	case c = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the third connection was not accepted after the second was closed")
	}
	if c == nil {
		t.Fatal("Accept failed")
	}
	if _, err := third.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := io.ReadFull(c, buf); err != nil || buf[0] != 'x' {
		t.Fatalf("read %q, %v from the accepted connection; want the third's x", buf, err)
	}
	if limit.Open() != 2 {
		t.Fatalf("open %d after the second closed twice and the third came, want 2", limit.Open())
	}
	first.Close()
	c.Close()
	if limit.Open() != 0 {
		t.Fatalf("open %d after every connection closed, want 0", limit.Open())
	}
}

// TestConnLimitCloseEndsAWait: an Accept waiting for a place returns
// net.ErrClosed when its listener is closed, closes the connection it
// could not take a place for, and the place it did not take stays free.
func TestConnLimitCloseEndsAWait(t *testing.T) {
	limit := api.NewConnLimit(1)
	fl := &signalingListener{Listener: listenFailing(t, 0), accepted: make(chan struct{}, 2)}
	ln := limit.Listener(fl)
	dial(t, ln)
	held := <-acceptAsync(ln)
	if held == nil {
		t.Fatal("the first connection was not accepted")
	}
	<-fl.accepted
	second := dial(t, ln)
	done := make(chan error, 1)
	go func() {
		_, err := ln.Accept()
		done <- err
	}()
	// The wrapped listener accepted the second connection: the Accept
	// now waits for a place (held is not idle, so none is shed).
	select {
	case <-fl.accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the second connection was not accepted from the kernel")
	}
	select {
	case err := <-done:
		t.Fatalf("Accept returned %v with no place free", err)
	default:
	}
	ln.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("waiting Accept = %v after Close, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting Accept did not return after Close")
	}
	if err := second.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := second.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection the closed Accept held: read %d, %v; want it closed", n, err)
	}
	held.Close()
	if limit.Open() != 0 {
		t.Fatalf("open %d, want 0", limit.Open())
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on a closed listener = %v, want net.ErrClosed", err)
	}
}

// get sends GET path on c and returns the answer's status, waiting at most
// wait for it.
func get(c net.Conn, path string, wait time.Duration) (int, error) {
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return 0, err
	}
	return status(c, wait)
}

// status reads an answer on c, waiting at most wait, and returns its
// status.
func status(c net.Conn, wait time.Duration) (int, error) {
	if err := c.SetReadDeadline(time.Now().Add(wait)); err != nil {
		return 0, err
	}
	r, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	r.Body.Close()
	return r.StatusCode, nil
}

// TestConnLimitShedsWhatGoesIdle: with a limit of one held by a request in
// progress, a second connection waits; when the request ends and its
// connection goes idle, that connection is closed to make room and the
// second one is served.
func TestConnLimitShedsWhatGoesIdle(t *testing.T) {
	limit := api.NewConnLimit(1)
	fl := listenFailing(t, 0)
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	entered := make(chan struct{}, 1) // a /block request is in progress
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/block" {
			entered <- struct{}{}
			<-release
		}
	}, ConnState: limit.ConnState, Logger: quiet{}}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(limit.Listener(fl)) }()
	t.Cleanup(func() {
		unblock()
		srv.Shutdown()
		<-done
	})

	busy := dial(t, fl)
	blocked := make(chan error, 1)
	go func() {
		_, err := get(busy, "/block", 10*time.Second)
		blocked <- err
	}()
	select {
	case <-entered:
	case err := <-blocked:
		t.Fatalf("GET /block ended before it was released: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("GET /block did not reach the handler")
	}
	if n := limit.Open(); n != 1 {
		t.Fatalf("open %d with one request in progress, want 1", n)
	}
	second := dial(t, fl)
	code, err := get(second, "/", 200*time.Millisecond)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("GET on a second connection = %d, %v with the one place busy; want no answer yet", code, err)
	}
	if limit.Shed() != 0 {
		t.Fatalf("%d shed while the only connection was busy, want 0", limit.Shed())
	}
	unblock()
	if err := <-blocked; err != nil {
		t.Fatalf("the blocked request: %v", err)
	}
	if code, err := status(second, 10*time.Second); code != 200 {
		t.Fatalf("the second connection's answer after the first went idle: %d, %v; want 200", code, err)
	}
	if limit.Shed() != 1 || limit.Open() != 1 {
		t.Errorf("%d shed, %d open; want 1 and 1", limit.Shed(), limit.Open())
	}
}
