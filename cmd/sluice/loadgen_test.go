package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/server"
	"github.com/sluicehq/sluice/loadgen"
)

// TestLoadgenRunAgainstFleet runs a dispatcher, `loadgen fleet` with 20
// nodes, and `loadgen run` for two seconds at 40 jobs/s against them.
func TestLoadgenRunAgainstFleet(t *testing.T) {
	s, err := server.Open(server.Config{ID: 1, Peers: map[uint64]string{1: ""},
		Dir: filepath.Join(t.TempDir(), "d"), HTTPAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := waitLeading(context.Background(), s); err != nil {
		t.Fatal(err)
	}

	fleetCtx, stopFleet := context.WithCancel(context.Background())
	var fleetOut, fleetErr bytes.Buffer
	var wg sync.WaitGroup
	var fleetRunErr error
	wg.Go(func() {
		fleetRunErr = run(fleetCtx, []string{"loadgen", "fleet", "--addr", s.Addr(), "--nodes", "20",
			"--cpu", "8", "--memory", "16Gi", "--every", "500ms"}, &fleetOut, &fleetErr)
	})
	defer func() {
		stopFleet()
		wg.Wait()
		if fleetRunErr != context.Canceled {
			t.Errorf("loadgen fleet: %v (stderr %q)", fleetRunErr, fleetErr.String())
		}
		if !strings.Contains(fleetOut.String(), "20 simulated nodes registered") {
			t.Errorf("loadgen fleet printed %q", fleetOut.String())
		}
	}()
	c, err := api.NewClient(api.ClientConfig{Addrs: []string{s.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := waitNodes(context.Background(), c, 20); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	err = run(ctx, []string{"loadgen", "run", "--addr", s.Addr(), "--rate", "40", "--duration", "2s",
		"--array-size", "uniform:1,8", "--run-time", "uniform:50ms,200ms", "--pool", "sim", "--seed", "3",
		"--shape", "500m/512Mi=3", "--shape", "1/1Gi", "--queue", "a=2", "--queue", "b", "--json"}, &out, &errOut)
	if err != nil {
		t.Fatalf("loadgen run: %v\nstderr: %s", err, errOut.String())
	}
	var res loadgen.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("--json printed %q: %v", out.String(), err)
	}
	t.Logf("%s", out.String())
	if res.Jobs != 80 || res.Tasks < 80 || res.Errors != 0 || res.CommittedTasks != res.Tasks {
		t.Errorf("jobs %d tasks %d errors %d committed %d; want 80 jobs, no errors, all committed",
			res.Jobs, res.Tasks, res.Errors, res.CommittedTasks)
	}
	if res.PlacedTasks != res.Tasks || res.UnplacedTasks != 0 || res.RunningTasks == 0 {
		t.Errorf("placed %d unplaced %d running %d of %d tasks", res.PlacedTasks, res.UnplacedTasks, res.RunningTasks, res.Tasks)
	}
	l := res.Latency
	for name, st := range map[string]loadgen.LatencyStats{"committed": l.Committed, "placed": l.Placed, "running": l.Running} {
		if st.P50Ms <= 0 || st.P50Ms > st.P90Ms || st.P90Ms > st.P99Ms || st.P99Ms > st.MaxMs || st.MaxMs > 30_000 {
			t.Errorf("%s latency not sane: %+v", name, st)
		}
	}
	if l.Committed.Count != res.Tasks || l.Placed.Count != res.Tasks || l.Running.Count != res.RunningTasks || l.Lag.Count != 80 {
		t.Errorf("latency counts: %+v", l)
	}
	if res.Offered.JobsPerSec != 40 || res.Placed.TasksPerSec <= 0 || res.Placed.TasksPerSec > res.Offered.TasksPerSec*1.01 {
		t.Errorf("offered %+v placed %+v", res.Offered, res.Placed)
	}
	// The jobs carry the run's label.
	jobs, err := c.Jobs(ctx, api.JobQuery{Labels: map[string]string{loadgen.LabelRun: res.RunID}, Limit: 1000})
	if err != nil || len(jobs.Jobs) != 80 {
		t.Errorf("jobs of run %s: %d, %v", res.RunID, len(jobs.Jobs), err)
	}

	// The summary, from a workload file with a flag over it.
	file := writeFile(t, "w.json", `{"seed": 9, "arrival": {"process": "bursts", "burst": 5, "period": "250ms"},
		"duration": "1s", "pool": "sim", "run_time": "50ms"}`)
	out.Reset()
	errOut.Reset()
	if err := run(ctx, []string{"loadgen", "run", "--addr", s.Addr(), "--workload", file, "--seed", "10"}, &out, &errOut); err != nil {
		t.Fatalf("loadgen run --workload: %v\nstderr: %s", err, errOut.String())
	}
	sum := out.String()
	t.Logf("summary:\n%s", sum)
	for _, want := range []string{"bursts of 5 jobs every 250ms", "seed 10", "submitted   20 jobs, 20 tasks",
		"offered     20.0 jobs/s", "submit → placed", "submit → running (probed)", "0 not placed"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
}

func TestLoadgenRunUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"loadgen", "run", "--rate", "0"}, "arrival.rate"},
		{[]string{"loadgen", "run", "--array-size", "gauss:1"}, "--array-size"},
		{[]string{"loadgen", "run", "--shape", "1"}, "--shape"},
		{[]string{"loadgen", "run", "--workload", "/nonexistent.json"}, "--workload"},
		{[]string{"loadgen", "run", "--encoding", "br"}, "Encoding"},
		{[]string{"loadgen", "fleet", "--nodes", "0"}, "Nodes 0"},
		{[]string{"loadgen", "fleet", "--cpu", "lots"}, "--cpu"},
	} {
		_, _, code, err := runCmd(t, tc.args...)
		if code != exitUsage && !(tc.args[1] == "fleet" && code == exitError) || err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%v: code %d, err %v; want a usage error about %s", tc.args, code, err, tc.msg)
		}
	}
}
