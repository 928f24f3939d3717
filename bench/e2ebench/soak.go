package e2ebench

import (
	"context"
	"fmt"
	"math"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/loadgen"
)

// soakTimeoutMargin is what the default Timeout of a long soak allows
// beyond its warm-up and its length: the cluster's and the fleet's start,
// the drain, the stop.
const soakTimeoutMargin = 15 * time.Minute

// A process's memory has no growth trend when the least-squares slope of
// its rows' peak RSS, over the rows after SoakSettle, is at most
// RSSGrowthFraction of its mean RSS over those rows per minute, or
// RSSGrowthFloorMiB per minute for a process smaller than
// RSSGrowthFloorMiB/RSSGrowthFraction.
//
// Why 1% a minute: a process growing that fast adds 60% of its size in an
// hour, which a dispatcher meant to run for days cannot afford; at 100k
// tasks/s it is a leak of about 7 bytes a task placed in a 4-GiB process,
// so any leak per task or per job shows. Below it, ten minutes cannot
// tell a leak from noise: a row's peak RSS moves by a few percent from
// row to row (the collector's cycles, the scavenger's returns), and the
// slope of eight such rows has a standard error of about a quarter of a
// percent a minute; 1% is four of them. The floor keeps processes of a
// few hundred MiB (fleet processes of small fleets, tests) from being
// judged on single MiB.
const (
	RSSGrowthFraction = 0.01
	RSSGrowthFloorMiB = 4.0
)

// minTrendRows is the fewest rows after SoakSettle the memory trend is
// judged on.
const minTrendRows = 3

// SoakResult is what RunSoak measured; its JSON is `sluice bench e2e
// --soak D --json`'s output.
type SoakResult struct {
	// Replicas and Nodes are the cluster's size and the fleet's.
	Replicas int `json:"replicas"`
	Nodes    int `json:"nodes"`
	// Metrics says the replicas had their metrics on (and were scraped).
	Metrics bool `json:"metrics"`
	// ArraySize and RunTime describe the workload, TargetTasksPerSec its
	// rate.
	ArraySize         string  `json:"array_size"`
	RunTime           string  `json:"run_time"`
	TargetTasksPerSec float64 `json:"target_tasks_per_sec"`
	// SoakSeconds is the soak's length, RowSeconds its rows'; Settle the
	// first rows the memory trend leaves out.
	SoakSeconds float64 `json:"soak_seconds"`
	RowSeconds  float64 `json:"row_seconds"`
	Settle      int     `json:"settle_rows"`
	// MoveLeaderEverySeconds is Config.MoveLeaderEvery.
	MoveLeaderEverySeconds float64 `json:"move_leader_every_seconds,omitempty"`
	// P99PlacedLimitMs and P99RunningLimitMs are the limits a row's p99s
	// are held to.
	P99PlacedLimitMs  float64 `json:"p99_placed_limit_ms"`
	P99RunningLimitMs float64 `json:"p99_running_limit_ms"`
	// WarmupSeconds is Config.Warmup, and Warmup what it measured (not
	// judged); nil without one.
	WarmupSeconds float64 `json:"warmup_seconds,omitempty"`
	Warmup        *Step   `json:"warmup,omitempty"`
	// Processes names the processes whose memory each row reports, in
	// the order of SoakRow.RSSMiB: "bench" (the replicas and the load
	// generator, and the fleet when it runs in process), then "fleet-1",
	// "fleet-2", … for the fleet processes.
	Processes []string `json:"processes"`
	// MemoryLimitMiB is the soft memory limit (GOMEMLIMIT) each process
	// ran under, in the order of Processes; 0 where none was set here (a
	// fleet process then takes its command's own). A process whose heap
	// reaches its limit collects more often instead of growing: its RSS
	// stays near the limit, and what grows is its CPU per task (and, for
	// this process, the live heap in the rows).
	MemoryLimitMiB []float64 `json:"memory_limit_mib"`
	// Rows are the soak's rows, in order.
	Rows []SoakRow `json:"rows"`
	// Total is the whole soak as one step, its drain included.
	Total Step `json:"total"`
	// Memory is each process's memory trend, in the order of Processes.
	Memory []MemoryTrend `json:"memory"`
	// Holds says whether the soak held: every row held, the whole soak
	// held as a step and left no task unplaced, and no process's memory
	// grew. Reasons says why not; Notes what was not judged.
	Holds   bool     `json:"holds"`
	Reasons []string `json:"reasons,omitempty"`
	Notes   []string `json:"notes,omitempty"`
}

// SoakRow is what one row of a soak measured: arrivals by their arrival
// time, placements and the rest by when they were seen (loadgen.Interval).
type SoakRow struct {
	// Row numbers it, from 1; StartSeconds is its start after the soak's,
	// Seconds its length.
	Row          int     `json:"row"`
	StartSeconds float64 `json:"start_seconds"`
	Seconds      float64 `json:"seconds"`
	// OfferedTasksPerSec arrived, PlacedTasksPerSec were seen placed.
	OfferedTasksPerSec float64 `json:"offered_tasks_per_sec"`
	PlacedTasksPerSec  float64 `json:"placed_tasks_per_sec"`
	// The latencies of the tasks seen placed (and running, of sampled
	// jobs) in the row, and the commits and lags of its requests, in
	// milliseconds.
	P50SubmitToPlacedMs    float64 `json:"p50_submit_to_placed_ms"`
	P99SubmitToPlacedMs    float64 `json:"p99_submit_to_placed_ms"`
	P50SubmitToRunningMs   float64 `json:"p50_submit_to_running_ms"`
	P99SubmitToRunningMs   float64 `json:"p99_submit_to_running_ms"`
	P99SubmitToCommittedMs float64 `json:"p99_submit_to_committed_ms"`
	MaxLagMs               float64 `json:"max_lag_ms"`
	// OfferedTasks arrived; PlacedTasks and RunningTasks were seen placed
	// and running.
	OfferedTasks int64 `json:"offered_tasks"`
	PlacedTasks  int64 `json:"placed_tasks"`
	RunningTasks int64 `json:"running_tasks"`
	// Errors counts requests that failed for good, Retries those sent
	// again.
	Errors  int64 `json:"errors"`
	Retries int64 `json:"retries"`
	// LeaderMoves is how many times the leadership moved in the row.
	LeaderMoves int `json:"leader_moves"`
	// The CPU time per task placed in the row of this process and of the
	// fleet processes, in microseconds.
	BenchCPUPerTaskUs float64 `json:"bench_cpu_us_per_task"`
	FleetCPUPerTaskUs float64 `json:"fleet_cpu_us_per_task"`
	// RSSMiB is each process's peak resident set (VmRSS) over the row,
	// sampled every second and at its end, in MiB, in the order of
	// SoakResult.Processes; 0 for a process that could not be read.
	RSSMiB []float64 `json:"rss_mib"`
	// HeapLiveMiB is this process's live Go heap as its last collection
	// in the row found it: where RSS grows, whether the heap does.
	HeapLiveMiB float64 `json:"heap_live_mib"`
	// Holds says whether the row held (the rule of a step); Reasons says
	// why not.
	Holds   bool     `json:"holds"`
	Reasons []string `json:"reasons,omitempty"`
}

// MemoryTrend is one process's memory over a soak's rows after the
// settling ones: the least-squares line through each row's peak RSS
// against the time at the row's end.
type MemoryTrend struct {
	Process string `json:"process"`
	// FromRow is the first row of the fit; Rows how many it has.
	FromRow int `json:"from_row"`
	Rows    int `json:"rows"`
	// FirstMiB, LastMiB and MeanMiB are the fit's rows' first, last and
	// mean peak RSS.
	FirstMiB float64 `json:"first_mib"`
	LastMiB  float64 `json:"last_mib"`
	MeanMiB  float64 `json:"mean_mib"`
	// SlopeMiBPerMin is the line's slope, LimitMiBPerMin the most it may
	// be (RSSGrowthFraction of MeanMiB, at least RSSGrowthFloorMiB).
	SlopeMiBPerMin float64 `json:"slope_mib_per_min"`
	LimitMiBPerMin float64 `json:"limit_mib_per_min"`
	// Judged is false when fewer than three rows follow the settling
	// ones; Flat says whether the slope is within the limit (true when
	// not judged).
	Judged bool `json:"judged"`
	Flat   bool `json:"flat"`
}

// RunSoak starts the cluster and the fleet, offers Config.StartRate for
// Config.Soak in one open-loop run (after the warm-up, if any), with the
// leadership moved every MoveLeaderEvery (the first move half a row in),
// and judges each row of SoakInterval as a step is judged, the whole
// soak as a step, and each process's memory trend (MemoryTrend). When it
// fails or ctx ends during the soak, it returns the rows measured so far
// with the error.
func RunSoak(ctx context.Context, cfg Config) (SoakResult, error) {
	if err := cfg.Validate(); err != nil {
		return SoakResult{}, err
	}
	if cfg.Soak <= 0 {
		return SoakResult{}, fmt.Errorf("e2e benchmark: Soak %v: want the soak's length", cfg.Soak)
	}
	cfg = cfg.withDefaults()
	arr, _ := loadgen.ParseIntDist(cfg.ArraySize) // Validate parsed them
	rt, _ := loadgen.ParseDurationDist(cfg.RunTime)
	res := SoakResult{Replicas: cfg.Replicas, Nodes: cfg.Nodes, Metrics: !cfg.NoMetrics, ArraySize: arr.String(), RunTime: rt.String(),
		TargetTasksPerSec: cfg.StartRate, SoakSeconds: cfg.Soak.Seconds(), RowSeconds: cfg.SoakInterval.Seconds(),
		Settle: cfg.SoakSettle, MoveLeaderEverySeconds: cfg.MoveLeaderEvery.Seconds(),
		P99PlacedLimitMs: ms(cfg.P99PlacedLimit), P99RunningLimitMs: ms(cfg.P99RunningLimit), Rows: []SoakRow{}}
	log := cfg.Logger
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	ctx, rg, err := startRig(ctx, cfg)
	defer rg.close()
	if err != nil {
		return res, err
	}
	res.Processes = []string{"bench"}
	res.MemoryLimitMiB = []float64{0}
	if l := debug.SetMemoryLimit(-1); l > 0 && l < math.MaxInt64 {
		res.MemoryLimitMiB[0] = roundMiB(float64(l) / (1 << 20))
	}
	for i := range rg.fleetPIDs {
		res.Processes = append(res.Processes, fmt.Sprintf("fleet-%d", i+1))
		res.MemoryLimitMiB = append(res.MemoryLimitMiB, roundMiB(float64(cfg.FleetMemoryLimit)/(1<<20)))
	}

	runID := newRunID()
	var watchFrom uint64
	if cfg.Warmup > 0 {
		w := cfg.workload(cfg.Seed+1, cfg.StartRate, cfg.Warmup, arr, rt)
		st, err := runStep(ctx, rg, cfg, 0, cfg.StartRate, w, runID+"-warmup", &watchFrom)
		res.WarmupSeconds, res.Warmup = cfg.Warmup.Seconds(), &st
		if err != nil {
			return res, err
		}
		log.Info("e2e: warm-up", st.logAttrs()...)
	}

	pids := append([]int{selfPID}, rg.fleetPIDs...)
	rss := startRSSSampler(ctx, pids, min(time.Second, cfg.SoakInterval/5))
	defer rss.stop()
	var moved atomic.Int64
	rows := &soakRows{cfg: cfg, rg: rg, rss: rss, moved: &moved, last: readUsage(rg.fleetPIDs, rg.replicas)}
	dc := rg.driverConfig(cfg, cfg.workload(cfg.Seed, cfg.StartRate, cfg.Soak, arr, rt), runID+"-soak", watchFrom,
		max(cfg.SoakInterval, minDrain))
	dc.Interval, dc.OnInterval = cfg.SoakInterval, rows.add
	d, err := loadgen.NewDriver(dc)
	if err != nil {
		return res, fmt.Errorf("e2e benchmark: soak: %w", err)
	}
	from := rows.last
	stopMoving := moveLeaders(ctx, cfg, rg.replicas, cfg.SoakInterval/2, &moved)
	r, err := d.Run(ctx)
	stopMoving()
	to := readUsage(rg.fleetPIDs, rg.replicas)
	// The Driver's goroutine that called add has ended: rows.rows is
	// this goroutine's now.
	res.Rows = append(res.Rows, rows.rows...)
	res.Total = Step{Step: 1, TargetTasksPerSec: cfg.StartRate, LeaderMoves: int(moved.Load())}
	res.Total.fill(r)
	res.Total.perTask(from, to)
	res.Total.HeapLiveMB = float64(liveHeap()) / (1 << 20)
	if err := stepErr(ctx, err); err != nil {
		return res, fmt.Errorf("e2e benchmark: soak: %w", err)
	}
	res.Total.Reasons = cfg.judge(res.Total)
	res.Total.Sustained = len(res.Total.Reasons) == 0
	res.Memory = MemoryTrends(res.Rows, res.Processes, cfg.SoakSettle)
	res.Reasons, res.Notes = soakVerdict(res)
	res.Holds = len(res.Reasons) == 0
	log.Info("e2e: soak", "holds", res.Holds, "reasons", res.Reasons, "notes", res.Notes)
	return res, nil
}

// soakRows makes a soak's rows from the Driver's intervals, as each ends.
type soakRows struct {
	cfg   Config
	rg    *rig
	rss   *rssSampler
	moved *atomic.Int64
	// Owned by the Driver's scheduling goroutine during the run.
	last  usage // at the last row's end
	moves int64 // moved at the last row's end
	rows  []SoakRow
}

// add makes a row of an interval: it is the Driver's OnInterval.
func (s *soakRows) add(iv loadgen.Interval) {
	now := readUsage(s.rg.fleetPIDs, s.rg.replicas)
	moves := s.moved.Load()
	l := iv.Latency
	row := SoakRow{
		Row: iv.Index + 1, StartSeconds: iv.StartSeconds, Seconds: iv.Seconds,
		OfferedTasksPerSec: iv.Offered.TasksPerSec, PlacedTasksPerSec: iv.Placed.TasksPerSec,
		P50SubmitToPlacedMs: l.Placed.P50Ms, P99SubmitToPlacedMs: l.Placed.P99Ms,
		P50SubmitToRunningMs: l.Running.P50Ms, P99SubmitToRunningMs: l.Running.P99Ms,
		P99SubmitToCommittedMs: l.Committed.P99Ms, MaxLagMs: l.Lag.MaxMs,
		OfferedTasks: iv.OfferedTasks, PlacedTasks: iv.PlacedTasks, RunningTasks: iv.RunningTasks,
		Errors: iv.Errors, Retries: iv.Retries, LeaderMoves: int(moves - s.moves),
		RSSMiB: s.rss.take(), HeapLiveMiB: roundMiB(float64(lastLiveHeap()) / (1 << 20)),
	}
	st := Step{PlacedTasks: row.PlacedTasks}
	st.perTask(s.last, now)
	row.BenchCPUPerTaskUs, row.FleetCPUPerTaskUs = st.BenchCPUPerTaskUs, st.FleetCPUPerTaskUs
	row.Reasons = s.cfg.judge(Step{OfferedTasksPerSec: row.OfferedTasksPerSec, PlacedTasksPerSec: row.PlacedTasksPerSec,
		Errors: row.Errors, P99SubmitToPlacedMs: row.P99SubmitToPlacedMs, P99SubmitToRunningMs: row.P99SubmitToRunningMs,
		RunningTasks: row.RunningTasks})
	row.Holds = len(row.Reasons) == 0
	s.last, s.moves = now, moves
	s.rows = append(s.rows, row)
	s.cfg.Logger.Info("e2e: soak row", "row", row.Row, "offered_tasks_per_sec", round(row.OfferedTasksPerSec),
		"placed_tasks_per_sec", round(row.PlacedTasksPerSec), "p99_placed_ms", row.P99SubmitToPlacedMs,
		"p99_running_ms", row.P99SubmitToRunningMs, "errors", row.Errors, "leader_moves", row.LeaderMoves,
		"rss_mib", row.RSSMiB, "holds", row.Holds, "reasons", row.Reasons)
}

// MemoryTrends returns the memory trend of each process (named in
// processes, in the order of the rows' RSSMiB) over rows after the first
// settle.
func MemoryTrends(rows []SoakRow, processes []string, settle int) []MemoryTrend {
	out := make([]MemoryTrend, len(processes))
	fit := rows[min(max(settle, 0), len(rows)):]
	for p, name := range processes {
		t := MemoryTrend{Process: name, FromRow: settle + 1, Rows: len(fit), Flat: true}
		var xs, ys []float64
		for _, r := range fit {
			if p < len(r.RSSMiB) {
				xs = append(xs, (r.StartSeconds+r.Seconds)/60)
				ys = append(ys, r.RSSMiB[p])
			}
		}
		if len(ys) > 0 {
			t.FirstMiB, t.LastMiB, t.MeanMiB = ys[0], ys[len(ys)-1], mean(ys)
			t.LimitMiBPerMin = max(RSSGrowthFraction*t.MeanMiB, RSSGrowthFloorMiB)
		}
		if len(ys) >= minTrendRows {
			t.Judged = true
			t.SlopeMiBPerMin = slope(xs, ys)
			t.Flat = t.SlopeMiBPerMin <= t.LimitMiBPerMin
		}
		out[p] = t
	}
	return out
}

// soakVerdict returns why r did not hold, and what was not judged.
func soakVerdict(r SoakResult) (reasons, notes []string) {
	for _, row := range r.Rows {
		for _, why := range row.Reasons {
			reasons = append(reasons, fmt.Sprintf("row %d: %s", row.Row, why))
		}
	}
	for _, why := range r.Total.Reasons {
		reasons = append(reasons, "whole soak: "+why)
	}
	if n := r.Total.UnplacedTasks; n > 0 {
		reasons = append(reasons, fmt.Sprintf("whole soak: %d tasks committed and not seen placed by the end of the drain", n))
	}
	behind := 0 // rows after the settling ones that placed less than they were offered
	for _, row := range r.Rows[min(max(r.Settle, 0), len(r.Rows)):] {
		if row.PlacedTasksPerSec < SustainedFraction*row.OfferedTasksPerSec {
			behind++
		}
	}
	grew := false
	for _, m := range r.Memory {
		switch {
		case !m.Judged:
			notes = append(notes, fmt.Sprintf("memory of %s not judged: %d rows after the first %d, want %d or more",
				m.Process, m.Rows, r.Settle, minTrendRows))
		case !m.Flat:
			reasons = append(reasons, fmt.Sprintf("memory of %s grows %.1f MiB/min over rows %d to %d (%.0f to %.0f MiB), above %.1f",
				m.Process, m.SlopeMiBPerMin, m.FromRow, m.FromRow+m.Rows-1, m.FirstMiB, m.LastMiB, m.LimitMiBPerMin))
			grew = true
		}
	}
	if grew && behind > 0 {
		notes = append(notes, fmt.Sprintf("the memory grew while the cluster fell behind (%d of the rows judged placed less than %.0f%% of their offer): "+
			"the work in flight grew with it; only rows that hold tell a leak", behind, 100*SustainedFraction))
	}
	return reasons, notes
}

// slope returns the least-squares slope of ys against xs (of equal
// lengths, two or more, not all xs equal; else 0).
func slope(xs, ys []float64) float64 {
	mx, my := mean(xs), mean(ys)
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx == 0 {
		return 0
	}
	return sxy / sxx
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// roundMiB rounds a MiB figure to a tenth.
func roundMiB(f float64) float64 { return math.Round(f*10) / 10 }
