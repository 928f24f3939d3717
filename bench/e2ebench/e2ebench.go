package e2ebench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/bench/fleet"
	"github.com/sluicehq/sluice/bench/submitbench"
	"github.com/sluicehq/sluice/dispatcher"
	"github.com/sluicehq/sluice/dispatcher/server"
	"github.com/sluicehq/sluice/loadgen"
	"github.com/sluicehq/sluice/raftkv"
)

// Config says what Run builds and offers. Zero values mean the documented
// defaults.
type Config struct {
	// Replicas is the dispatcher cluster's size, 1 to 7. Default 3.
	Replicas int
	// Nodes is the simulated nodes of the fleet. Default 10,000.
	Nodes int
	// StartRate is the first step's offered load, in tasks per second.
	// Default 1,000.
	StartRate float64
	// StepFactor multiplies the rate from one step to the next; StepRate
	// adds to it instead. Set at most one: StepFactor above 1 or StepRate
	// above 0. Default StepFactor 2.
	StepFactor, StepRate float64
	// Steps is the most steps run. Default 10.
	Steps int
	// StepDuration is how long each step offers load (the drain of its
	// last placements comes on top). Default 30s.
	StepDuration time.Duration
	// Warmup, when above 0, offers StartRate for that long before the
	// first step, measured but not judged. The steps then meet processes
	// whose heaps have grown and whose caches hold the work in flight, as
	// in a cluster that has served for a while; without it the first
	// steps also pay for touching their memory for the first time, which
	// is dear where a hypervisor takes back the memory a guest frees.
	// Default 0 (none).
	Warmup time.Duration
	// ArraySize is the jobs' task counts, a loadgen.IntDist in its text
	// form ("fixed:N", "uniform:A,B", "zipf:S,MAX"). Default
	// DefaultArraySize.
	ArraySize string
	// RunTime is how long a simulated task runs, a loadgen.DurationDist
	// in its text form ("1s", "uniform:500ms,2s"). Default DefaultRunTime.
	RunTime string
	// P99PlacedLimit and P99RunningLimit bound a sustained step's p99 of
	// submit→placed and of submit→running. Defaults 1s and 2s.
	P99PlacedLimit, P99RunningLimit time.Duration
	// Seed seeds the workloads: step i (from 0) uses Seed+i. Default 0.
	Seed uint64
	// Dir holds the replicas' data; empty means a temporary directory,
	// removed afterwards.
	Dir string
	// Timeout bounds the whole run, cluster and fleet start included.
	// Default 30 minutes, or the warm-up and the soak and 15 minutes more
	// when that is longer.
	Timeout time.Duration
	// Logger receives the run's progress: the cluster and the fleet up,
	// each step's outcome, the Drivers' retries. Default: discard.
	Logger *slog.Logger
	// FleetProcs, when above 0, runs the fleet in that many child
	// processes of FleetExec ("FleetExec loadgen fleet ..."), the nodes
	// split between them, instead of in this process: a process holds
	// each node's connections, and 10,000 nodes' ends of them and the
	// dispatcher's would not fit under one open-files limit of 20,000.
	// Process k's nodes are named fleet-1-pk, fleet-2-pk, ...: in name
	// order, the order the default bin-packing policy fills equal nodes
	// in, the processes take turns, so that the busy nodes are spread
	// over them as over separate hosts.
	FleetProcs int
	// FleetExec is the sluice binary the fleet processes run. Required
	// with FleetProcs.
	FleetExec string
	// FleetMemoryLimit, when above 0, is each fleet process's soft memory
	// limit in bytes (its GOMEMLIMIT). The run's processes share the
	// host; a fleet process that takes its limit from the host's memory
	// alone may outgrow it when the run falls behind. Default 0: the
	// fleet command's own.
	FleetMemoryLimit int64
	// JobRetention is how long the dispatchers keep a finished job
	// (dispatcher.Config.JobRetention). Default 10s, so that each step
	// runs with the state of the work in flight, as a dispatcher serving
	// this rate for long must; negative keeps every job.
	JobRetention time.Duration
	// MoveLeaderEvery, when above 0, has the leading replica hand its
	// leadership to the next one (raftkv TransferLeadership) this often
	// during the warm-up and every step: the steps then measure the
	// cluster through elections under load, with every node's
	// connections moving to the new leader while the old one, alive,
	// still holds them. Needs Replicas of 2 or more. Default 0: never.
	// In a soak the first move comes half a row in, so that each row of
	// a soak whose rows are as long holds one move in its middle.
	MoveLeaderEvery time.Duration
	// Soak, when above 0, is the length of RunSoak's run: StartRate
	// offered for that long in one open-loop run, judged per row of
	// SoakInterval (see RunSoak). The steps' settings (StepFactor,
	// StepRate, Steps, StepDuration) must then be 0, and Run refuses it.
	// Default 0: no soak.
	Soak time.Duration
	// SoakInterval is the length of a soak's rows. Default 1 minute.
	SoakInterval time.Duration
	// SoakSettle is how many of a soak's first rows the memory trend
	// leaves out, while the processes' heaps grow to the size of the work
	// in flight. Default 2.
	SoakSettle int
	// NoMetrics turns the replicas' Prometheus metrics off
	// (server.Config.DisableMetrics). Default false: they are on, and the
	// run scrapes every replica's /metrics once every ScrapeInterval, as
	// a Prometheus server would, fifteen times more often than its
	// default.
	NoMetrics bool
}

// ScrapeInterval is how often a run with metrics scrapes each replica.
const ScrapeInterval = time.Second

// Defaults of Config.
const (
	DefaultReplicas        = 3
	DefaultNodes           = 10_000
	DefaultStartRate       = 1000
	DefaultStepFactor      = 2
	DefaultSteps           = 10
	DefaultStepDuration    = 30 * time.Second
	DefaultArraySize       = "uniform:1,40"
	DefaultRunTime         = "1s"
	DefaultP99PlacedLimit  = time.Second
	DefaultP99RunningLimit = 2 * time.Second
	DefaultJobRetention    = 10 * time.Second
	DefaultTimeout         = 30 * time.Minute
	DefaultSoakInterval    = time.Minute
	DefaultSoakSettle      = 2
)

// SustainedFraction is the share of the offered task rate a step must
// place to be sustained.
const SustainedFraction = 0.9

// Pool is the simulated nodes' pool, and the jobs'.
const Pool = "sim"

// The Drivers sample running times: at most maxProbes jobs are polled at
// once, every pollInterval, so that the polling does not take the cores
// the cluster is measured on. Each step drains for at least minDrain.
const (
	maxProbes    = 8
	pollInterval = 20 * time.Millisecond
	minDrain     = 5 * time.Second
)

func (c Config) withDefaults() Config {
	if c.Replicas == 0 {
		c.Replicas = DefaultReplicas
	}
	if c.Nodes == 0 {
		c.Nodes = DefaultNodes
	}
	if c.StartRate == 0 {
		c.StartRate = DefaultStartRate
	}
	if c.StepFactor == 0 && c.StepRate == 0 && c.Soak == 0 {
		c.StepFactor = DefaultStepFactor
	}
	if c.Steps == 0 {
		c.Steps = DefaultSteps
	}
	if c.StepDuration == 0 {
		c.StepDuration = DefaultStepDuration
	}
	if c.ArraySize == "" {
		c.ArraySize = DefaultArraySize
	}
	if c.RunTime == "" {
		c.RunTime = DefaultRunTime
	}
	if c.P99PlacedLimit == 0 {
		c.P99PlacedLimit = DefaultP99PlacedLimit
	}
	if c.P99RunningLimit == 0 {
		c.P99RunningLimit = DefaultP99RunningLimit
	}
	if c.Timeout == 0 {
		c.Timeout = max(DefaultTimeout, c.Warmup+c.Soak+soakTimeoutMargin)
	}
	if c.SoakInterval == 0 {
		c.SoakInterval = DefaultSoakInterval
	}
	if c.SoakSettle == 0 {
		c.SoakSettle = DefaultSoakSettle
	}
	if c.JobRetention == 0 {
		c.JobRetention = DefaultJobRetention
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every problem of c (zero fields taking their defaults)
// at once.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("e2e benchmark: config: "+format, args...))
	}
	bad := func(f float64) bool { return math.IsNaN(f) || math.IsInf(f, 0) || f < 0 }
	if c.Replicas < 0 || c.Replicas > 7 {
		add("Replicas %d: want 1 to 7 (0: %d)", c.Replicas, DefaultReplicas)
	}
	if c.Nodes < 0 {
		add("Nodes %d: want at least 1 (0: %d)", c.Nodes, DefaultNodes)
	}
	if bad(c.StartRate) {
		add("StartRate %v: want tasks per second above 0", c.StartRate)
	}
	if bad(c.StepFactor) || c.StepFactor > 0 && c.StepFactor <= 1 {
		add("StepFactor %v: want above 1 (0: add StepRate, or %v)", c.StepFactor, DefaultStepFactor)
	}
	if bad(c.StepRate) {
		add("StepRate %v: want tasks per second above 0", c.StepRate)
	}
	if c.StepFactor != 0 && c.StepRate != 0 {
		add("StepFactor %v and StepRate %v: set one, not both", c.StepFactor, c.StepRate)
	}
	if c.FleetProcs < 0 || c.FleetProcs > 0 && c.FleetExec == "" {
		add("FleetProcs %d with FleetExec %q: want 0 (the fleet in this process), or processes of a sluice binary", c.FleetProcs, c.FleetExec)
	}
	if c.FleetMemoryLimit < 0 {
		add("FleetMemoryLimit %d: want bytes, or 0 for the fleet command's own limit", c.FleetMemoryLimit)
	}
	if c.Steps < 0 {
		add("Steps %d: want at least 1 (0: %d)", c.Steps, DefaultSteps)
	}
	if c.StepDuration < 0 {
		add("StepDuration %v: want a positive duration (0: %v)", c.StepDuration, DefaultStepDuration)
	}
	if c.Warmup < 0 {
		add("Warmup %v: want a positive duration, or 0 for none", c.Warmup)
	}
	if c.P99PlacedLimit < 0 || c.P99RunningLimit < 0 {
		add("P99PlacedLimit %v and P99RunningLimit %v must not be negative", c.P99PlacedLimit, c.P99RunningLimit)
	}
	if c.Timeout < 0 {
		add("Timeout %v: want a positive duration (0: %v)", c.Timeout, DefaultTimeout)
	}
	if c.MoveLeaderEvery < 0 || c.MoveLeaderEvery > 0 && c.Replicas == 1 {
		add("MoveLeaderEvery %v with %d replicas: want 0 (never), or a positive duration with 2 or more replicas", c.MoveLeaderEvery, c.Replicas)
	}
	if c.Soak < 0 || c.SoakInterval < 0 || c.SoakSettle < 0 {
		add("Soak %v, SoakInterval %v and SoakSettle %d must not be negative", c.Soak, c.SoakInterval, c.SoakSettle)
	}
	if c.Soak > 0 {
		if c.StepFactor != 0 || c.StepRate != 0 || c.Steps != 0 || c.StepDuration != 0 {
			add("Soak %v with steps (StepFactor %v, StepRate %v, Steps %d, StepDuration %v): a soak is one rate, StartRate; leave the steps' settings 0",
				c.Soak, c.StepFactor, c.StepRate, c.Steps, c.StepDuration)
		}
		if c.Timeout > 0 && c.Timeout < c.Warmup+c.Soak {
			add("Timeout %v: shorter than the warm-up (%v) and the soak (%v)", c.Timeout, c.Warmup, c.Soak)
		}
	}
	d := c.withDefaults()
	arr, err := loadgen.ParseIntDist(d.ArraySize)
	if err != nil {
		add("ArraySize: %v", err)
	}
	rt, err := loadgen.ParseDurationDist(d.RunTime)
	if err != nil {
		add("RunTime: %v", err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if d.Soak > 0 {
		w := d.workload(d.Seed, d.StartRate, d.Soak, arr, rt)
		if err := w.Validate(); err != nil {
			add("soak (%.0f tasks/s): %v", d.StartRate, err)
		} else if jobs := w.Arrival.Rate * d.SoakInterval.Seconds(); jobs < 1 {
			add("a soak row offers %.2f jobs (%.0f tasks/s of mean array size %.1f for %v): want at least one",
				jobs, d.StartRate, arr.Mean(), d.SoakInterval)
		}
		return errors.Join(errs...)
	}
	// The workloads of the first and the last step say what loadgen
	// refuses (array sizes, run times, job rates).
	rates := d.Rates()
	for _, i := range []int{0, len(rates) - 1} {
		w := d.workload(d.Seed+uint64(i), rates[i], d.StepDuration, arr, rt)
		if err := w.Validate(); err != nil {
			add("step %d (%.0f tasks/s): %v", i+1, rates[i], err)
			break
		}
		if jobs := w.Arrival.Rate * d.StepDuration.Seconds(); i == 0 && jobs < 1 {
			add("step 1 offers %.2f jobs (%.0f tasks/s of mean array size %.1f for %v): want at least one",
				jobs, rates[i], arr.Mean(), d.StepDuration)
		}
	}
	return errors.Join(errs...)
}

// Rates returns the offered task rate of every step c may run.
func (c Config) Rates() []float64 {
	c = c.withDefaults()
	out := make([]float64, max(c.Steps, 0))
	for i := range out {
		if c.StepRate > 0 {
			out[i] = c.StartRate + float64(i)*c.StepRate
		} else {
			out[i] = c.StartRate * math.Pow(c.StepFactor, float64(i))
		}
	}
	return out
}

// workload offers rate tasks per second as jobs of arr's mean size, for
// d.
func (c Config) workload(seed uint64, rate float64, d time.Duration, arr loadgen.IntDist, rt loadgen.DurationDist) loadgen.Workload {
	return loadgen.Workload{
		Seed:      seed,
		Arrival:   loadgen.Arrival{Process: loadgen.ArrivalConstant, Rate: rate / arr.Mean()},
		Duration:  api.Duration(d),
		Name:      "e2e",
		ArraySize: arr,
		RunTime:   rt,
		Pool:      Pool,
	}
}

// Result is what Run measured; its JSON is `sluice bench e2e --json`'s
// output.
type Result struct {
	// Replicas and Nodes are the cluster's size and the fleet's.
	Replicas int `json:"replicas"`
	Nodes    int `json:"nodes"`
	// Metrics says the replicas had their metrics on (and were scraped).
	Metrics bool `json:"metrics"`
	// ArraySize, RunTime and StepSeconds describe the steps' workload.
	ArraySize   string  `json:"array_size"`
	RunTime     string  `json:"run_time"`
	StepSeconds float64 `json:"step_seconds"`
	// MaxSustainedTasksPerSec is the placed tasks per second of the
	// highest sustained step (0 when none was), P99SubmitToPlacedMs and
	// P99SubmitToRunningMs its p99 latencies, and SustainedStep its
	// number (from 1; 0 when none).
	MaxSustainedTasksPerSec float64 `json:"max_sustained_tasks_per_sec"`
	P99SubmitToPlacedMs     float64 `json:"p99_submit_to_placed_ms"`
	P99SubmitToRunningMs    float64 `json:"p99_submit_to_running_ms"`
	SustainedStep           int     `json:"sustained_step"`
	// KneeStep is the first step not sustained (from 1), 0 when every
	// step run was.
	KneeStep int `json:"knee_step"`
	// WarmupSeconds is Config.Warmup, and Warmup what it measured (Step
	// 0, not judged); nil without one.
	WarmupSeconds float64 `json:"warmup_seconds,omitempty"`
	Warmup        *Step   `json:"warmup,omitempty"`
	// Steps are the steps run, in order.
	Steps []Step `json:"steps"`
}

// Step is what one step measured.
type Step struct {
	// Step numbers it, from 1; the warm-up is 0.
	Step int `json:"step"`
	// TargetTasksPerSec is the rate asked for; OfferedTasksPerSec the
	// tasks generated over the step's window (the target, up to the
	// array sizes drawn), OfferedJobsPerSec their jobs.
	TargetTasksPerSec  float64 `json:"target_tasks_per_sec"`
	OfferedTasksPerSec float64 `json:"offered_tasks_per_sec"`
	OfferedJobsPerSec  float64 `json:"offered_jobs_per_sec"`
	// PlacedTasksPerSec is the rate achieved: tasks seen placed over the
	// window, or until the last of them when the cluster fell behind.
	PlacedTasksPerSec float64 `json:"placed_tasks_per_sec"`
	// P50 and P99 of submit→placed (every task) and submit→running (the
	// tasks of sampled jobs), in milliseconds.
	P50SubmitToPlacedMs  float64 `json:"p50_submit_to_placed_ms"`
	P99SubmitToPlacedMs  float64 `json:"p99_submit_to_placed_ms"`
	P50SubmitToRunningMs float64 `json:"p50_submit_to_running_ms"`
	P99SubmitToRunningMs float64 `json:"p99_submit_to_running_ms"`
	// MaxSubmitToPlacedMs is the latest placement, P99SubmitToCommittedMs
	// the submit replies' p99, and MaxLagMs how late the load generator
	// sent its latest request after the job's arrival time: where a step
	// short of its rate lost the time.
	MaxSubmitToPlacedMs    float64 `json:"max_submit_to_placed_ms"`
	P99SubmitToCommittedMs float64 `json:"p99_submit_to_committed_ms"`
	MaxLagMs               float64 `json:"max_lag_ms"`
	// Tasks were submitted; PlacedTasks seen placed; UnplacedTasks
	// committed but not seen placed by the end of the drain; RunningTasks
	// seen running (the sample behind the running times).
	Tasks         int64 `json:"tasks"`
	PlacedTasks   int64 `json:"placed_tasks"`
	UnplacedTasks int64 `json:"unplaced_tasks"`
	RunningTasks  int64 `json:"running_tasks"`
	// Errors counts requests that failed for good, Retries those sent
	// again.
	Errors  int64 `json:"errors"`
	Retries int64 `json:"retries"`
	// Seconds is the step's length, drain included.
	Seconds float64 `json:"seconds"`
	// What the step cost per task placed, over its length: the CPU time
	// of this process (the replicas and the load generator, and the fleet
	// when it runs in process) and of the fleet processes, in
	// microseconds, and this process's heap bytes allocated and minor
	// page faults (the first touch of memory, which costs more than
	// reusing it). On a host the run saturates, throughput goes as the
	// inverse of the CPU time per task.
	BenchCPUPerTaskUs float64 `json:"bench_cpu_us_per_task"`
	FleetCPUPerTaskUs float64 `json:"fleet_cpu_us_per_task"`
	AllocBytesPerTask float64 `json:"alloc_bytes_per_task"`
	PageFaultsPerTask float64 `json:"page_faults_per_task"`
	// StoreBytesPerTask is what the replicas together wrote to their
	// stores' write-ahead logs (the raft log and the applied state) per
	// task placed: every byte is copied into a memtable, flushed and
	// compacted later.
	StoreBytesPerTask float64 `json:"store_bytes_per_task"`
	// HeapLiveMB is this process's live Go heap at the step's end (the
	// replicas' state and the nodes' connections, mostly), found by a
	// collection after the step's usage was read.
	HeapLiveMB float64 `json:"heap_live_mb"`
	// LeaderMoves is how many times the leadership moved during the step
	// at Config.MoveLeaderEvery's asking.
	LeaderMoves int `json:"leader_moves,omitempty"`
	// Sustained says whether the step held; Reasons says why not.
	Sustained bool     `json:"sustained"`
	Reasons   []string `json:"reasons,omitempty"`
}

// Run starts the cluster and the fleet, then offers the steps' load until
// the knee or the last step; see the package comment. When it fails or ctx
// ends during a step, it returns the steps measured so far with the error.
// A Config with Soak is RunSoak's.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if cfg.Soak > 0 {
		return Result{}, fmt.Errorf("e2e benchmark: Soak %v: a soak is RunSoak's", cfg.Soak)
	}
	cfg = cfg.withDefaults()
	arr, _ := loadgen.ParseIntDist(cfg.ArraySize) // Validate parsed them
	rt, _ := loadgen.ParseDurationDist(cfg.RunTime)
	res := Result{Replicas: cfg.Replicas, Nodes: cfg.Nodes, Metrics: !cfg.NoMetrics, ArraySize: arr.String(), RunTime: rt.String(),
		StepSeconds: cfg.StepDuration.Seconds(), Steps: []Step{}}
	log := cfg.Logger
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	ctx, rg, err := startRig(ctx, cfg)
	defer rg.close()
	if err != nil {
		return res, err
	}

	runID := newRunID()
	// Each step's watch starts where the last one's ended: replaying the
	// earlier steps' jobs would delay the observation of its first
	// placements.
	var watchFrom uint64
	if cfg.Warmup > 0 {
		// Seed+Steps is no step's seed.
		w := cfg.workload(cfg.Seed+uint64(cfg.Steps), cfg.StartRate, cfg.Warmup, arr, rt)
		st, err := runStep(ctx, rg, cfg, 0, cfg.StartRate, w, runID+"-warmup", &watchFrom)
		res.WarmupSeconds, res.Warmup = cfg.Warmup.Seconds(), &st
		if err != nil {
			return res, err
		}
		log.Info("e2e: warm-up", st.logAttrs()...)
	}
	for i, rate := range cfg.Rates() {
		w := cfg.workload(cfg.Seed+uint64(i), rate, cfg.StepDuration, arr, rt)
		st, err := runStep(ctx, rg, cfg, i+1, rate, w, fmt.Sprintf("%s-s%d", runID, i+1), &watchFrom)
		res.Steps = append(res.Steps, st)
		if err != nil {
			return res, err
		}
		args := append([]any{"step", st.Step}, st.logAttrs()...)
		log.Info("e2e: step", append(args, "sustained", st.Sustained, "reasons", st.Reasons)...)
		if !st.Sustained {
			res.KneeStep = st.Step
			break
		}
		res.SustainedStep = st.Step
		res.MaxSustainedTasksPerSec = st.PlacedTasksPerSec
		res.P99SubmitToPlacedMs, res.P99SubmitToRunningMs = st.P99SubmitToPlacedMs, st.P99SubmitToRunningMs
	}
	return res, nil
}

// rig is what a run measures: the cluster, the fleet, and a client of the
// cluster.
type rig struct {
	client   *api.Client
	replicas []*raftkv.Node
	// fleetPIDs are the fleet processes' (none when the fleet runs in
	// this process).
	fleetPIDs []int
	closers   []func()
}

// startRig starts the cluster and the fleet of cfg (with defaults) and
// waits until every node is ready. It returns a context derived from ctx
// that a fleet process exiting early ends; close stops everything, also
// after an error.
func startRig(ctx context.Context, cfg Config) (context.Context, *rig, error) {
	log := cfg.Logger
	rg := &rig{}
	// The replicas here hold the server ends of every node's connections
	// (and a fleet in this process the client ends), within a limit they
	// size from the process's open-files limit (server.ConnLimitFor):
	// raise it first. Short of descriptors, nodes past the limit wait to
	// connect: say so.
	simulated := 0
	if cfg.FleetProcs == 0 {
		simulated = cfg.Nodes
	}
	if err := fleet.EnsureFiles(cfg.Nodes, simulated); err != nil {
		log.Warn("e2e: nodes may wait for connections", "err", err)
	}
	start := time.Now()
	// The retention time alone bounds the finished jobs, as before
	// JobRetentionMax was: figures stay comparable across releases.
	cl, err := submitbench.StartCluster(ctx, cfg.Replicas, cfg.Dir, dispatcher.Config{JobRetention: cfg.JobRetention, JobRetentionMax: -1},
		func(c *server.Config) { c.DisableMetrics = cfg.NoMetrics })
	if err != nil {
		return ctx, rg, fmt.Errorf("e2e benchmark: %w", err)
	}
	rg.closers = append(rg.closers, cl.Close)
	if !cfg.NoMetrics {
		rg.closers = append(rg.closers, scrape(ctx, cl.Addrs(), log))
	}
	log.Info("e2e: cluster up", "replicas", cfg.Replicas, "took", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	for _, s := range cl.Servers {
		rg.replicas = append(rg.replicas, s.Raft())
	}
	if cfg.FleetProcs > 0 {
		var stop func()
		if ctx, stop, rg.fleetPIDs, err = fleet.StartProcs(ctx, fleet.ProcsConfig{Exec: cfg.FleetExec, Procs: cfg.FleetProcs,
			Nodes: cfg.Nodes, Addrs: cl.Addrs(), Pool: Pool, MemoryLimit: cfg.FleetMemoryLimit, Owner: "e2e benchmark"}); err != nil {
			return ctx, rg, err
		}
		rg.closers = append(rg.closers, stop)
	} else {
		f, err := fleet.Start(ctx, fleet.Config{Addrs: cl.Addrs(), Nodes: cfg.Nodes, Pool: Pool})
		if err != nil {
			return ctx, rg, fmt.Errorf("e2e benchmark: %w", err)
		}
		rg.closers = append(rg.closers, f.Close)
	}
	rg.client, err = api.NewClient(api.ClientConfig{Addrs: cl.Addrs()})
	if err != nil {
		return ctx, rg, fmt.Errorf("e2e benchmark: %w", err)
	}
	rg.closers = append(rg.closers, rg.client.Close)
	if err := waitReady(ctx, rg.client, cfg.Nodes, log); err != nil {
		return ctx, rg, err
	}
	log.Info("e2e: fleet ready", "nodes", cfg.Nodes, "took", time.Since(start).Round(time.Millisecond))
	return ctx, rg, nil
}

// scrape gets every replica's metrics once every ScrapeInterval until the
// returned stop is called (which waits for it to end) or ctx ends. The
// bodies are read and dropped: what a scrape costs a replica is the
// cost measured. A failed scrape is logged at debug.
func scrape(ctx context.Context, addrs []string, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		client := &http.Client{Timeout: 10 * time.Second}
		t := time.NewTicker(ScrapeInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for _, a := range addrs {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, a+api.PathMetrics, nil)
				if err != nil {
					return
				}
				resp, err := client.Do(req)
				if err != nil {
					log.Debug("e2e: scrape", "replica", a, "err", err)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					log.Debug("e2e: scrape", "replica", a, "status", resp.StatusCode)
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// close stops what startRig started, the last started first.
func (rg *rig) close() {
	for i := len(rg.closers) - 1; i >= 0; i-- {
		rg.closers[i]()
	}
}

// newRunID returns a run's random ID: the Drivers' run IDs start with it.
func newRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "e2e-" + hex.EncodeToString(b[:])
}

// driverConfig is the Driver configuration of every run of cfg: w as run
// runID, its watch from watchFrom, draining for drain.
func (rg *rig) driverConfig(cfg Config, w loadgen.Workload, runID string, watchFrom uint64, drain time.Duration) loadgen.DriverConfig {
	return loadgen.DriverConfig{
		Client:       rg.client,
		Workload:     w,
		RunID:        runID,
		MaxProbes:    maxProbes,
		PollInterval: pollInterval,
		Drain:        drain,
		WatchFrom:    watchFrom,
		Logger:       cfg.Logger,
	}
}

// runStep offers w, step n's load of rate tasks per second, as run runID,
// and judges it.
func runStep(ctx context.Context, rg *rig, cfg Config, n int, rate float64, w loadgen.Workload, runID string, watchFrom *uint64) (Step, error) {
	st := Step{Step: n, TargetTasksPerSec: rate}
	d, err := loadgen.NewDriver(rg.driverConfig(cfg, w, runID, *watchFrom, max(time.Duration(w.Duration), minDrain)))
	if err != nil {
		return st, fmt.Errorf("e2e benchmark: step %d: %w", st.Step, err)
	}
	from := readUsage(rg.fleetPIDs, rg.replicas)
	var moved atomic.Int64
	stopMoving := moveLeaders(ctx, cfg, rg.replicas, cfg.MoveLeaderEvery, &moved)
	r, err := d.Run(ctx)
	stopMoving()
	st.LeaderMoves = int(moved.Load())
	to := readUsage(rg.fleetPIDs, rg.replicas)
	st.HeapLiveMB = float64(liveHeap()) / (1 << 20)
	*watchFrom = r.WatchIndex
	st.fill(r)
	st.perTask(from, to)
	if err := stepErr(ctx, err); err != nil {
		return st, fmt.Errorf("e2e benchmark: step %d: %w", st.Step, err)
	}
	st.Reasons = cfg.judge(st)
	st.Sustained = len(st.Reasons) == 0
	return st, nil
}

// fill sets st's rates, latencies and counts from a Driver's result.
func (st *Step) fill(r loadgen.Result) {
	st.OfferedTasksPerSec, st.OfferedJobsPerSec = r.Offered.TasksPerSec, r.Offered.JobsPerSec
	st.PlacedTasksPerSec = r.Placed.TasksPerSec
	l := r.Latency
	st.P50SubmitToPlacedMs, st.P99SubmitToPlacedMs = l.Placed.P50Ms, l.Placed.P99Ms
	st.P50SubmitToRunningMs, st.P99SubmitToRunningMs = l.Running.P50Ms, l.Running.P99Ms
	st.MaxSubmitToPlacedMs, st.P99SubmitToCommittedMs, st.MaxLagMs = l.Placed.MaxMs, l.Committed.P99Ms, l.Lag.MaxMs
	st.Tasks, st.PlacedTasks, st.UnplacedTasks, st.RunningTasks = r.Tasks, r.PlacedTasks, r.UnplacedTasks, r.RunningTasks
	st.Errors, st.Retries, st.Seconds = r.Errors, r.Retries, r.Seconds
}

// moveLeaders moves the leadership among replicas, if
// cfg.MoveLeaderEvery is set: first after first, then every
// cfg.MoveLeaderEvery after that (the moves keep to that beat however
// long each takes), counting each move made in moved, until the returned
// function is called; that function returns once the mover has stopped.
func moveLeaders(ctx context.Context, cfg Config, replicas []*raftkv.Node, first time.Duration, moved *atomic.Int64) (stop func()) {
	if cfg.MoveLeaderEvery <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		next := time.Now().Add(first)
		t := time.NewTimer(first)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := moveLeader(ctx, replicas); err != nil {
				if ctx.Err() == nil {
					cfg.Logger.Warn("e2e: moving the leadership", "err", err)
				}
			} else {
				moved.Add(1)
			}
			// A move that overran the beat skips the beats it overran.
			next = next.Add(cfg.MoveLeaderEvery)
			if late := time.Since(next); late > 0 {
				next = next.Add((late/cfg.MoveLeaderEvery + 1) * cfg.MoveLeaderEvery)
			}
			t.Reset(time.Until(next))
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// moveLeader has the leading replica hand its leadership to the one after
// it, and waits until it has.
func moveLeader(ctx context.Context, replicas []*raftkv.Node) error {
	for i, r := range replicas {
		st := r.Status()
		if !st.IsLeader {
			continue
		}
		to := replicas[(i+1)%len(replicas)].Status().ID
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return r.TransferLeadership(ctx, to)
	}
	return errors.New("no replica leads")
}

// logAttrs are what the progress log says of a step, judged or not.
func (st *Step) logAttrs() []any {
	a := []any{"offered_tasks_per_sec", round(st.OfferedTasksPerSec), "placed_tasks_per_sec", round(st.PlacedTasksPerSec),
		"p99_placed_ms", st.P99SubmitToPlacedMs, "p99_running_ms", st.P99SubmitToRunningMs, "errors", st.Errors}
	if st.LeaderMoves > 0 {
		a = append(a, "leader_moves", st.LeaderMoves)
	}
	return a
}

// stepErr is the error of a step run in ctx whose Driver returned err:
// err, or, once ctx has ended, its cause. A fleet process that exits
// early ends ctx; the step's figures are then not the cluster's (its CPU
// time no longer counts), even when the Driver returned first.
func stepErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

// judge returns why st was not sustained, nothing when it was.
func (c Config) judge(st Step) []string {
	var why []string
	if st.PlacedTasksPerSec < SustainedFraction*st.OfferedTasksPerSec || st.OfferedTasksPerSec == 0 {
		pct := 0.0
		if st.OfferedTasksPerSec > 0 {
			pct = 100 * st.PlacedTasksPerSec / st.OfferedTasksPerSec
		}
		why = append(why, fmt.Sprintf("placed %.0f of %.0f tasks/s offered (%.0f%%, want %.0f%%)",
			st.PlacedTasksPerSec, st.OfferedTasksPerSec, pct, 100*SustainedFraction))
	}
	if st.Errors > 0 {
		why = append(why, fmt.Sprintf("%d requests failed", st.Errors))
	}
	if lim := ms(c.P99PlacedLimit); st.P99SubmitToPlacedMs > lim {
		why = append(why, fmt.Sprintf("p99 submit→placed %.0f ms above %.0f ms", st.P99SubmitToPlacedMs, lim))
	}
	if st.RunningTasks == 0 {
		why = append(why, "no task seen running")
	} else if lim := ms(c.P99RunningLimit); st.P99SubmitToRunningMs > lim {
		why = append(why, fmt.Sprintf("p99 submit→running %.0f ms above %.0f ms", st.P99SubmitToRunningMs, lim))
	}
	return why
}

// waitReady waits until the dispatcher lists n ready nodes in Pool,
// logging its progress every waitLog.
func waitReady(ctx context.Context, c *api.Client, n int, log *slog.Logger) error {
	ready := 0
	var lastErr error
	lastLog := time.Now()
	for {
		l, err := c.Nodes(ctx)
		if lastErr = err; err == nil {
			ready = 0
			for _, node := range l.Nodes {
				if node.State == api.NodeReady && node.Spec.Pool == Pool {
					ready++
				}
			}
			if ready >= n {
				return nil
			}
		}
		if time.Since(lastLog) >= waitLog {
			log.Info("e2e: waiting for the fleet", "ready", ready, "nodes", n, "err", lastErr)
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("e2e benchmark: %d of %d nodes ready (last listing: %v): %w", ready, n, lastErr, context.Cause(ctx))
		case <-time.After(waitPoll):
		}
	}
}

// waitReady lists the nodes every waitPoll, and logs its progress every
// waitLog. A listing of 10,000 nodes is megabytes of JSON to encode and
// decode: listing it ten times a second took most of the CPU the nodes
// needed to stay ready.
const (
	waitPoll = time.Second
	waitLog  = 10 * time.Second
)

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func round(f float64) float64 { return math.Round(f) }
