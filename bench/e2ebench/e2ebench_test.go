package e2ebench_test

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/bench/e2ebench"
)

func TestValidateNamesEveryProblem(t *testing.T) {
	err := e2ebench.Config{
		Replicas: 9, Nodes: -1, StartRate: math.NaN(), StepFactor: 0.5, StepRate: -3, Steps: -1,
		StepDuration: -time.Second, ArraySize: "uniform:1", RunTime: "soon",
		P99PlacedLimit: -1, Timeout: -1, FleetProcs: 2, Warmup: -time.Second, FleetMemoryLimit: -1, MoveLeaderEvery: -time.Second,
	}.Validate()
	if err == nil {
		t.Fatal("Validate accepted nonsense")
	}
	for _, want := range []string{"Replicas 9", "Nodes -1", "StartRate NaN", "StepFactor 0.5", "StepRate -3",
		"set one, not both", "Steps -1", "StepDuration -1s", "ArraySize", "RunTime", "P99PlacedLimit", "Timeout", "FleetProcs 2", "Warmup -1s", "FleetMemoryLimit -1", "MoveLeaderEvery -1s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v\nwant it to name %q", err, want)
		}
	}
	// What only loadgen knows: an array size out of range.
	if err := (e2ebench.Config{ArraySize: "uniform:5,2"}).Validate(); err == nil || !strings.Contains(err.Error(), "array_size") {
		t.Errorf("uniform:5,2: Validate() = %v", err)
	}
	if err := (e2ebench.Config{StartRate: 1, StepDuration: time.Second, ArraySize: "fixed:100"}).Validate(); err == nil ||
		!strings.Contains(err.Error(), "at least one") {
		t.Errorf("a step of no job: Validate() = %v", err)
	}
	if err := (e2ebench.Config{Replicas: 1, MoveLeaderEvery: time.Second}).Validate(); err == nil || !strings.Contains(err.Error(), "2 or more replicas") {
		t.Errorf("moving the leadership of one replica: Validate() = %v", err)
	}
	if err := (e2ebench.Config{}).Validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}

func TestRates(t *testing.T) {
	for _, tc := range []struct {
		cfg  e2ebench.Config
		want []float64
	}{
		{e2ebench.Config{StartRate: 500, Steps: 4}, []float64{500, 1000, 2000, 4000}},
		{e2ebench.Config{StartRate: 500, StepFactor: 1.5, Steps: 3}, []float64{500, 750, 1125}},
		{e2ebench.Config{StartRate: 500, StepRate: 250, Steps: 3}, []float64{500, 750, 1000}},
		{e2ebench.Config{Steps: 2}, []float64{e2ebench.DefaultStartRate, 2 * e2ebench.DefaultStartRate}},
	} {
		got := tc.cfg.Rates()
		if len(got) != len(tc.want) {
			t.Errorf("%+v: Rates() = %v, want %v", tc.cfg, got, tc.want)
			continue
		}
		for i := range got {
			if math.Abs(got[i]-tc.want[i]) > 1e-9 {
				t.Errorf("%+v: Rates() = %v, want %v", tc.cfg, got, tc.want)
				break
			}
		}
	}
}

// TestRunSmall runs two short steps at low rates on a small fleet. The
// limits are loose: on a loaded machine under -race the latencies say
// little, and whether a step of two seconds holds 90% of its rate is not
// for a test to insist on; the result must be consistent.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and a fleet")
	}
	start := time.Now()
	res, err := e2ebench.Run(context.Background(), e2ebench.Config{
		Replicas: 3, Nodes: 50, StartRate: 20, StepFactor: 2, Steps: 2, StepDuration: 2 * time.Second, Warmup: time.Second,
		ArraySize: "uniform:1,4", RunTime: "100ms", P99PlacedLimit: 20 * time.Second, P99RunningLimit: 20 * time.Second,
		Seed: 3, Dir: t.TempDir(), Timeout: 2 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	t.Logf("in %v: %s", time.Since(start).Round(time.Millisecond), b)
	if res.Nodes != 50 || res.Replicas != 3 || res.ArraySize != "uniform:1,4" || res.StepSeconds != 2 {
		t.Errorf("the result's settings: %+v", res)
	}
	if w := res.Warmup; res.WarmupSeconds != 1 || w == nil || w.Step != 0 || w.TargetTasksPerSec != 20 || w.Tasks == 0 || w.PlacedTasks != w.Tasks {
		t.Errorf("the warm-up of %v s: %+v", res.WarmupSeconds, w)
	}
	if len(res.Steps) == 0 || len(res.Steps) > 2 {
		t.Fatalf("%d steps run, want 1 or 2", len(res.Steps))
	}
	for i, st := range res.Steps {
		if st.Step != i+1 || st.TargetTasksPerSec != 20*math.Pow(2, float64(i)) {
			t.Errorf("step %d: number %d target %v", i+1, st.Step, st.TargetTasksPerSec)
		}
		// 2.5 tasks per job on average: the drawn sizes stay near it.
		if st.OfferedTasksPerSec < 0.5*st.TargetTasksPerSec || st.OfferedTasksPerSec > 1.6*st.TargetTasksPerSec || st.OfferedJobsPerSec <= 0 {
			t.Errorf("step %d: offered %.1f tasks/s, %.1f jobs/s for a target of %v tasks/s", st.Step, st.OfferedTasksPerSec, st.OfferedJobsPerSec, st.TargetTasksPerSec)
		}
		if st.Tasks == 0 || st.PlacedTasks != st.Tasks || st.UnplacedTasks != 0 || st.Errors != 0 || st.RunningTasks == 0 {
			t.Errorf("step %d: %d tasks, %d placed, %d unplaced, %d seen running, %d errors", st.Step, st.Tasks, st.PlacedTasks, st.UnplacedTasks, st.RunningTasks, st.Errors)
		}
		// Every placement goes through the three replicas' logs.
		if st.StoreBytesPerTask <= 0 {
			t.Errorf("step %d: %.1f store bytes a task", st.Step, st.StoreBytesPerTask)
		}
		if st.PlacedTasksPerSec <= 0 || st.PlacedTasksPerSec > 1.05*st.OfferedTasksPerSec {
			t.Errorf("step %d: placed %.1f tasks/s of %.1f offered", st.Step, st.PlacedTasksPerSec, st.OfferedTasksPerSec)
		}
		if !(0 < st.P50SubmitToPlacedMs && st.P50SubmitToPlacedMs <= st.P99SubmitToPlacedMs &&
			0 < st.P50SubmitToRunningMs && st.P50SubmitToRunningMs <= st.P99SubmitToRunningMs) {
			t.Errorf("step %d: placed p50/p99 %.1f/%.1f ms, running p50/p99 %.1f/%.1f ms", st.Step,
				st.P50SubmitToPlacedMs, st.P99SubmitToPlacedMs, st.P50SubmitToRunningMs, st.P99SubmitToRunningMs)
		}
		if st.Sustained != (len(st.Reasons) == 0) || i < len(res.Steps)-1 && !st.Sustained {
			t.Errorf("step %d of %d: sustained %v, reasons %q", st.Step, len(res.Steps), st.Sustained, st.Reasons)
		}
	}
	last := res.Steps[len(res.Steps)-1]
	switch {
	case !last.Sustained:
		if res.KneeStep != last.Step || res.SustainedStep != last.Step-1 {
			t.Errorf("knee at step %d, sustained step %d; want the last step (%d) the knee", res.KneeStep, res.SustainedStep, last.Step)
		}
	case len(res.Steps) != 2 || res.KneeStep != 0 || res.SustainedStep != 2:
		t.Errorf("%d steps, knee %d, sustained %d: a sustained last step must be the second, without a knee", len(res.Steps), res.KneeStep, res.SustainedStep)
	}
	if res.SustainedStep == 0 {
		if res.MaxSustainedTasksPerSec != 0 || res.P99SubmitToPlacedMs != 0 {
			t.Errorf("no step sustained, yet %+v", res)
		}
	} else if st := res.Steps[res.SustainedStep-1]; res.MaxSustainedTasksPerSec != st.PlacedTasksPerSec ||
		res.P99SubmitToPlacedMs != st.P99SubmitToPlacedMs || res.P99SubmitToRunningMs != st.P99SubmitToRunningMs {
		t.Errorf("the summary %+v is not step %d's %+v", res, st.Step, st)
	}
}

// TestRunMovesLeader: with the leadership moved every half second, a
// step's jobs are all placed, no request fails, and the moves are
// counted.
func TestRunMovesLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and a fleet")
	}
	res, err := e2ebench.Run(context.Background(), e2ebench.Config{
		Replicas: 3, Nodes: 30, StartRate: 40, Steps: 1, StepDuration: 3 * time.Second, MoveLeaderEvery: 500 * time.Millisecond,
		ArraySize: "uniform:1,4", RunTime: "100ms", P99PlacedLimit: 20 * time.Second, P99RunningLimit: 20 * time.Second,
		Seed: 5, Dir: t.TempDir(), Timeout: 2 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Steps) != 1 {
		t.Fatalf("%d steps, want 1", len(res.Steps))
	}
	st := res.Steps[0]
	t.Logf("step: %+v", st)
	if st.LeaderMoves < 2 {
		t.Errorf("the leadership moved %d times in a step of 3 s (and its drain), want every 500 ms", st.LeaderMoves)
	}
	if st.Tasks == 0 || st.PlacedTasks != st.Tasks || st.Errors != 0 {
		t.Errorf("through the moves: %d tasks, %d placed, %d errors; want every task placed and no error", st.Tasks, st.PlacedTasks, st.Errors)
	}
}
