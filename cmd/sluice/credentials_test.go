package main

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/server"
)

// TestNodeletCredentials runs a dispatcher with node-bound tokens and real
// nodelets: a nodelet whose token is another node's is refused at once
// with a reason that names the fix, one with its own runs a task, and the
// task's logs reach a reader through the dispatcher, which the nodelet's
// log server admits by the node's log token alone.
func TestNodeletCredentials(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tokens, err := server.ParseTokens(strings.NewReader("adm admin\nrd reader\ntok-1 nodelet n1\ntok-2 nodelet n2\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.Open(server.Config{
		ID: 1, Peers: map[uint64]string{1: ""}, Dir: filepath.Join(t.TempDir(), "dispatcher"),
		HTTPAddr: "127.0.0.1:0", Tokens: tokens,
	})
	if err != nil {
		t.Fatalf("open the dispatcher: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close the dispatcher: %v", err)
		}
	})
	logger := slog.New(slog.DiscardHandler)
	node := func(name, token string) nodeletConfig {
		return nodeletConfig{dispatchers: []string{srv.Addr()}, token: token, name: name, runtime: "sim", cpu: 2000, memory: 1 << 30, offlineOvercommit: 1}
	}

	// n2 with n1's token: refused, not retried for ever.
	jctx, jcancel := context.WithTimeout(ctx, 20*time.Second)
	_, err = startNodelet(jctx, node("n2", "tok-1"), logger)
	jcancel()
	if err == nil || !strings.Contains(err.Error(), "refused this node's token") || !strings.Contains(err.Error(), "may not register") {
		t.Fatalf("nodelet n2 with n1's token: %v", err)
	}
	stop, err := startNodelet(ctx, node("n1", "tok-1"), logger)
	if err != nil {
		t.Fatalf("nodelet n1: %v", err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop nodelet n1: %v", err)
		}
	})

	admin, err := api.NewClient(api.ClientConfig{Addrs: []string{srv.Addr()}, Token: "adm"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	job := api.JobSpec{Name: "logged", Tasks: []api.TaskGroupSpec{{Count: 1, Pod: api.PodSpec{
		Sim: &api.SimSpec{RunTime: api.Duration(time.Hour)},
		Containers: []api.ContainerSpec{{Image: api.Image{Rootfs: "/img"}, Command: []string{"x"},
			Resources: api.Resources{CPU: 100, Memory: 1 << 20}}},
	}}}}
	sub, err := admin.Submit(ctx, []api.JobSpec{job}, api.SubmitOptions{})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	task := waitOneTask(ctx, t, admin, sub.Jobs[0], func(ts api.TaskStatus) bool {
		return ts.State == api.TaskRunning && ts.Node == "n1"
	}).ID
	reader, err := api.NewClient(api.ClientConfig{Addrs: []string{srv.Addr()}, Token: "rd"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reader.Close)
	var out bytes.Buffer
	if err := reader.Logs(ctx, task, api.LogOptions{}, &out); err != nil {
		t.Fatalf("logs of %s through the dispatcher: %v", task, err)
	}
	nodes, err := reader.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Nodes) != 1 || nodes.Nodes[0].Spec.LogToken != "" {
		t.Fatalf("nodes as a reader sees them: %+v", nodes.Nodes)
	}
}
