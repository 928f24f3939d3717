package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDevRunsJobsToTheEnd runs `sluice dev` as the demo does, on simulated
// nodes: a real dispatcher, nodelets over HTTP, the jobs submitted through
// the API, the summary printed once every job ended.
func TestDevRunsJobsToTheEnd(t *testing.T) {
	dir := t.TempDir()
	jobs := filepath.Join(dir, "jobs.ndjson")
	body := `{"name":"quick","tasks":[{"count":50,"pod":{"containers":[{"image":{"rootfs":"/img"},"command":["/w"],"resources":{"cpu":"100m","memory":"16Mi"}}],"sim":{"run_time":"50ms"}}}]}
{"name":"fails","retry":{"max_attempts":1},"tasks":[{"count":2,"pod":{"containers":[{"image":{"rootfs":"/img"},"command":["/w"],"resources":{"cpu":"100m","memory":"16Mi"}}],"sim":{"run_time":"10ms","exit_code":3}}}]}
{"name":"scale","pool":"sim","tasks":[{"count":500,"pod":{"containers":[{"image":{"rootfs":"/img"},"command":["/w"],"resources":{"cpu":"100m","memory":"16Mi"}}],"sim":{"run_time":"20ms"}}}]}
`
	if err := os.WriteFile(jobs, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	addrFile := filepath.Join(dir, "addr")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	err := run(ctx, []string{"dev", "--runtime", "sim", "--http", "127.0.0.1:0", "--nodes", "2", "--sim-nodes", "2",
		"--addr-file", addrFile, "--submit", jobs, "--exit", "--appmaster", "5"}, &out, &errOut)
	if err != nil {
		t.Fatalf("dev: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	for _, want := range []string{
		"submitted " + jobs + ": j1 j2 j3",
		"j1   quick  offline  succeeded  50",
		"j2   fails  offline  failed     2      0          2",
		"j3   scale  offline  succeeded  500",
		"placed 554 tasks", // and two capboxes
		"550 succeeded, 2 failed, 0 killed",
		// The appmaster: its job, its two capboxes, five tasks in them.
		"appmaster j4 (client mode, appmaster SDK): leased 2 capboxes on",
		"ran 5 tasks in them, each capbox one task after another: 5 succeeded; then released them",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if a, err := os.ReadFile(addrFile); err != nil || !strings.HasPrefix(string(a), "http://127.0.0.1:") {
		t.Errorf("addr file: %q, %v", a, err)
	}
}

func TestDevRejectsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--runtime", "vm"}, "--runtime"},
		{[]string{"--nodes", "0", "--sim-nodes", "0"}, "at least one node"},
		{[]string{"--exit"}, "--exit needs --submit"},
		{[]string{"--appmaster", "3"}, "--appmaster"},
		{[]string{"--submit", "/nonexistent/jobs.json"}, "--submit"},
		{[]string{"--runtime", "sim", "--node-cpu", "lots"}, "--node-cpu"},
		{[]string{"--log-level", "loud"}, "--log-level"},
	} {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"dev", "--http", "127.0.0.1:0"}, tc.args...), &out, &out)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("dev %q = %v, want a usage error naming %s", tc.args, err, tc.want)
		}
	}
}
