package main

import (
	"bufio"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
)

func TestDevPodNetwork(t *testing.T) {
	cidr := netip.MustParsePrefix("10.214.0.0/16")
	for n, want := range map[int]string{0: "10.214.0.0/24", 1: "10.214.1.0/24", 255: "10.214.255.0/24"} {
		sub, bridge, err := devPodNetwork(cidr, n)
		if err != nil || sub.String() != want || bridge != fmt.Sprintf("sdev%d-%d", os.Getpid()%10000000, n) || len(bridge) > 15 {
			t.Errorf("node %d: %v %s %v, want %s", n, sub, bridge, err, want)
		}
	}
	for _, tc := range []struct {
		cidr string
		n    int
	}{{"10.214.0.0/16", 256}, {"10.214.0.0/24", 0}, {"10.214.2.0/23", 2}, {"10.214.0.1/16", 0}} {
		if sub, _, err := devPodNetwork(netip.MustParsePrefix(tc.cidr), tc.n); err == nil {
			t.Errorf("%s node %d = %v, want an error", tc.cidr, tc.n, sub)
		}
	}
}

// TestForwardAPI: a connection to the forwarder, on another loopback
// address at the API's port, reaches the API and back, and close ends
// connections still open.
func TestForwardAPI(t *testing.T) {
	api, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	go func() {
		for {
			c, err := api.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				fmt.Fprintf(c, "api got %s", line)
			}()
		}
	}()
	gw := netip.MustParseAddr("127.0.0.2")
	fw, err := forwardAPI(gw, "http://"+api.Addr().String(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("forwardAPI: %v", err)
	}
	_, port, _ := net.SplitHostPort(api.Addr().String())
	c, err := net.Dial("tcp", net.JoinHostPort(gw.String(), port))
	if err != nil {
		t.Fatalf("dial the forwarder: %v", err)
	}
	fmt.Fprintln(c, "hello")
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || got != "api got hello\n" {
		t.Errorf("through the forwarder: %q, %v", got, err)
	}
	idle, err := net.Dial("tcp", net.JoinHostPort(gw.String(), port))
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if _, err := bufio.NewReader(idle).ReadString('\n'); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Errorf("an open connection after close: read %v, want it closed", err)
	}
	if _, err := forwardAPI(gw, "no-port", slog.New(slog.DiscardHandler)); err == nil {
		t.Error("forwardAPI to an address without a port succeeded")
	}
}
