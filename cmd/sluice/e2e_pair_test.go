package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
// `sluice dev` with container nodes: each client pod finds the server in
// the task listing (its node's host IP, the gateway of the node's pod
// subnet, since the node advertises loopback; and the server's assigned
// port) and fetches from it across the bridge, so every task and the job
// succeed. On one node the clients run beside the server; on three, with
// a server and a client too big to share a node (600m and 450m of 1 CPU),
// each client runs on another node than the server's, whose host IP it
// reaches through its own node's bridge.
func TestDevServerClientOverTheBridge(t *testing.T) {
	needContainers(t)
	needCNI(t)
	image := demoImage(t)
	b, err := os.ReadFile("../../examples/server-client.json")
	if err != nil {
		t.Fatal(err)
	}
	example := strings.ReplaceAll(string(b), "/var/lib/sluice/images/demo", image)
	example = strings.ReplaceAll(example, `"-wait", "1m"`, `"-wait", "30s"`)
	example = strings.ReplaceAll(example, `"-timeout", "2m"`, `"-timeout", "30s"`)
	for _, tc := range []struct {
		name  string
		nodes int
		apart bool // a server and a client cannot share a node
	}{{"one node", 1, false}, {"three nodes", 3, true}} {
		t.Run(tc.name, func(t *testing.T) {
			body, cpu := example, "2"
			if tc.apart {
				server, client := `"cpu": "250m", "memory": "32Mi", "ports"`, `"cpu": "250m", "memory": "32Mi"}`
				if strings.Count(body, server) != 1 || strings.Count(body, client) != 1 {
					t.Fatalf("the example's resources are not as this test expects:\n%s", body)
				}
				body = strings.Replace(body, server, `"cpu": "600m", "memory": "32Mi", "ports"`, 1)
				body = strings.Replace(body, client, `"cpu": "450m", "memory": "32Mi"}`, 1)
				cpu = "1"
			}
			jobs := filepath.Join(t.TempDir(), "jobs.json")
			if err := os.WriteFile(jobs, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			// Ten ports of 40000-59999 at random too, so that runs at
			// once on one host share neither subnet nor ports.
			cidr, rng := testPodCIDR(t, 22)
			lo := 40000 + 10*rng.IntN(2000)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var out, errOut bytes.Buffer
			err = run(ctx, []string{"dev", "--runtime", "container", "--http", "127.0.0.1:0", "--nodes", strconv.Itoa(tc.nodes), "--sim-nodes", "0",
				"--node-cpu", cpu, "--image-roots", filepath.Dir(image), "--pod-cidr", cidr.String(), "--ports", fmt.Sprintf("%d-%d", lo, lo+9),
				"--submit", jobs, "--exit"}, &out, &errOut)
			if err != nil {
				t.Fatalf("dev: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
			}
			for _, want := range []string{
				"server-client  offline  succeeded  3",
				"j1/1/0/1/c0: fetched http://",
				"from task j1/0/0/1: task j1/0/0/1 answered request",
			} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s\nstderr:\n%s", want, out.String(), errOut.String())
				}
			}
			// The client fetched from a node's host IP: a gateway.
			var gateways []string
			for n := range tc.nodes {
				sub, _, err := devPodNetwork(cidr, n)
				if err != nil {
					t.Fatal(err)
				}
				gateways = append(gateways, sub.Addr().Next().String())
			}
			if !slices.ContainsFunc(gateways, func(gw string) bool {
				return strings.Contains(out.String(), "j1/1/0/1/c0: fetched http://"+gw+":")
			}) {
				t.Errorf("the client fetched from none of the nodes' host IPs %v:\n%s", gateways, out.String())
			}
		})
	}
}
