package server_test

import (
	"bufio"
	"errors"
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

// TestConnLimitKeepsConnectionsWaiting: with Config.Conns a limit of two,
// a third client's request waits until one of two kept-alive connections
// closes, then is answered; Close ends with connections waiting and every
// place given back.
func TestConnLimitKeepsConnectionsWaiting(t *testing.T) {
	limit := api.NewConnLimit(2)
	s := openOneWith(t, func(c *server.Config) { c.Conns = limit })
	first, second := dialServer(t, s), dialServer(t, s)
	for i, c := range []net.Conn{first, second} {
		if code, err := healthz(c, 10*time.Second); code != http.StatusOK {
			t.Fatalf("connection %d: healthz %d, %v; want 200", i+1, code, err)
		}
	}
	if limit.Open() != 2 {
		t.Fatalf("%d connections open, want 2", limit.Open())
	}

	third := dialServer(t, s)
	code, err := healthz(third, 300*time.Millisecond)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a third connection's healthz = %d, %v with two of two open; want no answer yet", code, err)
	}
	first.Close()
	if code, err := answer(third, 10*time.Second); code != http.StatusOK {
		t.Fatalf("the third connection's healthz = %d, %v after the first closed; want 200", code, err)
	}

	dialServer(t, s) // waits in the listen queue through Close
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
	if limit.Open() != 0 {
		t.Fatalf("%d connections counted open after Close, want 0", limit.Open())
	}
}
