// Package suitetest holds a fixed suite of results, for the tests of the
// packages that render suites (tables, charts).
package suitetest

import (
	"slices"
	"time"

	"github.com/sluicehq/sluice/bench/e2ebench"
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

func report[R any](name string, r R) *suite.Report[R] {
	return &suite.Report[R]{Scenario: name, Mode: "quick", Time: Time, Seconds: 12.5, Machine: Machine, Result: r}
}

// Suite is a suite of every scenario with fixed results; podstart
// skipped. Each call returns new reports, with their own copies of the
// result slices: a test may change them.
func Suite() suite.Suite {
	e2e := E2E
	e2e.Steps = slices.Clone(E2E.Steps)
	s := suite.Suite{
		Submit:   report("submit", slices.Clone(Submit)),
		Latency:  report("latency", submitbench.LatencyResult{Nodes: 4, Samples: 50, P50Ms: 11.6, P99Ms: 18.3, MaxMs: 21}),
		Sched:    report("sched", schedbench.Result{Nodes: 2000, Tasks: 20000, Jobs: 150, Replicas: 3, PlacementsPerSec: 50350, RoundP50Ms: 24, RoundP99Ms: 290, SolverShare: 0.04, BytesPerPendingTask: 5.2}),
		Raftkv:   report("raftkv", slices.Clone(Raftkv)),
		E2E:      report("e2e", e2e),
		Podstart: report[[]podbench.Result]("podstart", nil),
	}
	s.Podstart.Skipped = "not root: containers need namespaces and cgroups"
	return s
}
