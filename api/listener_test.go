package api_test

import (
	"errors"
	"net"
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
