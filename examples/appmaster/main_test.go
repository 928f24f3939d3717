package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	s, err := parse([]string{"-capboxes", "3", "-tasks", "7", "--", "/bin/x", "-y"})
	if err != nil || s.capboxes != 3 || s.tasks != 7 || strings.Join(s.command, " ") != "/bin/x -y" {
		t.Fatalf("parse = %+v, %v", s, err)
	}
	if s, err := parse(nil); err != nil || strings.Join(s.command, " ") != "/workload primes 300000" {
		t.Fatalf("parse() = %+v, %v", s, err)
	}
	for _, args := range [][]string{{"-tasks", "0"}, {"-capboxes", "-1"}, {"-timeout", "0s"}, {"-connect-wait", "-1s"}, {"-fly"}} {
		if _, err := parse(args); err == nil {
			t.Errorf("parse(%q) succeeded", args)
		}
	}
}

// TestRunOutsideAPod: without the pod's environment, run says which
// variables are missing; with a dispatcher on loopback it cannot reach,
// it says why a pod cannot.
func TestRunOutsideAPod(t *testing.T) {
	for _, name := range []string{"SLUICE_ADDR", "SLUICE_TOKEN", "SLUICE_JOB_ID"} {
		t.Setenv(name, "")
	}
	s, err := parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	s.connect = 0
	if _, err := run(context.Background(), s); err == nil || !strings.Contains(err.Error(), "SLUICE_ADDR, SLUICE_TOKEN, SLUICE_JOB_ID not set") {
		t.Errorf("run without the environment: %v", err)
	}
	t.Setenv("SLUICE_ADDR", "http://127.0.0.1:1")
	t.Setenv("SLUICE_TOKEN", "sjt1.x")
	t.Setenv("SLUICE_JOB_ID", "j1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := run(ctx, s); err == nil || !strings.Contains(err.Error(), "inside a pod is the pod itself") {
		t.Errorf("run with an unreachable loopback dispatcher: %v", err)
	}
	for addrs, want := range map[string]bool{"http://127.0.0.1:1": true, "http://localhost:1,http://[::1]:2": true,
		"http://10.0.0.1:1": false, "http://127.0.0.1:1,http://10.0.0.1:1": false, "": false} {
		if loopback(addrs) != want {
			t.Errorf("loopback(%q) = %v", addrs, !want)
		}
	}
}
