package porttest

import (
	"net"
	"testing"
)

// Addrs returns n distinct 127.0.0.1:port addresses free right now.
func Addrs(tb testing.TB, n int) []string {
	tb.Helper()
	out := make([]string, n)
	ls := make([]net.Listener, n)
	defer func() {
		for _, l := range ls {
			if l != nil {
				_ = l.Close()
			}
		}
	}()
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("porttest: listen: %v", err)
		}
		ls[i], out[i] = l, l.Addr().String()
	}
	return out
}

// Ports returns the ports of Addrs(tb, n).
func Ports(tb testing.TB, n int) []int {
	tb.Helper()
	ports := make([]int, n)
	for i, a := range Addrs(tb, n) {
		addr, err := net.ResolveTCPAddr("tcp", a)
		if err != nil {
			tb.Fatalf("porttest: %v", err)
		}
		ports[i] = addr.Port
	}
	return ports
}
