package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
)

// TestServerClientExample keeps examples/server-client.json showing what
// it is there for: a server group of one bridge-mode task with a dynamic
// port named http that http-serve serves, and a client group of bridge-
// mode tasks that fetch from it.
func TestServerClientExample(t *testing.T) {
	jobs := readServerClientExample(t)
	if len(jobs) != 1 || len(jobs[0].Tasks) != 2 {
		t.Fatalf("example holds %d jobs, want one with two task groups", len(jobs))
	}
	server, client := jobs[0].Tasks[0], jobs[0].Tasks[1]
	if server.Name != "server" || server.Count != 1 || client.Name != "client" || client.Count < 2 {
		t.Errorf("groups %s×%d and %s×%d, want server×1 and client×2 or more", server.Name, server.Count, client.Name, client.Count)
	}
	for _, g := range jobs[0].Tasks {
		if g.Pod.Network.Mode != api.NetworkBridge || len(g.Pod.Containers) != 1 {
			t.Errorf("group %s: network %q, %d containers; want bridge and one", g.Name, g.Pod.Network.Mode, len(g.Pod.Containers))
		}
	}
	sc, cc := server.Pod.Containers[0], client.Pod.Containers[0]
	if p := sc.Resources.Ports; len(p) != 1 || p[0].Name != "http" || p[0].Port != 0 {
		t.Errorf("server ports %+v, want one dynamic port named http", p)
	}
	if !strings.Contains(strings.Join(sc.Command, " "), "http-serve") || !strings.Contains(strings.Join(cc.Command, " "), "fetch -group server -port http") {
		t.Errorf("commands %q and %q, want http-serve and fetch of group server's port http", sc.Command, cc.Command)
	}
}

func readServerClientExample(t *testing.T) []api.JobSpec {
	t.Helper()
	b, err := os.ReadFile("../../examples/server-client.json")
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := api.DecodeJobs(b)
	if err != nil {
		t.Fatalf("examples/server-client.json: %v", err)
	}
	return jobs
}

// TestDevServerClientOverTheBridge runs examples/server-client.json on
// `sluice dev` with a container node: each client pod finds the server in
// the task listing (the node's host IP, since the node advertises
// loopback, and the server's assigned port) and fetches from it across
// the bridge, so every task and the job succeed.
func TestDevServerClientOverTheBridge(t *testing.T) {
	needContainers(t)
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		t.Skip("needs the CNI plugins in /usr/lib/cni (scripts/install-cni.sh)")
	}
	image := demoImage(t)
	b, err := os.ReadFile("../../examples/server-client.json")
	if err != nil {
		t.Fatal(err)
	}
	body := strings.ReplaceAll(string(b), "/var/lib/sluice/images/demo", image)
	body = strings.ReplaceAll(body, `"-wait", "1m"`, `"-wait", "30s"`)
	body = strings.ReplaceAll(body, `"-timeout", "2m"`, `"-timeout", "30s"`)
	jobs := filepath.Join(t.TempDir(), "jobs.json")
	if err := os.WriteFile(jobs, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	// A /23 of 10.128.0.0/9 and ten ports of 40000-59999 at random (the
	// seed is logged), so that runs at once on one host share neither.
	seed := time.Now().UnixNano()
	t.Logf("subnet and ports seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	cidr := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(128 + rng.IntN(127)), byte(rng.IntN(128) * 2), 0}), 23)
	lo := 40000 + 10*rng.IntN(2000)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	err = run(ctx, []string{"dev", "--runtime", "container", "--http", "127.0.0.1:0", "--nodes", "1", "--sim-nodes", "0",
		"--image-roots", filepath.Dir(image), "--pod-cidr", cidr.String(), "--ports", fmt.Sprintf("%d-%d", lo, lo+9),
		"--submit", jobs, "--exit"}, &out, &errOut)
	if err != nil {
		t.Fatalf("dev: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	// The listing's host is the node's host IP, the gateway of its pod
	// subnet, where the client reached the server's port.
	sub, _, err := devPodNetwork(cidr, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"server-client  offline  succeeded  3",
		fmt.Sprintf("j1/1/0/1/c0: fetched http://%s:", sub.Addr().Next()),
		"from task j1/0/0/1: task j1/0/0/1 answered request",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s\nstderr:\n%s", want, out.String(), errOut.String())
		}
	}
}
