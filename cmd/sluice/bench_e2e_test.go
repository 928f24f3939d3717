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
	if res.Nodes != 20 || res.Replicas != 1 || len(res.Steps) != 1 || !res.Metrics {
		t.Fatalf("result %+v", res)
	}
	if off, _ := benchE2E(t, "--nodes", "20", "--metrics=false"); off.Metrics || len(off.Steps) != 1 || off.Steps[0].PlacedTasks == 0 {
		t.Errorf("--metrics=false: result %+v", off)
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

// TestBenchE2ESoakJSON soaks one replica for three rows of a second, the
// fleet in two child processes: each row reports the memory of this
// process and of both fleet processes.
func TestBenchE2ESoakJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and fleet processes")
	}
	t.Setenv(testAsMainEnv, "1") // for the children only: this process runs its tests
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	err := run(ctx, []string{"bench", "e2e", "--replicas", "1", "--nodes", "20", "--fleet-procs", "2", "--start-rate", "20",
		"--soak", "3s", "--soak-interval", "1s", "--array-size", "uniform:1,3", "--run-time", "50ms",
		"--p99-placed-limit", "20s", "--p99-running-limit", "20s", "--work-dir", t.TempDir(), "--json"}, &out, &errOut)
	if err != nil {
		t.Fatalf("bench e2e --soak: %v\nstderr: %s", err, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var res e2ebench.SoakResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("the last line %q: %v", lines[len(lines)-1], err)
	}
	if res.SoakSeconds != 3 || res.RowSeconds != 1 || len(res.Rows) != 3 || strings.Join(res.Processes, ",") != "bench,fleet-1,fleet-2" ||
		len(res.MemoryLimitMiB) != 3 || res.MemoryLimitMiB[1] != res.MemoryLimitMiB[2] {
		t.Fatalf("result %+v", res)
	}
	for _, row := range res.Rows {
		if len(row.RSSMiB) != 3 || row.RSSMiB[0] <= 0 || row.RSSMiB[1] <= 0 || row.RSSMiB[2] <= 0 || row.OfferedTasks == 0 || row.Errors != 0 {
			t.Errorf("row %+v", row)
		}
	}
	if res.Total.Tasks == 0 || res.Total.PlacedTasks != res.Total.Tasks || len(res.Memory) != 3 || res.Memory[0].Judged {
		t.Errorf("total %+v, memory %+v (one row after the first two: not judged)", res.Total, res.Memory)
	}
	if !strings.Contains(errOut.String(), "e2e: soak row") {
		t.Errorf("stderr lacks the rows' progress:\n%s", errOut.String())
	}
}

func TestBenchE2ESoakRejectsSteps(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"bench", "e2e", "--soak", "1m", "--steps", "3", "--step-rate", "10"}, &out, &errOut)
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--step-rate, --steps do not apply") {
		t.Errorf("--soak with steps: err = %v, want a usage error naming them", err)
	}
	err = run(context.Background(), []string{"bench", "e2e", "--soak", "1h", "--timeout", "10m"}, &out, &errOut)
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "shorter than the warm-up") {
		t.Errorf("--soak 1h --timeout 10m: err = %v, want a usage error", err)
	}
}

func TestPrintBenchSoak(t *testing.T) {
	res := e2ebench.SoakResult{Replicas: 3, Nodes: 10000, ArraySize: "uniform:1,40", RunTime: "fixed:1s", TargetTasksPerSec: 100000,
		SoakSeconds: 180, RowSeconds: 60, Settle: 2, MoveLeaderEverySeconds: 60, Processes: []string{"bench", "fleet-1"},
		MemoryLimitMiB: []float64{4608, 0},
		Rows: []e2ebench.SoakRow{
			{Row: 1, Seconds: 60, OfferedTasksPerSec: 100100, PlacedTasksPerSec: 99000, P99SubmitToPlacedMs: 450, P99SubmitToRunningMs: 700,
				LeaderMoves: 1, RSSMiB: []float64{3012.4, 801}, Holds: true},
			{Row: 2, StartSeconds: 60, Seconds: 60, OfferedTasksPerSec: 99900, PlacedTasksPerSec: 80000, Errors: 2, RSSMiB: []float64{3100, 805},
				Reasons: []string{"placed 80000 of 99900 tasks/s offered (80%, want 90%)", "2 requests failed"}},
		},
		Total:  e2ebench.Step{OfferedTasksPerSec: 100000, PlacedTasksPerSec: 89500, Tasks: 12000000, Errors: 2, LeaderMoves: 2},
		Memory: []e2ebench.MemoryTrend{{Process: "bench", FromRow: 3}, {Process: "fleet-1", FromRow: 3, Rows: 4, FirstMiB: 800, LastMiB: 900, SlopeMiBPerMin: 33.3, LimitMiBPerMin: 8.5, Judged: true}},
		Notes:  []string{"memory of bench not judged: 0 rows after the first 2, want 3 or more"},
		Reasons: []string{"row 2: placed 80000 of 99900 tasks/s offered (80%, want 90%)",
			"memory of fleet-1 grows 33.3 MiB/min over rows 3 to 6 (800 to 900 MiB), above 8.5"},
	}
	var b bytes.Buffer
	if err := printBenchSoak(&b, res, false); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{"100000 tasks/s for 3m0s in rows of 1m0s; the leadership moved every 1m0s",
		"RSS MIB bench/fleet-1", "3012 / 801", "1m0s", "80%", "no: placed 80000 of 99900 tasks/s offered (80%, want 90%); 2 requests failed",
		"whole soak: 89500 of 100000 tasks/s placed", "soft memory limits: bench 4608 MiB, fleet-1 none", "note: memory of bench not judged: 0 rows after the first 2",
		"memory of fleet-1, rows 3 to 6: 800 to 900 MiB, slope +33.3 MiB/min (limit 8.5): grows",
		"soak: did not hold: row 2: placed 80000"} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	b.Reset()
	if err := printBenchSoak(&b, res, true); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	rows, _ := back["rows"].([]any)
	if len(rows) != 2 {
		t.Fatalf("JSON rows %v", back["rows"])
	}
	row, _ := rows[0].(map[string]any)
	for _, k := range []string{"row", "placed_tasks_per_sec", "p99_submit_to_placed_ms", "p99_submit_to_running_ms", "errors", "rss_mib", "holds"} {
		if _, ok := row[k]; !ok {
			t.Errorf("a JSON row lacks %q: %v", k, row)
		}
	}
	for _, k := range []string{"processes", "memory", "holds", "reasons", "total"} {
		if _, ok := back[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
}
