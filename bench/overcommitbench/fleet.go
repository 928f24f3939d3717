package overcommitbench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/bench/fleet"
	"github.com/sluicehq/sluice/bench/submitbench"
	"github.com/sluicehq/sluice/dispatcher"
	"github.com/sluicehq/sluice/dispatcher/server"
)

// FleetConfig says what RunFleet builds and offers. Zero values mean the
// documented defaults.
type FleetConfig struct {
	// Replicas is the dispatcher cluster's size, 1 to 7. Default 1: the
	// figures are the estimates', and a replica more would take cores
	// from the fleet.
	Replicas int
	// Nodes is the simulated nodes. Default 10,000.
	Nodes int
	// NodeCPU (millicores) and NodeMemory (bytes) are each node's
	// capacity, all of it allocatable to either tier. Defaults 8 cores
	// and 32Gi.
	NodeCPU, NodeMemory int64
	// HeartbeatPeriod is how often each node sends its usage. Default
	// 10s, the nodelet's.
	HeartbeatPeriod time.Duration
	// OnlinePerNode is how many online tasks a node runs on average.
	// Default 2.
	OnlinePerNode int
	// OnlineShare is the share of a node's capacity its online tasks
	// ask for together, above 0 and at most 1. Default 0.5.
	OnlineShare float64
	// OnlineBase and OnlinePeak are the shares of its request an online
	// task uses off its peak and at it, from 0 to 1. Defaults 0.25 and
	// 0.75.
	OnlineBase, OnlinePeak float64
	// Period is how often the online usage peaks and PeakLength how long
	// the peak holds, shorter than Period. Defaults 4m and 2m.
	Period, PeakLength time.Duration
	// OfflineCPU (millicores) and OfflineMemory (bytes) are what each
	// offline task asks for. Defaults 1000 and 2Gi.
	OfflineCPU, OfflineMemory int64
	// OfflineUse is the share of its request an offline task uses, from
	// 0 to 1. Default 0.8.
	OfflineUse float64
	// OfflineRunTime is how long an offline task runs on average: each
	// job's tasks run for a time drawn uniformly from half of it to one
	// and a half (with Seed), so that offline tasks placed together do
	// not all end together. Default 30s.
	OfflineRunTime time.Duration
	// Seed seeds the offline jobs' run times. Default 0.
	Seed uint64
	// OfflineArray is the tasks of each offline job. Default 100.
	OfflineArray int
	// Backlog is how many offline tasks the submitter keeps pending.
	// Default the most of Nodes/10, OfflineArray, and twice the offline
	// tasks that end between two looks of the submitter when offline
	// work fills every node (so that the pending work never runs out).
	Backlog int
	// Duration is how long offline work is offered and measured.
	// Default 2 Periods.
	Duration time.Duration
	// Warmup is the first part of Duration that AllocationRatio and
	// Utilization leave out: offline work filling an empty fleet. Its
	// samples are in the series. Default OfflineRunTime, at most half of
	// Duration.
	Warmup time.Duration
	// SampleEvery is how often the state is read. Default 1s.
	SampleEvery time.Duration
	// SettleBand is how close to a phase's final level the allocation
	// ratio must stay to have settled, as a share of the capacity.
	// Default 0.02.
	SettleBand float64
	// FleetProcs, when above 0, runs the fleet in that many child
	// processes of FleetExec ("FleetExec loadgen fleet ..."), the nodes
	// split between them: 10,000 nodes' connections do not fit under one
	// process's open-files limit. Default 0: in this process.
	FleetProcs int
	// FleetExec is the sluice binary the fleet processes run. Required
	// with FleetProcs.
	FleetExec string
	// FleetMemoryLimit, when above 0, is each fleet process's GOMEMLIMIT
	// in bytes. Default 0: the fleet command's own.
	FleetMemoryLimit int64
	// Dir holds the replicas' data; empty means a temporary directory,
	// removed afterwards.
	Dir string
	// Timeout bounds the whole run, cluster and fleet start included.
	// Default Duration plus 15 minutes.
	Timeout time.Duration
	// Logger receives the run's progress. Default: discard.
	Logger *slog.Logger
}

// Defaults of FleetConfig.
const (
	DefaultFleetReplicas        = 1
	DefaultFleetNodes           = 10_000
	DefaultFleetNodeCPU         = 8000
	DefaultFleetNodeMemory      = 32 << 30
	DefaultFleetHeartbeatPeriod = 10 * time.Second
	DefaultOnlinePerNode        = 2
	DefaultOnlineShare          = 0.5
	DefaultOnlineBase           = 0.25
	DefaultOnlinePeak           = 0.75
	DefaultPeriod               = 4 * time.Minute
	DefaultPeakLength           = 2 * time.Minute
	DefaultOfflineCPU           = 1000
	DefaultOfflineMemory        = 2 << 30
	DefaultOfflineUse           = 0.8
	DefaultOfflineRunTime       = 30 * time.Second
	DefaultOfflineArray         = 100
	DefaultSampleEvery          = time.Second
	DefaultSettleBand           = 0.02
)

// FleetPool is the simulated nodes' pool, and the jobs'.
const FleetPool = "sim"

// The submitter looks at the backlog every submitEvery and submits at
// most maxJobsPerSubmit jobs at a time.
const (
	submitEvery      = 200 * time.Millisecond
	maxJobsPerSubmit = 50
)

func (c FleetConfig) withDefaults() FleetConfig {
	setInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	setI64 := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	setF := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	setD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	setInt(&c.Replicas, DefaultFleetReplicas)
	setInt(&c.Nodes, DefaultFleetNodes)
	setI64(&c.NodeCPU, DefaultFleetNodeCPU)
	setI64(&c.NodeMemory, DefaultFleetNodeMemory)
	setD(&c.HeartbeatPeriod, DefaultFleetHeartbeatPeriod)
	setInt(&c.OnlinePerNode, DefaultOnlinePerNode)
	setF(&c.OnlineShare, DefaultOnlineShare)
	setF(&c.OnlineBase, DefaultOnlineBase)
	setF(&c.OnlinePeak, DefaultOnlinePeak)
	setD(&c.Period, DefaultPeriod)
	setD(&c.PeakLength, DefaultPeakLength)
	setI64(&c.OfflineCPU, DefaultOfflineCPU)
	setI64(&c.OfflineMemory, DefaultOfflineMemory)
	setF(&c.OfflineUse, DefaultOfflineUse)
	setD(&c.OfflineRunTime, DefaultOfflineRunTime)
	setInt(&c.OfflineArray, DefaultOfflineArray)
	slots := float64(c.Nodes) * float64(c.NodeCPU) / float64(c.OfflineCPU)
	setInt(&c.Backlog, max(c.Nodes/10, c.OfflineArray, int(2*slots*submitEvery.Seconds()/c.OfflineRunTime.Seconds())))
	setD(&c.Duration, 2*c.Period)
	setD(&c.Warmup, min(c.OfflineRunTime, c.Duration/2))
	setD(&c.SampleEvery, DefaultSampleEvery)
	setF(&c.SettleBand, DefaultSettleBand)
	setD(&c.Timeout, c.Duration+15*time.Minute)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every problem of c (zero fields taking their defaults)
// at once.
func (c FleetConfig) Validate() error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("overcommit fleet benchmark: config: "+format, args...))
	}
	share := func(name string, v float64, zeroOK bool) {
		if math.IsNaN(v) || v < 0 || v > 1 || v == 0 && !zeroOK {
			add("%s %v: want a share from 0 to 1", name, v)
		}
	}
	if c.Replicas < 0 || c.Replicas > 7 {
		add("Replicas %d: want 1 to 7", c.Replicas)
	}
	if c.Nodes < 0 || c.NodeCPU < 0 || c.NodeMemory < 0 || c.OnlinePerNode < 0 {
		add("Nodes %d, NodeCPU %d, NodeMemory %d and OnlinePerNode %d must not be negative", c.Nodes, c.NodeCPU, c.NodeMemory, c.OnlinePerNode)
	}
	share("OnlineShare", c.OnlineShare, true)
	share("OnlineBase", c.OnlineBase, true)
	share("OnlinePeak", c.OnlinePeak, true)
	share("OfflineUse", c.OfflineUse, true)
	share("SettleBand", c.SettleBand, true)
	if c.OfflineCPU < 0 || c.OfflineMemory < 0 || c.OfflineArray < 0 || c.OfflineArray > api.MaxTaskCount || c.Backlog < 0 {
		add("OfflineCPU %d, OfflineMemory %d, OfflineArray %d and Backlog %d: want positive values (an array of at most %d)",
			c.OfflineCPU, c.OfflineMemory, c.OfflineArray, c.Backlog, api.MaxTaskCount)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"HeartbeatPeriod", c.HeartbeatPeriod}, {"Period", c.Period}, {"PeakLength", c.PeakLength}, {"OfflineRunTime", c.OfflineRunTime},
		{"Duration", c.Duration}, {"Warmup", c.Warmup}, {"SampleEvery", c.SampleEvery}, {"Timeout", c.Timeout}} {
		if d.v < 0 {
			add("%s %v must not be negative", d.name, d.v)
		}
	}
	if c.FleetProcs < 0 || c.FleetProcs > 0 && c.FleetExec == "" {
		add("FleetProcs %d with FleetExec %q: want 0 (the fleet in this process), or processes of a sluice binary", c.FleetProcs, c.FleetExec)
	}
	if c.FleetMemoryLimit < 0 {
		add("FleetMemoryLimit %d must not be negative", c.FleetMemoryLimit)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	d := c.withDefaults()
	if d.PeakLength >= d.Period {
		add("PeakLength %v: want shorter than Period %v", d.PeakLength, d.Period)
	}
	if d.OnlinePeak < d.OnlineBase {
		add("OnlinePeak %v: want at least OnlineBase %v", d.OnlinePeak, d.OnlineBase)
	}
	if d.Warmup >= d.Duration {
		add("Warmup %v: want shorter than Duration %v", d.Warmup, d.Duration)
	}
	if d.SampleEvery > d.Duration/10 {
		add("SampleEvery %v: want at most a tenth of Duration %v", d.SampleEvery, d.Duration)
	}
	if t := d.onlineTask(); t.CPU < 1 || t.Memory < 1 {
		add("online tasks of %d millicores and %d bytes: want more nodes' capacity, a larger OnlineShare or fewer OnlinePerNode", t.CPU, t.Memory)
	}
	if d.OfflineCPU > d.NodeCPU || d.OfflineMemory > d.NodeMemory {
		add("an offline task of %d millicores and %d bytes does not fit a node of %d and %d", d.OfflineCPU, d.OfflineMemory, d.NodeCPU, d.NodeMemory)
	}
	return errors.Join(errs...)
}

// onlineTask is what each online task asks for.
func (c FleetConfig) onlineTask() api.Usage {
	n := float64(c.OnlinePerNode)
	return api.Usage{CPU: int64(float64(c.NodeCPU) * c.OnlineShare / n), Memory: int64(float64(c.NodeMemory) * c.OnlineShare / n)}
}

// onlineUsage is an online task's sim usage.
func (c FleetConfig) onlineUsage() *api.SimUsage {
	req := c.onlineTask()
	part := func(v int64, f float64) int64 { return int64(float64(v) * f) }
	return &api.SimUsage{CPU: part(req.CPU, c.OnlineBase), Memory: part(req.Memory, c.OnlineBase), Peak: &api.SimPeak{
		CPU: part(req.CPU, c.OnlinePeak), Memory: part(req.Memory, c.OnlinePeak),
		Period: api.Duration(c.Period), Length: api.Duration(c.PeakLength),
	}}
}

// FleetResult is what RunFleet measured; its JSON is `sluice bench
// overcommit --fleet --json`'s output. Shares are of the fleet's CPU
// capacity unless named otherwise.
type FleetResult struct {
	// Replicas and Nodes are the cluster's size and the fleet's;
	// CapacityCPU (millicores) and CapacityMemory (bytes) the fleet's.
	Replicas       int   `json:"replicas"`
	Nodes          int   `json:"nodes"`
	CapacityCPU    int64 `json:"capacity_cpu"`
	CapacityMemory int64 `json:"capacity_memory"`
	// HeartbeatSeconds, PeriodSeconds and PeakSeconds describe the
	// usage's reports and shifts; OnlineTasks the online work placed;
	// Seed seeded the offline run times.
	Seed             uint64  `json:"seed"`
	HeartbeatSeconds float64 `json:"heartbeat_seconds"`
	PeriodSeconds    float64 `json:"period_seconds"`
	PeakSeconds      float64 `json:"peak_seconds"`
	OnlineTasks      int64   `json:"online_tasks"`
	// AllocationRatio is the mean, over the samples after the warm-up,
	// of the requests of both tiers over the capacity (CPU; the memory
	// ratio is in each sample); Utilization the mean of what the
	// heartbeats report used over the capacity.
	AllocationRatio float64 `json:"allocation_ratio"`
	Utilization     float64 `json:"utilization"`
	// AllocationRatioOffPeak and AllocationRatioPeak are the levels the
	// allocation ratio settled at, off the online peak and at it: the
	// mean of the final levels of the complete phases of each kind (0
	// when none was complete).
	AllocationRatioOffPeak float64 `json:"allocation_ratio_off_peak"`
	AllocationRatioPeak    float64 `json:"allocation_ratio_peak"`
	// EstimateOverConfiguredOffPeak and EstimateOverConfiguredPeak are
	// the dispatcher's estimates of the online usage over the configured
	// usage, at the end of the complete phases of each kind (1 is exact;
	// above 1, the estimate holds room back).
	EstimateOverConfiguredOffPeak float64 `json:"estimate_over_configured_off_peak"`
	EstimateOverConfiguredPeak    float64 `json:"estimate_over_configured_peak"`
	// FollowUpSeconds and FollowDownSeconds are the longest follow times
	// (FleetShift.FollowSeconds) of the complete phases after a rise of
	// the online usage and after a fall; -1 when one did not settle, 0
	// when there was none.
	FollowUpSeconds   float64 `json:"follow_up_seconds"`
	FollowDownSeconds float64 `json:"follow_down_seconds"`
	// MinEstimatedNodes is the fewest nodes with a fresh heartbeat in a
	// sample after the warm-up: below Nodes, the others' heartbeats were
	// older than the dispatcher's EstimateMaxAge, and their offline
	// capacity was the static one (here, the whole node).
	MinEstimatedNodes int `json:"min_estimated_nodes"`
	// OfflineSubmitted counts the offline tasks submitted, OfflinePlaced
	// their placements (a task placed again, its node lost, counts
	// twice); SubmitErrors the failed submit requests.
	OfflineSubmitted int64 `json:"offline_submitted"`
	OfflinePlaced    int64 `json:"offline_placed"`
	SubmitErrors     int64 `json:"submit_errors"`
	// SetupSeconds is the cluster's and the fleet's start and the online
	// work's placement; Seconds the measured part.
	SetupSeconds float64 `json:"setup_seconds"`
	Seconds      float64 `json:"seconds"`
	// LoadAverage is the host's one-minute load average at the end: the
	// run shares the host's cores.
	LoadAverage float64 `json:"load_average"`
	// Series is every sample, Shifts every shift of the online usage
	// during the measured part.
	Series []FleetSample `json:"series"`
	Shifts []FleetShift  `json:"shifts"`
}

// FleetSample is the state at one time.
type FleetSample struct {
	// T is the seconds since offline work was first offered.
	T float64 `json:"t"`
	// Peak says the online usage is configured at its peak.
	Peak bool `json:"peak"`
	// AllocationRatio is the CPU requests of both tiers over the
	// capacity, MemoryAllocationRatio the memory's; OnlineAllocated and
	// OfflineAllocated each tier's CPU requests.
	AllocationRatio       float64 `json:"allocation_ratio"`
	MemoryAllocationRatio float64 `json:"memory_allocation_ratio"`
	OnlineAllocated       float64 `json:"online_allocated"`
	OfflineAllocated      float64 `json:"offline_allocated"`
	// Utilization is the CPU the heartbeats report used.
	Utilization float64 `json:"utilization"`
	// OnlineConfigured is the CPU the running online pods' specs say
	// they use now, OnlineReported what the heartbeats say, and
	// OnlineEstimated what the dispatcher estimates for the nodes with a
	// fresh heartbeat (EstimatedNodes of them).
	OnlineConfigured float64 `json:"online_configured"`
	OnlineReported   float64 `json:"online_reported"`
	OnlineEstimated  float64 `json:"online_estimated"`
	EstimatedNodes   int     `json:"estimated_nodes"`
	// Pending is the offline tasks submitted and not placed yet.
	Pending int64 `json:"pending"`
}

// FleetShift is one shift of the online usage and how the allocation
// followed it.
type FleetShift struct {
	// T is when it happened, in the series' seconds; Up says the usage
	// rose to its peak (less room for offline work).
	T  float64 `json:"t"`
	Up bool    `json:"up"`
	// Before is the allocation ratio at the shift, After the level it
	// settled at (the mean of the phase's last fifth).
	Before float64 `json:"before"`
	After  float64 `json:"after"`
	// FollowSeconds is the time from the shift until the allocation
	// ratio stayed within the settle band of After; -1 when it did not
	// within the phase.
	FollowSeconds float64 `json:"follow_seconds"`
	// Complete says the run saw the phase to its end (the next shift):
	// only then is After the phase's final level.
	Complete bool `json:"complete"`
}

// RunFleet starts the cluster and the fleet, places the online work,
// then offers offline work and samples the allocation for Duration; see
// the fleet mode's comment. When it fails after sampling began, it
// returns what it measured with the error.
func RunFleet(ctx context.Context, cfg FleetConfig) (FleetResult, error) {
	if err := cfg.Validate(); err != nil {
		return FleetResult{}, err
	}
	cfg = cfg.withDefaults()
	log := cfg.Logger
	res := FleetResult{Replicas: cfg.Replicas, Nodes: cfg.Nodes, Seed: cfg.Seed, HeartbeatSeconds: cfg.HeartbeatPeriod.Seconds(),
		PeriodSeconds: cfg.Period.Seconds(), PeakSeconds: cfg.PeakLength.Seconds(), Series: []FleetSample{}, Shifts: []FleetShift{}}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	start := time.Now()

	simulated := 0
	if cfg.FleetProcs == 0 {
		simulated = cfg.Nodes
	}
	if err := fleet.EnsureFiles(cfg.Nodes, simulated); err != nil {
		log.Warn("overcommit fleet: nodes may wait for connections", "err", err)
	}
	// Finished offline jobs are kept briefly, so that the run measures
	// the state of the work in flight.
	cl, err := submitbench.StartCluster(ctx, cfg.Replicas, cfg.Dir, dispatcher.Config{JobRetention: 10 * time.Second, JobRetentionMax: -1,
		EstimateDecayEvery: cfg.HeartbeatPeriod})
	if err != nil {
		return res, fmt.Errorf("overcommit fleet benchmark: %w", err)
	}
	defer cl.Close()
	log.Info("overcommit fleet: cluster up", "replicas", cfg.Replicas, "took", time.Since(start).Round(time.Millisecond))
	if cfg.FleetProcs > 0 {
		fctx, stop, _, err := fleet.StartProcs(ctx, fleet.ProcsConfig{Exec: cfg.FleetExec, Procs: cfg.FleetProcs, Nodes: cfg.Nodes,
			Addrs: cl.Addrs(), Pool: FleetPool, MemoryLimit: cfg.FleetMemoryLimit, Owner: "overcommit fleet benchmark",
			Args: []string{"--cpu", strconv.FormatInt(cfg.NodeCPU, 10) + "m", "--memory", strconv.FormatInt(cfg.NodeMemory, 10),
				"--heartbeat", cfg.HeartbeatPeriod.String()}})
		if err != nil {
			return res, err
		}
		defer stop()
		ctx = fctx
	} else {
		f, err := fleet.Start(ctx, fleet.Config{Addrs: cl.Addrs(), Nodes: cfg.Nodes, Pool: FleetPool,
			CPU: cfg.NodeCPU, Memory: cfg.NodeMemory, HeartbeatPeriod: cfg.HeartbeatPeriod})
		if err != nil {
			return res, fmt.Errorf("overcommit fleet benchmark: %w", err)
		}
		defer f.Close()
	}
	client, err := api.NewClient(api.ClientConfig{Addrs: cl.Addrs()})
	if err != nil {
		return res, fmt.Errorf("overcommit fleet benchmark: %w", err)
	}
	defer client.Close()
	if err := waitFleet(ctx, cl.Servers, "every node ready", func(s *server.Server) bool {
		ready := 0
		for _, n := range s.FSM().Nodes() {
			if n.State == api.NodeReady && n.Spec.Pool == FleetPool {
				ready++
			}
		}
		return ready == cfg.Nodes
	}); err != nil {
		return res, err
	}
	log.Info("overcommit fleet: fleet ready", "nodes", cfg.Nodes, "took", time.Since(start).Round(time.Millisecond))

	task := cfg.onlineTask()
	res.OnlineTasks = int64(cfg.Nodes) * int64(cfg.OnlinePerNode)
	if err := submitOnline(ctx, client, cfg, res.OnlineTasks); err != nil {
		return res, err
	}
	if err := waitFleet(ctx, cl.Servers, "the online tasks placed", func(s *server.Server) bool {
		var cpu int64
		for _, n := range s.FSM().Nodes() {
			cpu += n.Used.Online.CPU
		}
		return cpu == res.OnlineTasks*task.CPU
	}); err != nil {
		return res, err
	}
	res.SetupSeconds = time.Since(start).Seconds()
	log.Info("overcommit fleet: online work placed", "tasks", res.OnlineTasks, "setup", time.Since(start).Round(time.Millisecond))

	lead := leaderOf(cl.Servers)
	if lead == nil {
		return res, errors.New("overcommit fleet benchmark: no replica leads")
	}
	sub := &submitter{cfg: cfg, client: client, log: log, placedBase: lead.Dispatcher().Totals().Placed}
	subCtx, stopSub := context.WithCancel(ctx)
	var subWG sync.WaitGroup
	subWG.Go(func() { sub.run(subCtx, cl.Servers) })
	defer func() {
		stopSub()
		subWG.Wait()
	}()
	measured := time.Now()
	err = sample(ctx, cfg, cl.Servers, sub, measured, &res)
	stopSub()
	subWG.Wait()
	res.Seconds = time.Since(measured).Seconds()
	res.OfflineSubmitted, res.OfflinePlaced, res.SubmitErrors = sub.submitted.Load(), sub.placed.Load(), sub.errors.Load()
	res.LoadAverage = loadAverage()
	summarize(cfg, measured, &res)
	if err != nil {
		return res, err
	}
	if ctx.Err() != nil {
		return res, fmt.Errorf("overcommit fleet benchmark: %w", context.Cause(ctx))
	}
	return res, nil
}

// submitOnline submits the online work: n tasks that spread over the
// nodes, in jobs of at most 10,000.
func submitOnline(ctx context.Context, client *api.Client, cfg FleetConfig, n int64) error {
	task := cfg.onlineTask()
	usage := cfg.onlineUsage()
	var jobs []api.JobSpec
	for left, i := n, 0; left > 0; i++ {
		count := min(left, 10_000)
		left -= count
		jobs = append(jobs, api.JobSpec{
			Name: fmt.Sprintf("online-%d", i), Pool: FleetPool, QoS: api.QoSOnline,
			Policy: &api.Policy{Scorers: []api.ScorerRef{{Name: api.ScorerSpread, Weight: 1}}},
			Tasks: []api.TaskGroupSpec{{Name: "serve", Count: count, Pod: api.PodSpec{
				Containers: []api.ContainerSpec{{Name: "serve", Image: api.Image{Rootfs: "/sim"}, Command: []string{"serve"},
					Resources: api.Resources{CPU: task.CPU, Memory: task.Memory}}},
				// Centuries: online work runs until it is stopped.
				Sim: &api.SimSpec{RunTime: api.Duration(100 * 365 * 24 * time.Hour), Usage: usage},
			}}},
		})
	}
	if _, err := client.Submit(ctx, jobs, api.SubmitOptions{}); err != nil {
		return fmt.Errorf("overcommit fleet benchmark: submit the online work: %w", err)
	}
	return nil
}

// submitter keeps about Backlog offline tasks pending: every submitEvery
// it counts the offline tasks the leader placed since placedBase (its
// round totals, less the online work's) and submits jobs for the
// difference.
type submitter struct {
	cfg        FleetConfig
	client     *api.Client
	log        *slog.Logger
	placedBase int64
	// submitted and placed count offline tasks; errors failed submits.
	submitted, placed, errors atomic.Int64
}

func (s *submitter) run(ctx context.Context, servers []*server.Server) {
	t := time.NewTicker(submitEvery)
	defer t.Stop()
	seq := 0
	r := rand.New(rand.NewPCG(s.cfg.Seed, 0x6f6666))
	spec := api.JobSpec{Pool: FleetPool, QoS: api.QoSOffline, Tasks: []api.TaskGroupSpec{{Name: "batch", Count: int64(s.cfg.OfflineArray), Pod: api.PodSpec{
		Containers: []api.ContainerSpec{{Name: "batch", Image: api.Image{Rootfs: "/sim"}, Command: []string{"batch"},
			Resources: api.Resources{CPU: s.cfg.OfflineCPU, Memory: s.cfg.OfflineMemory}}},
		Sim: &api.SimSpec{RunTime: api.Duration(s.cfg.OfflineRunTime), Usage: &api.SimUsage{
			CPU: int64(float64(s.cfg.OfflineCPU) * s.cfg.OfflineUse), Memory: int64(float64(s.cfg.OfflineMemory) * s.cfg.OfflineUse)}},
	}}}}
	for {
		if lead := leaderOf(servers); lead != nil {
			s.placed.Store(lead.Dispatcher().Totals().Placed - s.placedBase)
		}
		pending := s.submitted.Load() - s.placed.Load()
		if short := int64(s.cfg.Backlog) - pending; short > 0 {
			n := min(int((short+int64(s.cfg.OfflineArray)-1)/int64(s.cfg.OfflineArray)), maxJobsPerSubmit)
			jobs := make([]api.JobSpec, n)
			for i := range jobs {
				jobs[i] = spec
				jobs[i].Name = "offline-" + strconv.Itoa(seq)
				seq++
				g := jobs[i].Tasks[0]
				sim := *g.Pod.Sim
				sim.RunTime = api.Duration(float64(s.cfg.OfflineRunTime) * (0.5 + r.Float64()))
				g.Pod.Sim = &sim
				jobs[i].Tasks = []api.TaskGroupSpec{g}
			}
			if _, err := s.client.Submit(ctx, jobs, api.SubmitOptions{}); err != nil {
				if ctx.Err() != nil {
					return
				}
				s.errors.Add(1)
				s.log.Warn("overcommit fleet: submit", "err", err)
			} else {
				s.submitted.Add(int64(n * s.cfg.OfflineArray))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sample reads the leader's state every SampleEvery for Duration into
// res.Series.
func sample(ctx context.Context, cfg FleetConfig, servers []*server.Server, sub *submitter, from time.Time, res *FleetResult) error {
	t := time.NewTicker(cfg.SampleEvery)
	defer t.Stop()
	usage := cfg.onlineUsage()
	task := cfg.onlineTask()
	end := from.Add(cfg.Duration)
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("overcommit fleet benchmark: %w", context.Cause(ctx))
		case now := <-t.C:
			lead := leaderOf(servers)
			if lead == nil {
				continue // an election: no sample
			}
			s := readSample(lead, usage, task, now)
			s.T = now.Sub(from).Seconds()
			s.Pending = sub.submitted.Load() - sub.placed.Load()
			res.CapacityCPU, res.CapacityMemory = s.capCPU, s.capMem
			res.Series = append(res.Series, s.FleetSample)
			if now.Sub(last) >= 30*time.Second {
				last = now
				cfg.Logger.Info("overcommit fleet: sample", "t", math.Round(s.T), "peak", s.Peak, "allocation", round3(s.AllocationRatio),
					"utilization", round3(s.Utilization), "online_configured", round3(s.OnlineConfigured),
					"online_estimated", round3(s.OnlineEstimated), "pending", s.Pending)
			}
			if !now.Before(end) {
				return nil
			}
		}
	}
}

// sampled is a sample and the capacity it is a share of.
type sampled struct {
	FleetSample
	capCPU, capMem int64
}

// readSample reads the leader's FSM and memory at now: task is what an
// online task asks for and usage what it uses.
func readSample(lead *server.Server, usage *api.SimUsage, task api.Usage, now time.Time) sampled {
	var (
		s                               sampled
		onCPU, offCPU, usedMem, usedCPU int64
	)
	d := lead.Dispatcher()
	for _, n := range lead.FSM().Nodes() {
		if n.Spec.Pool != FleetPool {
			continue
		}
		s.capCPU += n.Spec.Capacity.CPU
		s.capMem += n.Spec.Capacity.Memory
		onCPU += n.Used.Online.CPU
		offCPU += n.Used.Offline.CPU
		usedMem += n.Used.Online.Memory + n.Used.Offline.Memory
		if u, _, ok := d.NodeUsage(n.Spec.Name); ok {
			usedCPU += u.Total.CPU
		}
	}
	est, _ := d.EstimateTotals()
	share := func(v int64) float64 {
		if s.capCPU == 0 {
			return 0
		}
		return float64(v) / float64(s.capCPU)
	}
	at := usage.At(now)
	s.Peak = at.CPU == usage.Peak.CPU && usage.Peak.CPU != usage.CPU
	s.AllocationRatio = share(onCPU + offCPU)
	if s.capMem > 0 {
		s.MemoryAllocationRatio = float64(usedMem) / float64(s.capMem)
	}
	s.OnlineAllocated, s.OfflineAllocated = share(onCPU), share(offCPU)
	s.Utilization = share(usedCPU)
	if task.CPU > 0 {
		s.OnlineConfigured = share(onCPU / task.CPU * at.CPU)
	}
	s.OnlineReported, s.OnlineEstimated, s.EstimatedNodes = share(est.OnlineUsage.CPU), share(est.OnlineEstimate.CPU), est.Nodes
	return s
}

// summarize fills res's figures from its series: the means after the
// warm-up, the shifts and their follow times, and the settled levels.
func summarize(cfg FleetConfig, from time.Time, res *FleetResult) {
	var alloc, util float64
	n := 0
	res.MinEstimatedNodes = cfg.Nodes
	for _, s := range res.Series {
		if s.T >= cfg.Warmup.Seconds() {
			alloc += s.AllocationRatio
			util += s.Utilization
			res.MinEstimatedNodes = min(res.MinEstimatedNodes, s.EstimatedNodes)
			n++
		}
	}
	if n > 0 {
		res.AllocationRatio, res.Utilization = alloc/float64(n), util/float64(n)
	}
	if len(res.Series) == 0 {
		return
	}
	end := res.Series[len(res.Series)-1].T
	var (
		levels    [2][]float64 // by Up
		estimates [2][]float64
	)
	for _, at := range shiftTimes(cfg, from, end) {
		next := math.Inf(1)
		for _, b := range shiftTimes(cfg, from, end) {
			if b.t > at.t {
				next = b.t
				break
			}
		}
		sh := followShift(res.Series, at.t, min(next, end), cfg.SettleBand)
		sh.Up, sh.Complete = at.up, !math.IsInf(next, 1)
		res.Shifts = append(res.Shifts, sh)
		if !sh.Complete || at.t < cfg.Warmup.Seconds() {
			continue
		}
		k := 0
		if sh.Up {
			k = 1
		}
		levels[k] = append(levels[k], sh.After)
		if r, ok := estimateRatio(res.Series, at.t, next); ok {
			estimates[k] = append(estimates[k], r)
		}
		follow := &res.FollowDownSeconds
		if sh.Up {
			follow = &res.FollowUpSeconds
		}
		switch {
		case *follow < 0:
		case sh.FollowSeconds < 0:
			*follow = -1
		default:
			*follow = max(*follow, sh.FollowSeconds)
		}
	}
	res.AllocationRatioOffPeak, res.AllocationRatioPeak = mean(levels[0]), mean(levels[1])
	res.EstimateOverConfiguredOffPeak, res.EstimateOverConfiguredPeak = mean(estimates[0]), mean(estimates[1])
}

// shift is a shift of the online usage, in the series' seconds.
type shift struct {
	t  float64
	up bool
}

// shiftTimes lists the shifts of the online usage between the series'
// start (the time from) and end seconds: each multiple of Period from
// the Unix epoch (up) and PeakLength after it (down).
func shiftTimes(cfg FleetConfig, from time.Time, end float64) []shift {
	var out []shift
	p, l := int64(cfg.Period), int64(cfg.PeakLength)
	first := from.UnixNano() / p * p
	for k := first; ; k += p {
		for _, s := range []struct {
			at int64
			up bool
		}{{k, true}, {k + l, false}} {
			t := float64(s.at-from.UnixNano()) / 1e9
			if t > end {
				return out
			}
			if t > 0 {
				out = append(out, shift{t, s.up})
			}
		}
	}
}

// followShift measures the phase of series from the shift at t0 to t1:
// the level at its start, the level of its last fifth, and how long the
// allocation ratio took to stay within band of that level.
func followShift(series []FleetSample, t0, t1, band float64) FleetShift {
	sh := FleetShift{T: t0, FollowSeconds: -1}
	var phase []FleetSample
	for _, s := range series {
		if s.T < t0 {
			sh.Before = s.AllocationRatio
		} else if s.T <= t1 {
			phase = append(phase, s)
		}
	}
	if len(phase) == 0 {
		return sh
	}
	tail := phase[len(phase)-max(len(phase)/5, 1):]
	var sum float64
	for _, s := range tail {
		sum += s.AllocationRatio
	}
	sh.After = sum / float64(len(tail))
	// The first sample from which every later one is within band.
	settled := -1
	for i := len(phase) - 1; i >= 0; i-- {
		if math.Abs(phase[i].AllocationRatio-sh.After) > band {
			break
		}
		settled = i
	}
	if settled >= 0 {
		sh.FollowSeconds = phase[settled].T - t0
	}
	return sh
}

// estimateRatio is the dispatcher's online estimate over the configured
// online usage, over the last fifth of the phase from t0 to t1.
func estimateRatio(series []FleetSample, t0, t1 float64) (float64, bool) {
	var phase []FleetSample
	for _, s := range series {
		if s.T >= t0 && s.T <= t1 {
			phase = append(phase, s)
		}
	}
	if len(phase) == 0 {
		return 0, false
	}
	var est, conf float64
	for _, s := range phase[len(phase)-max(len(phase)/5, 1):] {
		est += s.OnlineEstimated
		conf += s.OnlineConfigured
	}
	if conf == 0 {
		return 0, false
	}
	return est / conf, true
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

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// leaderOf returns the replica that leads, or nil.
func leaderOf(servers []*server.Server) *server.Server {
	for _, s := range servers {
		if _, ok := s.Dispatcher().Leading(); ok {
			return s
		}
	}
	return nil
}

// waitFleet polls the leader until cond holds, or ctx ends.
func waitFleet(ctx context.Context, servers []*server.Server, what string, cond func(*server.Server) bool) error {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		if s := leaderOf(servers); s != nil && cond(s) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("overcommit fleet benchmark: waiting for %s: %w", what, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// loadAverage is the host's one-minute load average, 0 where unknown.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _, _ := strings.Cut(string(b), " ")
	v, _ := strconv.ParseFloat(f, 64)
	return v
}
