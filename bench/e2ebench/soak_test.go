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

// rowsOf returns rows of a minute each with the given peak RSS of one
// process.
func rowsOf(rss ...float64) []e2ebench.SoakRow {
	rows := make([]e2ebench.SoakRow, len(rss))
	for i, v := range rss {
		rows[i] = e2ebench.SoakRow{Row: i + 1, StartSeconds: 60 * float64(i), Seconds: 60, RSSMiB: []float64{v}}
	}
	return rows
}

// TestMemoryTrends pins the rule of a flat memory: the least-squares
// slope over the rows after the settling ones, against 1% of the mean a
// minute, at least 4 MiB.
func TestMemoryTrends(t *testing.T) {
	for _, tc := range []struct {
		name         string
		rss          []float64
		settle       int
		judged, flat bool
		slope, limit float64
		from, rows   int
	}{
		// The first two rows climb; then 1000 MiB give or take 20.
		{"flat with noise", []float64{300, 800, 1000, 1020, 985, 1010, 990, 1015, 995, 1005}, 2, true, true, -5.0 / 21, 10.025, 3, 8},
		// 9 MiB a minute on 1,000 MiB: within the 10 allowed.
		{"slow drift", []float64{0, 0, 1000, 1009, 1018, 1027}, 2, true, true, 9, 10.135, 3, 4},
		// 15 MiB a minute: a leak.
		{"leak", []float64{0, 0, 1000, 1015, 1030, 1045, 1060}, 2, true, false, 15, 10.3, 3, 5},
		// A small process: the 4-MiB floor, not 1% of 100.
		{"small", []float64{50, 90, 100, 103, 106, 109}, 2, true, true, 3, 4, 3, 4},
		{"small leak", []float64{50, 90, 100, 105, 110, 115}, 2, true, false, 5, 4, 3, 4},
		// Two rows after the settling ones: too few to judge.
		{"short", []float64{100, 200, 300, 400}, 2, false, true, 0, 4, 3, 2},
		{"nothing after settling", []float64{100}, 2, false, true, 0, 0, 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := e2ebench.MemoryTrends(rowsOf(tc.rss...), []string{"bench"}, tc.settle)
			if len(m) != 1 {
				t.Fatalf("%d trends for one process", len(m))
			}
			got := m[0]
			if got.Process != "bench" || got.Judged != tc.judged || got.Flat != tc.flat || got.FromRow != tc.from || got.Rows != tc.rows ||
				math.Abs(got.SlopeMiBPerMin-tc.slope) > 1e-6 || math.Abs(got.LimitMiBPerMin-tc.limit) > 1e-6 {
				t.Errorf("trend %+v; want judged %v flat %v slope %v limit %v from row %d over %d", got, tc.judged, tc.flat, tc.slope, tc.limit, tc.from, tc.rows)
			}
		})
	}
	// The time axis is the rows' ends: a short last row weighs as late
	// as it ends.
	rows := rowsOf(0, 0, 1000, 1010, 1020)
	rows[4].Seconds = 30 // ends at 4.5 min, 5 MiB after the 4th
	rows[4].RSSMiB[0] = 1015
	if m := e2ebench.MemoryTrends(rows, []string{"bench"}, 2)[0]; math.Abs(m.SlopeMiBPerMin-10) > 1e-6 {
		t.Errorf("slope %v with a half row at the end, want 10", m.SlopeMiBPerMin)
	}
}

func TestValidateSoak(t *testing.T) {
	for _, tc := range []struct {
		cfg  e2ebench.Config
		want string
	}{
		{e2ebench.Config{Soak: time.Minute, Steps: 3}, "a soak is one rate"},
		{e2ebench.Config{Soak: time.Minute, StepDuration: time.Second}, "a soak is one rate"},
		{e2ebench.Config{Soak: time.Hour, Warmup: time.Minute, Timeout: 30 * time.Minute}, "shorter than the warm-up (1m0s) and the soak (1h0m0s)"},
		{e2ebench.Config{Soak: -time.Second, SoakInterval: -1, SoakSettle: -1}, "must not be negative"},
		{e2ebench.Config{Soak: time.Minute, SoakInterval: time.Second, StartRate: 1, ArraySize: "fixed:10"}, "a soak row offers 0.10 jobs"},
	} {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: Validate() = %v, want %q", tc.cfg, err, tc.want)
		}
	}
	if err := (e2ebench.Config{Soak: 10 * time.Minute, StartRate: 100_000, MoveLeaderEvery: time.Minute}).Validate(); err != nil {
		t.Errorf("the ten-minute soak: %v", err)
	}
	if _, err := e2ebench.Run(context.Background(), e2ebench.Config{Soak: time.Minute}); err == nil || !strings.Contains(err.Error(), "RunSoak") {
		t.Errorf("Run of a soak: %v", err)
	}
	if _, err := e2ebench.RunSoak(context.Background(), e2ebench.Config{}); err == nil || !strings.Contains(err.Error(), "soak's length") {
		t.Errorf("RunSoak without Soak: %v", err)
	}
}

// TestRunSoak soaks a small cluster for five rows of a second, the
// leadership moved every two seconds. The latency limits are loose (a
// loaded machine, -race); what must hold is the rows' arithmetic.
func TestRunSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and a fleet")
	}
	start := time.Now()
	res, err := e2ebench.RunSoak(context.Background(), e2ebench.Config{
		Replicas: 3, Nodes: 30, StartRate: 40, Soak: 5 * time.Second, SoakInterval: time.Second, MoveLeaderEvery: 2 * time.Second,
		ArraySize: "uniform:1,4", RunTime: "100ms", P99PlacedLimit: 20 * time.Second, P99RunningLimit: 20 * time.Second,
		Seed: 7, Dir: t.TempDir(), Timeout: 2 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	t.Logf("in %v: %s", time.Since(start).Round(time.Millisecond), b)
	if res.SoakSeconds != 5 || res.RowSeconds != 1 || res.Settle != 2 || res.TargetTasksPerSec != 40 || res.MoveLeaderEverySeconds != 2 ||
		res.P99PlacedLimitMs != 20_000 || res.P99RunningLimitMs != 20_000 ||
		len(res.Processes) != 1 || res.Processes[0] != "bench" || len(res.MemoryLimitMiB) != 1 {
		t.Errorf("the result's settings: %+v", res)
	}
	if len(res.Rows) != 5 {
		t.Fatalf("%d rows, want 5", len(res.Rows))
	}
	var offered, placed int64
	moves := 0
	for i, r := range res.Rows {
		if r.Row != i+1 || r.StartSeconds != float64(i) || r.Seconds != 1 {
			t.Errorf("row %d: number %d, from %v s for %v s", i+1, r.Row, r.StartSeconds, r.Seconds)
		}
		if len(r.RSSMiB) != 1 || r.RSSMiB[0] < 10 || r.HeapLiveMiB <= 0 {
			t.Errorf("row %d: RSS %v MiB, live heap %v MiB", r.Row, r.RSSMiB, r.HeapLiveMiB)
		}
		if r.Errors != 0 || r.Holds != (len(r.Reasons) == 0) {
			t.Errorf("row %d: %d errors, holds %v, reasons %q", r.Row, r.Errors, r.Holds, r.Reasons)
		}
		if r.OfferedTasks == 0 || r.OfferedTasksPerSec != float64(r.OfferedTasks) || r.PlacedTasksPerSec != float64(r.PlacedTasks) {
			t.Errorf("row %d: %d tasks offered (%v/s), %d placed (%v/s)", r.Row, r.OfferedTasks, r.OfferedTasksPerSec, r.PlacedTasks, r.PlacedTasksPerSec)
		}
		offered, placed, moves = offered+r.OfferedTasks, placed+r.PlacedTasks, moves+r.LeaderMoves
	}
	tot := res.Total
	if offered != tot.Tasks || placed > tot.PlacedTasks || tot.PlacedTasks != tot.Tasks || tot.Errors != 0 {
		t.Errorf("rows: %d offered, %d placed; the soak: %d tasks, %d placed, %d errors", offered, placed, tot.Tasks, tot.PlacedTasks, tot.Errors)
	}
	// Moves at 0.5, 2.5 and 4.5 s: in rows 1, 3 and 5.
	if moves < 2 || moves != tot.LeaderMoves && moves != tot.LeaderMoves-1 {
		t.Errorf("%d leader moves in the rows, %d in the soak; want 3 (one may come in the drain)", moves, tot.LeaderMoves)
	}
	if len(res.Memory) != 1 || !res.Memory[0].Judged || res.Memory[0].FromRow != 3 || res.Memory[0].Rows != 3 {
		t.Errorf("memory %+v: want the bench process's, judged on rows 3 to 5", res.Memory)
	}
	if res.Holds != (len(res.Reasons) == 0) {
		t.Errorf("holds %v, reasons %q", res.Holds, res.Reasons)
	}
}
