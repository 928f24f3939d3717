package suitetest

import (
	"slices"
	"time"

	"github.com/sluicehq/sluice/bench/chaosbench"
	"github.com/sluicehq/sluice/bench/e2ebench"
	"github.com/sluicehq/sluice/bench/overcommitbench"
	"github.com/sluicehq/sluice/bench/podbench"
	"github.com/sluicehq/sluice/bench/schedbench"
	"github.com/sluicehq/sluice/bench/storebench"
	"github.com/sluicehq/sluice/bench/submitbench"
	"github.com/sluicehq/sluice/bench/suite"
)

// Time is the time of every fixed report.
var Time = time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)

// Machine is the machine of every fixed report.
var Machine = suite.Machine{CPUs: 2, CPUModel: "AMD EPYC", Kernel: "6.18.44", GoVersion: "go1.26.8",
	LoadAvg: "1.00 0.50 0.25", Commit: "9b80085aaaaaaaaaaaaa", Modified: true}

// E2E is a stepped e2e result: two steps held, the third the knee.
var E2E = e2ebench.Result{Replicas: 3, Nodes: 1000, ArraySize: "uniform:1,40", RunTime: "fixed:1s", StepSeconds: 5,
	MaxSustainedTasksPerSec: 995, P99SubmitToPlacedMs: 288, P99SubmitToRunningMs: 580, SustainedStep: 2, KneeStep: 3,
	Steps: []e2ebench.Step{
		{Step: 1, TargetTasksPerSec: 500, OfferedTasksPerSec: 498, PlacedTasksPerSec: 498, P50SubmitToPlacedMs: 47,
			P99SubmitToPlacedMs: 163, P50SubmitToRunningMs: 117, P99SubmitToRunningMs: 298, Tasks: 2490, Sustained: true},
		{Step: 2, TargetTasksPerSec: 1000, OfferedTasksPerSec: 1001, PlacedTasksPerSec: 995, P50SubmitToPlacedMs: 103,
			P99SubmitToPlacedMs: 288, P50SubmitToRunningMs: 205, P99SubmitToRunningMs: 580, Tasks: 5005, Sustained: true},
		{Step: 3, TargetTasksPerSec: 2000, OfferedTasksPerSec: 2003, PlacedTasksPerSec: 1500, P50SubmitToPlacedMs: 470,
			P99SubmitToPlacedMs: 1854, P50SubmitToRunningMs: 1438, P99SubmitToRunningMs: 2397, Tasks: 10015,
			BenchCPUPerTaskUs: 412.4, FleetCPUPerTaskUs: 96.6,
			Reasons: []string{"placed 1500 of 2003 tasks/s offered (75%, want 90%)"}},
	}}

// Raftkv is raftkv against etcd, small values and large.
var Raftkv = []storebench.Comparison{
	{Writers: 256, ValueBytes: 256, Replicas: 3,
		Sluice:     storebench.Result{WritesPerSec: 12184, P50Ms: 16.2, P99Ms: 109},
		Etcd:       &storebench.Result{WritesPerSec: 1879, P50Ms: 118, P99Ms: 422},
		FailoverMs: 1050},
	{Writers: 4, ValueBytes: 256 << 10, Replicas: 3,
		Sluice: storebench.Result{WritesPerSec: 93, MBPerSec: 24.5, P50Ms: 30, P99Ms: 213},
		Etcd:   &storebench.Result{WritesPerSec: 51, MBPerSec: 13.2, P50Ms: 66, P99Ms: 219}},
}

// Submit is a submit result per body encoding.
var Submit = []submitbench.Result{
	{Replicas: 3, Clients: 8, JobsPerRequest: 1000, Jobs: 40000, JobsPerSec: 65012, P50Ms: 97, P99Ms: 266, BodyBytes: 204800, Seconds: 0.6},
	{Replicas: 3, Clients: 8, JobsPerRequest: 1000, Encoding: "gzip", Jobs: 40000, JobsPerSec: 58835, P50Ms: 121, P99Ms: 359, BodyBytes: 20480},
	{Replicas: 3, Clients: 8, JobsPerRequest: 1000, Encoding: "zstd", Jobs: 40000, JobsPerSec: 67684, P50Ms: 96, P99Ms: 280, BodyBytes: 15360},
}

// Overcommit is an overcommit run: allocation met, the probe's p99 not.
var Overcommit = overcommitbench.Result{Mode: "containers", NodeCPU: 2000, NodeMemory: 4 << 30, OnlinePods: 2, OnlineRequestRatio: 0.8,
	OfflinePlaced: 7, OfflinePending: 3, RefusedReason: "no node passes the filters", AllocationRatio: 1.675,
	MemoryAllocationRatio: 0.753, Utilization: 0.81, UtilizationUnloaded: 0.38, OnlineCPUMillis: 158, OfflineCPUMillis: 245,
	ProbeP50Ms: 0.53, ProbeP99Ms: 6.75, ProbeP50UnloadedMs: 0.6, ProbeP99UnloadedMs: 2.07, ProbeRequests: 1499,
	Series: []overcommitbench.Sample{
		{T: 1, Phase: "online", Allocation: 0.8, MemoryAllocation: 0.32, Utilization: 0.44},
		{T: 5, Phase: "unloaded", Allocation: 0.8, MemoryAllocation: 0.32, Utilization: 0.37},
		{T: 15, Phase: "fill", Allocation: 1.675, MemoryAllocation: 0.75, Utilization: 0.37, OfflineRunning: 7, OfflinePending: 1},
		{T: 20, Phase: "loaded", Allocation: 1.675, MemoryAllocation: 0.75, Utilization: 0.95, OfflineRunning: 7, OfflinePending: 3},
		{T: 30, Phase: "loaded", Allocation: 1.675, MemoryAllocation: 0.75, Utilization: 0.83, OfflineRunning: 7, OfflinePending: 3},
	}}

// OvercommitFleet is a fleet-scale overcommit run: a rise and a fall of
// the online usage.
var OvercommitFleet = overcommitbench.FleetResult{Replicas: 1, Nodes: 200, CapacityCPU: 1_600_000, Seed: 1, HeartbeatSeconds: 1,
	PeriodSeconds: 20, PeakSeconds: 10, AllocationRatio: 1.208, Utilization: 0.812, AllocationRatioOffPeak: 1.304,
	AllocationRatioPeak: 1.059, EstimateOverConfiguredOffPeak: 1, EstimateOverConfiguredPeak: 1, FollowUpSeconds: 4.4,
	FollowDownSeconds: 5.4, MinEstimatedNodes: 200, Seconds: 40, LoadAverage: 0.8,
	Series: []overcommitbench.FleetSample{
		{T: 1, AllocationRatio: 1.1, Utilization: 0.6},
		{T: 7, Peak: true, AllocationRatio: 1.312, Utilization: 0.95},
		{T: 12, Peak: true, AllocationRatio: 1.058, Utilization: 0.85},
		{T: 17, AllocationRatio: 1.059, Utilization: 0.6},
		{T: 23, AllocationRatio: 1.304, Utilization: 0.8},
	},
	Shifts: []overcommitbench.FleetShift{{T: 7, Up: true, Before: 1.312, After: 1.058, FollowSeconds: 4.4, Complete: true},
		{T: 17, Before: 1.059, After: 1.304, FollowSeconds: 5.4, Complete: true}}}

// Chaos is a chaos run of three faults that kept every promise.
var Chaos = chaosbench.Result{Seed: 1, RunID: "chaos-0a1b2c3d", Faults: 3,
	Sched: []chaosbench.FaultResult{
		{Fault: chaosbench.Fault{Kind: chaosbench.KillLeader, Gap: time.Second, Hold: time.Second}, Victim: "replica 1 (leader)", AtMs: 1000, HeldMs: 1000, UnavailableMs: 1480, WorstWaitMs: 2100, RecoverMs: 400},
		{Fault: chaosbench.Fault{Kind: chaosbench.PartitionFollower, Gap: time.Second, Hold: time.Second}, Victim: "replica 3 (follower)", AtMs: 4000, HeldMs: 1000, UnavailableMs: 60, WorstWaitMs: 90, RecoverMs: 700},
		{Fault: chaosbench.Fault{Kind: chaosbench.KillLeader, Gap: time.Second, Hold: time.Second}, Victim: "replica 2 (leader)", AtMs: 7000, HeldMs: 1000, UnavailableMs: 1720, WorstWaitMs: 2350, RecoverMs: 500},
	},
	Tally:        chaosbench.Tally{Acked: 1234, Jobs: 1234},
	Linearizable: chaosbench.LinOK, Ops: 3456, FailedRequests: 7, MaxUnavailableMs: 1720, MaxWaitMs: 2350,
	DoubleRun: chaosbench.DoubleRun{Tasks: 2, MaxMs: 640, MaxTask: "j5.0.0"}, DoubleRunBoundMs: 4200, DurationS: 30,
	Nodelets: &chaosbench.NodeletResult{Pods: 8, Cuts: 1, Moved: 4, DoubleRun: chaosbench.DoubleRun{Tasks: 4, MaxMs: 3100, MaxTask: "j1.0.2"}}}

func report[R any](name string, r R) *suite.Report[R] {
	return &suite.Report[R]{Scenario: name, Mode: "quick", Time: Time, Seconds: 12.5, Machine: Machine, Result: r}
}

// Suite is a suite of every scenario with fixed results; podstart
// skipped. Each call returns new reports, with their own copies of the
// result slices: a test may change them.
func Suite() suite.Suite {
	e2e := E2E
	e2e.Steps = slices.Clone(E2E.Steps)
	soak := Soak
	soak.Rows = slices.Clone(Soak.Rows)
	oc := Overcommit
	oc.Series = slices.Clone(Overcommit.Series)
	ocf := OvercommitFleet
	ocf.Series = slices.Clone(OvercommitFleet.Series)
	chaos := Chaos
	chaos.Sched = slices.Clone(Chaos.Sched)
	s := suite.Suite{
		Submit:          report("submit", slices.Clone(Submit)),
		Latency:         report("latency", submitbench.LatencyResult{Nodes: 4, Samples: 50, P50Ms: 11.6, P99Ms: 18.3, MaxMs: 21}),
		Sched:           report("sched", schedbench.Result{Nodes: 2000, Tasks: 20000, Jobs: 150, Replicas: 3, PlacementsPerSec: 50350, RoundP50Ms: 24, RoundP99Ms: 290, SolverShare: 0.04, BytesPerPendingTask: 5.2}),
		Raftkv:          report("raftkv", slices.Clone(Raftkv)),
		E2E:             report("e2e", e2e),
		Soak:            report("soak", soak),
		Podstart:        report[[]podbench.Result]("podstart", nil),
		Overcommit:      report("overcommit", oc),
		OvercommitFleet: report("overcommit-fleet", ocf),
		Chaos:           report("chaos", chaos),
	}
	s.Podstart.Skipped = "not root: containers need namespaces and cgroups"
	return s
}

// Soak is a soak of four rows of a minute: the third broke, and the
// fleet process's memory grows.
var Soak = e2ebench.SoakResult{Replicas: 3, Nodes: 1000, ArraySize: "uniform:1,40", RunTime: "fixed:1s", TargetTasksPerSec: 5000,
	SoakSeconds: 240, RowSeconds: 60, Settle: 1, MoveLeaderEverySeconds: 60, P99PlacedLimitMs: 1000, P99RunningLimitMs: 2000,
	Processes: []string{"bench", "fleet-1"},
	Rows: []e2ebench.SoakRow{
		{Row: 1, Seconds: 60, OfferedTasksPerSec: 5010, PlacedTasksPerSec: 4990, P50SubmitToPlacedMs: 60, P99SubmitToPlacedMs: 180,
			P50SubmitToRunningMs: 120, P99SubmitToRunningMs: 310, OfferedTasks: 300600, PlacedTasks: 299400, LeaderMoves: 1,
			RSSMiB: []float64{610.5, 120.2}, Holds: true},
		{Row: 2, StartSeconds: 60, Seconds: 60, OfferedTasksPerSec: 4985, PlacedTasksPerSec: 4990, P50SubmitToPlacedMs: 62, P99SubmitToPlacedMs: 240,
			P50SubmitToRunningMs: 125, P99SubmitToRunningMs: 420, OfferedTasks: 299100, PlacedTasks: 299400, LeaderMoves: 1,
			RSSMiB: []float64{655, 131}, Holds: true},
		{Row: 3, StartSeconds: 120, Seconds: 60, OfferedTasksPerSec: 5002, PlacedTasksPerSec: 4300, P50SubmitToPlacedMs: 380, P99SubmitToPlacedMs: 1450,
			P50SubmitToRunningMs: 600, P99SubmitToRunningMs: 2210, OfferedTasks: 300120, PlacedTasks: 258000, Errors: 1, LeaderMoves: 1,
			RSSMiB: []float64{660, 140}, Reasons: []string{"1 requests failed", "p99 submit→placed 1450 ms above 1000 ms", "p99 submit→running 2210 ms above 2000 ms"}},
		{Row: 4, StartSeconds: 180, Seconds: 60, OfferedTasksPerSec: 4995, PlacedTasksPerSec: 5600, P50SubmitToPlacedMs: 70, P99SubmitToPlacedMs: 300,
			P50SubmitToRunningMs: 130, P99SubmitToRunningMs: 500, OfferedTasks: 299700, PlacedTasks: 336000, LeaderMoves: 1,
			RSSMiB: []float64{652, 150}, Holds: true},
	},
	Total: e2ebench.Step{Step: 1, TargetTasksPerSec: 5000, OfferedTasksPerSec: 4998, PlacedTasksPerSec: 4970, P99SubmitToPlacedMs: 900,
		P99SubmitToRunningMs: 1300, Tasks: 1199520, PlacedTasks: 1199520, Errors: 1, LeaderMoves: 4,
		Reasons: []string{"1 requests failed"}},
	Memory: []e2ebench.MemoryTrend{
		{Process: "bench", FromRow: 2, Rows: 3, FirstMiB: 655, LastMiB: 652, MeanMiB: 655.7, SlopeMiBPerMin: -1.5, LimitMiBPerMin: 6.6, Judged: true, Flat: true},
		{Process: "fleet-1", FromRow: 2, Rows: 3, FirstMiB: 131, LastMiB: 150, MeanMiB: 140.3, SlopeMiBPerMin: 9.5, LimitMiBPerMin: 4, Judged: true},
	},
	Reasons: []string{"row 3: 1 requests failed", "row 3: p99 submit→placed 1450 ms above 1000 ms", "row 3: p99 submit→running 2210 ms above 2000 ms",
		"whole soak: 1 requests failed", "memory of fleet-1 grows 9.5 MiB/min over rows 2 to 4 (131 to 150 MiB), above 4.0"},
	Notes: []string{"the memory grew while the cluster fell behind (1 of the rows judged placed less than 90% of their offer): " +
		"the work in flight grew with it; only rows that hold tell a leak"}}
