package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// TestDevBridgePodsReachTheAPI runs `sluice dev` with a container node and
// a cluster-mode appmaster in a bridge-mode pod: it reaches the API, which
// listens on loopback, at its gateway (its SLUICE_ADDR), leases capboxes
// and runs tasks in them, and the job succeeds; a pod asking for the
// host's network fails as network_denied. The cluster's bridge and
// masquerade rule are gone after it.
func TestDevBridgePodsReachTheAPI(t *testing.T) {
	needContainers(t)
	needCNI(t)
	image := demoImage(t)
	buildStatic(t, filepath.Join(image, "appmaster"), "./examples/appmaster")
	dir := t.TempDir()
	jobs := filepath.Join(dir, "jobs.ndjson")
	body := fmt.Sprintf(`{"name":"am","appmaster":true,"retry":{"max_attempts":1},"tasks":[{"name":"master","count":1,"pod":{"containers":[{"image":{"rootfs":%[1]q},"command":["/appmaster","-image",%[1]q,"-capboxes","1","-tasks","2","--","/workload","primes","1000"],"resources":{"cpu":"100m","memory":"64Mi"}}]}}]}
{"name":"on-host","retry":{"max_attempts":1},"tasks":[{"count":1,"pod":{"network":{"mode":"host"},"containers":[{"image":{"rootfs":%[1]q},"command":["/workload","env"],"resources":{"cpu":"100m","memory":"32Mi"}}]}}]}
`, image)
	if err := os.WriteFile(jobs, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cidr, _ := testPodCIDR(t, 23)
	bridge := fmt.Sprintf("sdev%d-0", os.Getpid()%10000000)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	err := run(ctx, []string{"dev", "--runtime", "container", "--http", "127.0.0.1:0", "--nodes", "1", "--sim-nodes", "0",
		"--image-roots", filepath.Dir(image), "--pod-cidr", cidr.String(), "--submit", jobs, "--exit"}, &out, &errOut)
	if err != nil {
		t.Fatalf("dev: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	for _, want := range []string{
		"j1   am       offline  succeeded  1",
		"j2   on-host  offline  failed     1",
		"leased 1 capboxes on node-1 (1) and ran 2 tasks in them: 2 succeeded",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s\nstderr:\n%s", want, out.String(), errOut.String())
		}
	}
	if _, err := net.InterfaceByName(bridge); err == nil {
		t.Errorf("bridge %s is left after dev", bridge)
	}
	if b, err := exec.Command("iptables-save", "-t", "nat").Output(); err != nil || strings.Contains(string(b), "sluice pod network "+bridge) {
		t.Errorf("masquerade rule of %s after dev (%v)", bridge, err)
	}
}
