package server_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/server"
)

// healthz sends GET /healthz on c and reads the answer, waiting at most
// wait; it returns the status.
func healthz(c net.Conn, wait time.Duration) (int, error) {
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: sluice\r\n\r\n"); err != nil {
		return 0, err
	}
	return answer(c, wait)
}

func answer(c net.Conn, wait time.Duration) (int, error) {
	if err := c.SetReadDeadline(time.Now().Add(wait)); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

func dialServer(t *testing.T, s *server.Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(s.Addr(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestConnLimitShedsIdleConnections: with Config.Conns a limit of two
// and two kept-alive connections idle, a third client is answered at once
// in the place of the one idle longest, which the server closed.
func TestConnLimitShedsIdleConnections(t *testing.T) {
	limit := api.NewConnLimit(2)
	s := openOneWith(t, func(c *server.Config) { c.Conns = limit })
	first, second := dialServer(t, s), dialServer(t, s)
	for i, c := range []net.Conn{first, second} {
		if code, err := healthz(c, 10*time.Second); code != http.StatusOK {
			t.Fatalf("connection %d: healthz %d, %v; want 200", i+1, code, err)
		}
		// The server marks a connection idle after its answer is sent:
		// the first must be idle before the second is, to be the one
		// idle longest.
		waitFor(t, 10*time.Second, fmt.Sprintf("connection %d idle", i+1), func() bool { return limit.Idle() == i+1 })
	}
	if limit.Open() != 2 {
		t.Fatalf("%d connections open, want 2", limit.Open())
	}
	third := dialServer(t, s)
	if code, err := healthz(third, 10*time.Second); code != http.StatusOK {
		t.Fatalf("a third connection's healthz = %d, %v with two of two open and idle; want 200", code, err)
	}
	if limit.Shed() != 1 || limit.Open() != 2 {
		t.Errorf("%d shed, %d open; want 1 and 2", limit.Shed(), limit.Open())
	}
	if code, err := healthz(first, 10*time.Second); err == nil {
		t.Errorf("the connection idle longest answered %d after a third came; want it closed", code)
	}
	if code, err := healthz(second, 10*time.Second); code != http.StatusOK {
		t.Errorf("the second connection's healthz = %d, %v; want 200 (it was not the one idle longest)", code, err)
	}
}

// TestConnLimitWaitsForABusyConnection: with a limit of one held by a
// watch stream, which is never idle, a second client waits; Close ends
// with it waiting and every place given back.
func TestConnLimitWaitsForABusyConnection(t *testing.T) {
	limit := api.NewConnLimit(1)
	s := openOneWith(t, func(c *server.Config) { c.Conns = limit })
	w := startWatch(t, s.Addr()+"/v1/watch", "")
	second := dialServer(t, s)
	code, err := healthz(second, 300*time.Millisecond)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("healthz = %d, %v with the one place held by a stream; want no answer yet", code, err)
	}
	if limit.Shed() != 0 {
		t.Errorf("%d connections shed, want none: a stream is not idle", limit.Shed())
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return with a connection waiting for a place")
	}
	<-w.done
	waitFor(t, 10*time.Second, "every place given back", func() bool { return limit.Open() == 0 })
}
