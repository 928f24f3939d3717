package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/bench/e2ebench"
)

// TestBenchE2EJSON runs one short step on one replica and a small fleet;
// --json prints the result as the last line of stdout.
func TestBenchE2EJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and a fleet")
	}
	res, stderr := benchE2E(t, "--nodes", "20")
	if res.Nodes != 20 || res.Replicas != 1 || len(res.Steps) != 1 {
		t.Fatalf("result %+v", res)
	}
	st := res.Steps[0]
	if st.Tasks == 0 || st.PlacedTasks != st.Tasks || st.Errors != 0 || st.TargetTasksPerSec != 20 {
		t.Errorf("step %+v", st)
	}
	if st.Sustained && (res.MaxSustainedTasksPerSec != st.PlacedTasksPerSec || res.KneeStep != 0) ||
		!st.Sustained && (res.MaxSustainedTasksPerSec != 0 || res.KneeStep != 1) {
		t.Errorf("summary %+v of step %+v", res, st)
	}
	for _, want := range []string{"e2e: cluster up", "e2e: fleet ready", "e2e: step"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// TestBenchE2EFleetProcs runs the fleet in two child processes of this
// binary (as the sluice binary: testAsMainEnv) against the cluster in
// this one.
func TestBenchE2EFleetProcs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and fleet processes")
	}
	t.Setenv(testAsMainEnv, "1") // for the children only: this process runs its tests
	res, stderr := benchE2E(t, "--nodes", "21", "--fleet-procs", "2")
	if res.Nodes != 21 || len(res.Steps) != 1 || res.Steps[0].Tasks == 0 || res.Steps[0].PlacedTasks != res.Steps[0].Tasks {
		t.Fatalf("result %+v", res)
	}
	if !strings.Contains(stderr, "nodes=21") {
		t.Errorf("stderr lacks the 21 nodes ready:\n%s", stderr)
	}
}

func TestBenchE2ERejectsBadFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"bench", "e2e", "--replicas", "9", "--step-factor", "3", "--step-rate", "100",
		"--array-size", "uniform:9"}, &out, &errOut)
	var ue usageError
	if !errors.As(err, &ue) {
		t.Fatalf("err = %v, want a usage error", err)
	}
	for _, want := range []string{"Replicas 9", "set one, not both", "ArraySize"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant it to name %q", err, want)
		}
	}
	err = run(context.Background(), []string{"bench", "e2e", "--warmup", "-5s"}, &out, &errOut)
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "Warmup -5s") {
		t.Errorf("--warmup -5s: err = %v, want a usage error naming it", err)
	}
	err = run(context.Background(), []string{"bench", "e2e", "--job-retention", "-1s"}, &out, &errOut)
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--job-retention -1s") {
		t.Errorf("--job-retention -1s: err = %v, want a usage error naming it", err)
	}
}

func TestPrintBenchE2ETable(t *testing.T) {
	res := e2ebench.Result{Replicas: 3, Nodes: 2000, ArraySize: "uniform:1,40", RunTime: "fixed:1s", StepSeconds: 10,
		MaxSustainedTasksPerSec: 995, P99SubmitToPlacedMs: 40.5, P99SubmitToRunningMs: 120.25, SustainedStep: 2, KneeStep: 3,
		WarmupSeconds: 20, Warmup: &e2ebench.Step{TargetTasksPerSec: 500, OfferedTasksPerSec: 499, PlacedTasksPerSec: 431, Tasks: 9980, Sustained: false,
			Reasons: []string{"placed 431 of 499 tasks/s offered (86%, want 90%)"}},
		Steps: []e2ebench.Step{
			{Step: 1, TargetTasksPerSec: 500, OfferedTasksPerSec: 498, PlacedTasksPerSec: 498, P99SubmitToPlacedMs: 30, Tasks: 4980, Sustained: true},
			{Step: 2, TargetTasksPerSec: 1000, OfferedTasksPerSec: 1001, PlacedTasksPerSec: 995, P99SubmitToPlacedMs: 40.5, Tasks: 10010, Sustained: true},
			{Step: 3, TargetTasksPerSec: 2000, OfferedTasksPerSec: 2003, PlacedTasksPerSec: 1500, Tasks: 20030,
				Reasons: []string{"placed 1500 of 2003 tasks/s offered (75%, want 90%)"}},
		}}
	var b bytes.Buffer
	if err := printBenchE2E(&b, res, false); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{"3 replicas, 2000 simulated nodes; jobs of uniform:1,40 tasks running 1s; steps of 10s",
		"STEP", "75%", "no: placed 1500 of 2003", "warm-up", "not judged", "max sustained: 995 tasks/s (step 2); p99 submit→placed 40.5 ms, submit→running 120.2 ms",
		"knee: step 3 (2000 tasks/s offered)"} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	b.Reset()
	if err := printBenchE2E(&b, res, true); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, "no: placed 431") {
		t.Errorf("the warm-up was judged:\n%s", got)
	}
	for _, k := range []string{"nodes", "warmup", "max_sustained_tasks_per_sec", "p99_submit_to_placed_ms", "p99_submit_to_running_ms", "steps"} {
		if _, ok := back[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, b.String())
		}
	}
}

// benchE2E runs a one-step `sluice bench e2e` on one replica at 20 tasks/s
// with args added, and returns its JSON result and its stderr.
func benchE2E(t *testing.T, args ...string) (e2ebench.Result, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	argv := append([]string{"bench", "e2e", "--replicas", "1", "--start-rate", "20", "--steps", "1",
		"--step-duration", "2s", "--array-size", "uniform:1,3", "--run-time", "50ms",
		"--p99-placed-limit", "20s", "--p99-running-limit", "20s", "--work-dir", t.TempDir(), "--json"}, args...)
	if err := run(ctx, argv, &out, &errOut); err != nil {
		t.Fatalf("bench e2e: %v\nstderr: %s", err, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var res e2ebench.Result
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("the last line %q: %v", lines[len(lines)-1], err)
	}
	return res, errOut.String()
}
