package chaosbench_test

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sluicehq/sluice/bench/chaosbench"
)

// echoServer answers each line with itself until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line through addr's connection c and reads it back
// within timeout; it reports the time taken, or an error.
func roundTrip(c net.Conn, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	if err := c.SetDeadline(start.Add(timeout)); err != nil {
		return 0, err
	}
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return 0, err
	}
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func TestProxyModes(t *testing.T) {
	p, err := chaosbench.NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	c := dial()
	if _, err := roundTrip(c, 5*time.Second); err != nil {
		t.Fatalf("pass: %v", err)
	}

	// Drop closes the open connection and forwards nothing on a new one.
	p.Set(chaosbench.Drop, 0)
	if _, err := roundTrip(c, 2*time.Second); err == nil {
		t.Error("drop: the connection open before still carries bytes")
	}
	if _, err := roundTrip(dial(), 300*time.Millisecond); err == nil {
		t.Error("drop: a new connection carries bytes")
	}

	const delay = 100 * time.Millisecond
	p.Set(chaosbench.Delay, delay)
	d, err := roundTrip(dial(), 5*time.Second)
	if err != nil || d < 2*delay {
		t.Errorf("delay: round trip %v, %v; want at least %v (both ways)", d, err, 2*delay)
	}

	p.Set(chaosbench.Pass, 0)
	if _, err := roundTrip(dial(), 5*time.Second); err != nil {
		t.Errorf("pass again: %v", err)
	}
}

func TestProxyCloseEndsConnections(t *testing.T) {
	p, err := chaosbench.NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := roundTrip(c, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := roundTrip(c, 2*time.Second); err == nil {
		t.Error("a connection carries bytes after Close")
	}
	if c2, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		c2.Close()
		t.Error("the proxy accepts after Close")
	}
}
