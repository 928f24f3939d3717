package chaosbench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher"
)

// Replicas is the size of the cluster the bench runs.
const Replicas = 3

// Pool is the pool of the simulated nodes and of the jobs.
const Pool = "chaos"

// returnSlack is how long a node back from a cut-off may take to stop
// its stale pods: part of the double-run bound.
const returnSlack = 3 * time.Second

// finalReads is the most keys read after the load (see workload.finish).
const finalReads = 500

// probeInterval is how often a probe job is submitted: the resolution of
// the unavailability measured.
const probeInterval = 50 * time.Millisecond

// Defaults of Config.
const (
	DefaultHost         = "127.0.0.1"
	DefaultSeed         = 1
	DefaultRounds       = 1
	DefaultGap          = 2 * time.Second
	DefaultHold         = 2 * time.Second
	DefaultDelay        = 200 * time.Millisecond
	DefaultSyncDelay    = 100 * time.Millisecond
	DefaultFleetProcs   = 2
	DefaultNodes        = 20
	DefaultRate         = 40
	DefaultClients      = 4
	DefaultMaxTasks     = 3
	DefaultRunTime      = 500 * time.Millisecond
	DefaultDrain        = time.Minute
	DefaultReadyTimeout = time.Minute
	DefaultTmpfsSize    = 256 << 20
	DefaultCheckTimeout = time.Minute
	DefaultAckTry       = 30 * time.Second
)

// ErrConfig is wrapped by Validate's error.
var ErrConfig = errors.New("chaosbench: invalid config")

// Config is a chaos run.
type Config struct {
	// Exe is the sluice binary every child process runs. Required.
	Exe string
	// Env is the children's environment, as given. Default this
	// process's less its SLUICE_* settings (the command lines give the
	// children every setting).
	Env []string
	// Dir holds the data directories and logs. Default a new temporary
	// directory, removed after the run unless KeepDir.
	Dir     string
	KeepDir bool
	// Host is the loopback address the replicas and the proxies listen
	// on. Default 127.0.0.1.
	Host string
	// Seed draws the schedule and the workload. Default 1.
	Seed uint64
	// Kinds are the fault kinds each round has once. Default all.
	Kinds []Kind
	// Rounds of the schedule. Default 1.
	Rounds int
	// Gap is the least calm before a fault (up to twice it), Hold the
	// least time a fault lasts (up to twice it). Defaults 2s and 2s.
	Gap, Hold time.Duration
	// Delay is the latency DelayFollower adds. Default 200ms.
	Delay time.Duration
	// SyncDelay is the wait SlowDisk adds to each sync. Default 100ms.
	SyncDelay time.Duration
	// FleetProcs processes run Nodes simulated nodes between them.
	// Defaults 2 and 20.
	FleetProcs, Nodes int
	// Rate is operations per second of the workload, over Clients
	// clients. Defaults 40 and 4.
	Rate    float64
	Clients int
	// MaxTasks is the most tasks of a short job (at least 1); RunTime
	// the mean simulated run time of their tasks. Defaults 3 and 500ms.
	MaxTasks int64
	RunTime  time.Duration
	// AckTry is how long a submit is resent before its outcome counts as
	// unknown. Default 30s.
	AckTry time.Duration
	// Drain bounds each of the two phases after the load: cancelling the
	// long jobs and the final reads, then every job reaching a final
	// state. Default 1m.
	Drain time.Duration
	// ReadyTimeout is how long the cluster may take to agree on a leader
	// after a fault is healed. Default 1m.
	ReadyTimeout time.Duration
	// TmpfsSize is the size of each replica's tmpfs for DiskFull.
	// Default 256 MiB.
	TmpfsSize int64
	// CheckTimeout bounds the linearizability check. Default 1m.
	CheckTimeout time.Duration
	// Shim is the sluice-shim binary the real nodelets create containers
	// through; the run copies it and ends every process of its copy when
	// it is done. Default: sluice-shim beside Exe, else one built from
	// this module's source (the working directory must lie inside it).
	Shim string
	// Log receives the schedule and the progress. Default none.
	Log io.Writer
}

// Validate reports every problem of c.
func (c *Config) Validate() error {
	var bad []string
	add := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	if c.Exe == "" {
		add("Exe is required")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Gap", c.Gap}, {"Hold", c.Hold}, {"Delay", c.Delay}, {"SyncDelay", c.SyncDelay}, {"RunTime", c.RunTime}, {"AckTry", c.AckTry},
		{"Drain", c.Drain}, {"ReadyTimeout", c.ReadyTimeout}, {"CheckTimeout", c.CheckTimeout}} {
		if d.v < 0 {
			add("%s %v: want 0 (the default) or more", d.name, d.v)
		}
	}
	for _, n := range []struct {
		name string
		v    int64
	}{{"Rounds", int64(c.Rounds)}, {"FleetProcs", int64(c.FleetProcs)}, {"Nodes", int64(c.Nodes)},
		{"Clients", int64(c.Clients)}, {"MaxTasks", c.MaxTasks}, {"TmpfsSize", c.TmpfsSize}} {
		if n.v < 0 {
			add("%s %d: want 0 (the default) or more", n.name, n.v)
		}
	}
	if ip := net.ParseIP(c.Host); c.Host != "" && (ip == nil || !ip.IsLoopback()) {
		add("Host %q: want a loopback IP address", c.Host)
	}
	if c.Rate < 0 {
		add("Rate %g: want 0 (the default) or more", c.Rate)
	}
	if c.Nodes > 0 && c.FleetProcs > c.Nodes {
		add("FleetProcs %d above Nodes %d: each process needs a node", c.FleetProcs, c.Nodes)
	}
	for _, k := range c.Kinds {
		if !slices.Contains(Kinds, k) {
			add("Kinds: unknown %q", k)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrConfig, strings.Join(bad, "; "))
	}
	return nil
}

func (c Config) withDefaults() Config {
	setD := func(p *time.Duration, d time.Duration) {
		if *p == 0 {
			*p = d
		}
	}
	setI := func(p *int, d int) {
		if *p == 0 {
			*p = d
		}
	}
	if c.Env == nil {
		c.Env = childEnv(os.Environ())
	}
	if c.Host == "" {
		c.Host = DefaultHost
	}
	if c.Seed == 0 {
		c.Seed = DefaultSeed
	}
	if len(c.Kinds) == 0 {
		c.Kinds = slices.Clone(Kinds)
	}
	setI(&c.Rounds, DefaultRounds)
	setD(&c.Gap, DefaultGap)
	setD(&c.Hold, DefaultHold)
	setD(&c.Delay, DefaultDelay)
	setD(&c.SyncDelay, DefaultSyncDelay)
	setI(&c.FleetProcs, DefaultFleetProcs)
	setI(&c.Nodes, DefaultNodes)
	if c.Rate == 0 {
		c.Rate = DefaultRate
	}
	setI(&c.Clients, DefaultClients)
	if c.MaxTasks == 0 {
		c.MaxTasks = DefaultMaxTasks
	}
	setD(&c.RunTime, DefaultRunTime)
	setD(&c.AckTry, DefaultAckTry)
	setD(&c.Drain, DefaultDrain)
	setD(&c.ReadyTimeout, DefaultReadyTimeout)
	if c.TmpfsSize == 0 {
		c.TmpfsSize = DefaultTmpfsSize
	}
	setD(&c.CheckTimeout, DefaultCheckTimeout)
	if c.Log == nil {
		c.Log = io.Discard
	}
	return c
}

// FaultResult is one fault as injected.
type FaultResult struct {
	Fault
	// Victim names what it hit ("replica 2 (leader)", "fleet 1"); empty
	// when skipped.
	Victim string `json:"victim,omitempty"`
	// AtMs is when it was injected, from the start of the load.
	AtMs int64 `json:"at_ms"`
	// UnavailableMs is the time from the injection to the first
	// placement of a probe job submitted after it; -1 when none was
	// placed before the end of the load.
	UnavailableMs int64 `json:"unavailable_ms"`
	// WorstWaitMs is the longest submit→placed of a probe submitted
	// between the injection and the cluster's recovery after the heal:
	// what the fault cost a request sent while it lasted, also when it
	// took effect after its injection (a disk filling up).
	WorstWaitMs int64 `json:"worst_wait_ms"`
	// HeldMs is how long the fault was held: Hold, plus the node TTL for
	// FreezeFleet and CutNodelet.
	HeldMs int64 `json:"held_ms"`
	// RecoverMs is the time from the heal to a leader agreed by all.
	RecoverMs int64 `json:"recover_ms"`
	// Skipped says why the fault was not injected.
	Skipped string `json:"skipped,omitempty"`
	// Note is anything seen that the checks do not cover (a replica that
	// did not exit on a full disk).
	Note string `json:"note,omitempty"`

	at, recovered time.Time
	node          string // the real nodelet hit, by name
}

// Result is a run's outcome. Acked, Lost, Duplicates, Linearizable,
// MaxUnavailableMs and Faults are the headline.
type Result struct {
	Seed   uint64        `json:"seed"`
	RunID  string        `json:"run_id"`
	Faults int           `json:"faults"` // injected
	Sched  []FaultResult `json:"schedule"`
	Tally
	Linearizable     Linearizable `json:"linearizable"`
	Ops              int          `json:"ops"`
	FailedRequests   int          `json:"failed_requests"` // answered errors, each attempt; the client retried them
	MaxUnavailableMs int64        `json:"max_unavailable_ms"`
	// MaxWaitMs is the largest WorstWaitMs of the faults.
	MaxWaitMs int64 `json:"max_wait_ms"`
	// DoubleRun is how long tasks ran on two nodes (or as two attempts)
	// at once, from the fleets' pod logs.
	DoubleRun DoubleRun `json:"double_run"`
	// DoubleRunBoundMs is the bound DoubleRun.MaxMs (and the real
	// nodelets' Nodelets.DoubleRun.MaxMs) is held to: the longest time a
	// fleet or a real nodelet was cut off beyond the node TTL, plus 3 s for
	// the node, back, to stop its stale pods. A node does not stop its
	// pods when it loses contact: while it is cut off past the TTL, its
	// tasks run twice.
	DoubleRunBoundMs int64 `json:"double_run_bound_ms"`
	// StalePods lists pods still running after the drain whose jobs
	// ended: stale pods a node never stopped.
	StalePods []string `json:"stale_pods,omitempty"`
	// Nodelets is what the real nodelets' pods showed; nil when the run
	// had none.
	Nodelets  *NodeletResult `json:"nodelets,omitempty"`
	DurationS float64        `json:"duration_s"`
	// Skipped lists fault kinds left out of the schedule and why.
	Skipped []string `json:"skipped,omitempty"`
}

// OK reports whether the run kept every promise checked.
func (r Result) OK() bool {
	ok := r.Lost == 0 && r.Duplicates == 0 && r.NotFinal == 0 && r.Linearizable == LinOK && len(r.StalePods) == 0 &&
		r.DoubleRun.MaxMs <= r.DoubleRunBoundMs
	if n := r.Nodelets; n != nil {
		ok = ok && len(n.StartedTwice) == 0 && len(n.StalePods) == 0 && n.DoubleRun.MaxMs <= r.DoubleRunBoundMs &&
			(n.Cuts == 0 || n.Moved > 0)
	}
	return ok
}

// cluster is what Run owns: the replicas, their proxies and the fleets.
type cluster struct {
	cfg     Config
	dir     string
	reps    []*replica
	proxies map[[2]int]*Proxy // [from, to] replica indexes
	fleets  []*fleetProc
	real    *realNodes // nil without real nodelets
	env     []string
}

// Run runs cfg's schedule against a new cluster and checks the outcome.
// It returns an error when the bench itself could not run (a process that
// would not start, a cluster that never recovered); a broken promise is
// in the Result (see Result.OK).
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	cfg = cfg.withDefaults()
	res := Result{Seed: cfg.Seed}
	started := time.Now()
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "sluice-chaos-")
		if err != nil {
			return res, fmt.Errorf("chaosbench: work directory: %w", err)
		}
		dir = d
		if !cfg.KeepDir {
			defer os.RemoveAll(d)
		}
	}
	runID := make([]byte, 4)
	_, _ = rand.Read(runID)
	res.RunID = "chaos-" + hex.EncodeToString(runID)

	kinds := cfg.Kinds
	if slices.Contains(kinds, DiskFull) && os.Geteuid() != 0 {
		res.Skipped = append(res.Skipped, fmt.Sprintf("%s: mounting a tmpfs for each replica needs root", DiskFull))
		kinds = slices.DeleteFunc(slices.Clone(kinds), func(k Kind) bool { return k == DiskFull })
	}
	cl := &cluster{cfg: cfg, dir: dir, proxies: map[[2]int]*Proxy{}, env: cfg.Env}
	defer cl.close()
	if err := cl.startReplicas(slices.Contains(kinds, DiskFull)); err != nil {
		var te tmpfsError
		if !errors.As(err, &te) {
			return res, err
		}
		res.Skipped = append(res.Skipped, fmt.Sprintf("%s: %v", DiskFull, err))
		kinds = slices.DeleteFunc(slices.Clone(kinds), func(k Kind) bool { return k == DiskFull })
		cl.close()
		cl = &cluster{cfg: cfg, dir: dir, proxies: map[[2]int]*Proxy{}, env: cl.env}
		defer cl.close()
		if err := cl.startReplicas(false); err != nil {
			return res, err
		}
	}
	rctx, cancel := context.WithTimeout(ctx, cfg.ReadyTimeout)
	err := waitReady(rctx, cl.reps)
	if err == nil {
		_, err = findLeader(rctx, cl.reps)
	}
	cancel()
	if err != nil {
		return res, fmt.Errorf("chaosbench: the cluster did not start: %w", err)
	}
	bases := make([]string, len(cl.reps))
	for i, r := range cl.reps {
		bases[i] = r.base
	}
	client, err := api.NewClient(api.ClientConfig{Addrs: bases, Timeout: 5 * time.Second})
	if err != nil {
		return res, fmt.Errorf("chaosbench: client: %w", err)
	}
	defer client.Close()
	if err := cl.startFleets(ctx); err != nil {
		return res, err
	}
	if slices.Contains(kinds, KillNodelet) || slices.Contains(kinds, CutNodelet) {
		err := cl.startNodelets(ctx, res.RunID, client)
		switch {
		case errors.Is(err, errNoRealNodes):
			if cl.real != nil {
				cl.real.close()
				cl.real = nil
			}
			for _, k := range []Kind{KillNodelet, CutNodelet} {
				if slices.Contains(kinds, k) {
					res.Skipped = append(res.Skipped, fmt.Sprintf("%s: %v", k, err))
				}
			}
			kinds = slices.DeleteFunc(slices.Clone(kinds), func(k Kind) bool { return k == KillNodelet || k == CutNodelet })
		case err != nil:
			return res, err
		default:
			fmt.Fprintf(cfg.Log, "%d real nodelets run the %d pods of job %s\n", Nodelets, realTasks, cl.real.jobID)
		}
	}
	fmt.Fprintf(cfg.Log, "cluster of %d replicas and %d nodes in %d processes up after %.1fs (logs in %s)\n",
		Replicas, cfg.Nodes, cfg.FleetProcs, time.Since(started).Seconds(), dir)
	for _, s := range res.Skipped {
		fmt.Fprintf(cfg.Log, "skipped %s\n", s)
	}
	sched := Schedule(cfg.Seed, kinds, cfg.Rounds, cfg.Gap, cfg.Hold)
	fmt.Fprintf(cfg.Log, "schedule of seed %d (replay with the same seed and sizes):\n", cfg.Seed)
	for i, f := range sched {
		fmt.Fprintf(cfg.Log, "  %2d  %s\n", i+1, f)
	}

	// The load runs from here until the schedule is done.
	w := newWorkload(client, res.RunID, Pool, cfg.AckTry)
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var wg sync.WaitGroup
	interval := time.Duration(float64(cfg.Clients) / cfg.Rate * float64(time.Second))
	for i := range cfg.Clients {
		wg.Go(func() { w.run(loadCtx, i, cfg.Seed, interval, cfg.MaxTasks, cfg.RunTime) })
	}
	pr := &prober{w: w, client: cfg.Clients, interval: probeInterval, follow: cfg.AckTry + cfg.ReadyTimeout, runTime: cfg.RunTime}
	wg.Go(func() { pr.run(loadCtx) })
	var runErr error
	for i, f := range sched {
		if sleepCtx(ctx, f.Gap); ctx.Err() != nil {
			runErr = ctx.Err()
			break
		}
		fr, err := cl.inject(ctx, w, f)
		res.Sched = append(res.Sched, fr)
		fmt.Fprintf(cfg.Log, "%3d  %-18s %-22s at %6.1fs  recovered %5d ms after the heal %s%s\n",
			i+1, f.Kind, fr.Victim, float64(fr.AtMs)/1000, fr.RecoverMs, fr.Skipped, fr.Note)
		if err != nil {
			runErr = err
			break
		}
	}
	sleepCtx(ctx, cfg.Gap)
	stopLoad()
	wg.Wait()
	loadEnd := time.Now()
	if runErr != nil {
		return res, runErr
	}
	fmt.Fprintf(cfg.Log, "load stopped; cancelling the long jobs and reading up to %d keys\n", finalReads)
	finCtx, cancelFin := context.WithTimeout(ctx, cfg.Drain)
	w.finish(finCtx, cfg.Clients+1, finalReads)
	cancelFin()
	fctx, cancel := context.WithTimeout(ctx, cfg.Drain)
	defer cancel()

	// Every job must reach a final state within the drain.
	var jobs []api.JobStatus
	var listErr error
	for {
		js, err := listRun(fctx, client, res.RunID)
		if err == nil {
			jobs = js
			if !slices.ContainsFunc(jobs, func(j api.JobStatus) bool { return !terminal(j.State) }) {
				break
			}
			w.cancelUnacked(fctx, cfg.Clients+1, jobs)
		}
		listErr = err
		if fctx.Err() != nil {
			break
		}
		sleepCtx(fctx, 500*time.Millisecond)
	}
	if jobs == nil {
		return res, listErr
	}
	ops, keys, fails := w.history()
	res.Tally = tally(keys, jobs)
	if res.DoubleRun, res.StalePods, err = cl.doubleRuns(jobs, time.Now()); err != nil {
		return res, err
	}
	cutOff := time.Duration(0)
	var cuts [][2]time.Time
	var cutNodes []string
	for _, fr := range res.Sched {
		if fr.Kind == FreezeFleet || fr.Kind == CutNodelet {
			cutOff = max(cutOff, time.Duration(fr.HeldMs)*time.Millisecond-cl.nodeTTL())
		}
		if fr.Kind == CutNodelet && fr.Skipped == "" {
			cuts = append(cuts, [2]time.Time{fr.at, fr.at.Add(time.Duration(fr.HeldMs) * time.Millisecond)})
			cutNodes = append(cutNodes, fr.node)
		}
	}
	res.DoubleRunBoundMs = (cutOff + returnSlack).Milliseconds()
	if cl.real != nil {
		fmt.Fprintf(cfg.Log, "cancelling the real job %s and reading its pods' evidence\n", cl.real.jobID)
		rctx, cancel := context.WithTimeout(ctx, cfg.Drain)
		nr, err := cl.finishReal(rctx, client, cuts, cutNodes)
		cancel()
		if err != nil {
			return res, err
		}
		res.Nodelets = &nr
	}
	res.Ops, res.FailedRequests = len(ops), fails
	fmt.Fprintf(cfg.Log, "checking %d operations for linearizability\n", len(ops))
	res.Linearizable = checkLinearizable(ops, cfg.CheckTimeout)
	for i := range res.Sched {
		fr := &res.Sched[i]
		if fr.Skipped != "" {
			continue
		}
		res.Faults++
		next, ok := pr.firstPlacedAfter(fr.at)
		switch {
		case ok && next.Before(loadEnd):
			fr.UnavailableMs = next.Sub(fr.at).Milliseconds()
		default:
			fr.UnavailableMs = -1
			fr.Note += "no probe submitted after the fault was placed before the end of the load; "
		}
		if wait, ok := pr.longestWait(fr.at, fr.recovered, loadEnd); ok {
			fr.WorstWaitMs = wait.Milliseconds()
			res.MaxWaitMs = max(res.MaxWaitMs, fr.WorstWaitMs)
		}
		if u := fr.UnavailableMs; u < 0 {
			res.MaxUnavailableMs = max(res.MaxUnavailableMs, loadEnd.Sub(fr.at).Milliseconds())
		} else {
			res.MaxUnavailableMs = max(res.MaxUnavailableMs, u)
		}
	}
	res.DurationS = time.Since(started).Seconds()
	return res, nil
}

// tmpfsError is a failure to mount the tmpfs DiskFull needs.
type tmpfsError struct{ error }

func (e tmpfsError) Unwrap() error { return e.error }

// startReplicas makes the proxies and starts the replicas, each on a tmpfs
// of its own when tmpfs is set.
func (cl *cluster) startReplicas(tmpfs bool) error {
	ports, err := freePorts(cl.cfg.Host, 2*Replicas)
	if err != nil {
		return err
	}
	for i := range Replicas {
		r := &replica{id: i + 1, raftAddr: net.JoinHostPort(cl.cfg.Host, itoa(ports[i])), httpAddr: net.JoinHostPort(cl.cfg.Host, itoa(ports[Replicas+i]))}
		r.base = "http://" + r.httpAddr
		r.dir = filepath.Join(cl.dir, fmt.Sprintf("replica-%d", r.id))
		r.syncFile = filepath.Join(cl.dir, fmt.Sprintf("replica-%d.sync-delay", r.id))
		if err := os.MkdirAll(r.dir, 0o755); err != nil {
			return fmt.Errorf("chaosbench: %w", err)
		}
		if tmpfs {
			if err := mountTmpfs(r.dir, cl.cfg.TmpfsSize); err != nil {
				return tmpfsError{err}
			}
			r.tmpfs = true
		}
		cl.reps = append(cl.reps, r)
	}
	for i := range cl.reps {
		for j, to := range cl.reps {
			if i == j {
				continue
			}
			p, err := NewProxy(to.raftAddr)
			if err != nil {
				return err
			}
			cl.proxies[[2]int{i, j}] = p
		}
	}
	var peerHTTP []string
	for _, r := range cl.reps {
		peerHTTP = append(peerHTTP, fmt.Sprintf("%d=%s", r.id, r.base))
	}
	for i, r := range cl.reps {
		var peers []string
		for j, o := range cl.reps {
			addr := o.raftAddr
			if i != j {
				addr = cl.proxies[[2]int{i, j}].Addr()
			}
			peers = append(peers, fmt.Sprintf("%d=%s", o.id, addr))
		}
		r.args = []string{"dispatcher", "--id", itoa(r.id), "--peers", strings.Join(peers, ","),
			"--peer-http", strings.Join(peerHTTP, ","), "--data", r.dir, "--http-addr", r.httpAddr, "--log-level", "warn",
			"--fault-sync-delay-file", r.syncFile,
			// Finished jobs are kept: a job missing at the end is lost,
			// not forgotten.
			"--job-retention", "0", "--job-retention-max", "0"}
		if err := cl.startReplica(r); err != nil {
			return err
		}
	}
	return nil
}

func (cl *cluster) startReplica(r *replica) error {
	p, err := startProc(cl.cfg.Exe, r.args, cl.env, filepath.Join(cl.dir, fmt.Sprintf("replica-%d.log", r.id)), nil)
	if err != nil {
		return err
	}
	r.p = p
	return nil
}

// startFleets starts the fleet processes and waits until each registered
// its nodes.
func (cl *cluster) startFleets(ctx context.Context) error {
	var addrs []string
	for _, r := range cl.reps {
		addrs = append(addrs, r.base)
	}
	for i := range cl.cfg.FleetProcs {
		n := cl.cfg.Nodes / cl.cfg.FleetProcs
		if i < cl.cfg.Nodes%cl.cfg.FleetProcs {
			n++
		}
		podLog := filepath.Join(cl.dir, fmt.Sprintf("fleet-%d-pods.log", i+1))
		f := &fleetProc{idx: i + 1, podLog: podLog, args: []string{"loadgen", "fleet", "--nodes", itoa(n),
			"--addr", strings.Join(addrs, ","), "--pool", Pool, "--name-prefix", "chaos-",
			"--name-suffix", fmt.Sprintf("-f%d", i+1), "--every", "1h", "--pod-log", podLog,
			// Small nodes, so that the pods spread over both fleets.
			"--cpu", "2", "--memory", "16Gi"}}
		cl.fleets = append(cl.fleets, f)
		if err := cl.startFleet(ctx, f); err != nil {
			return err
		}
	}
	return nil
}

func (cl *cluster) startFleet(ctx context.Context, f *fleetProc) error {
	registered := make(chan struct{})
	p, err := startProc(cl.cfg.Exe, f.args, cl.env, filepath.Join(cl.dir, fmt.Sprintf("fleet-%d.log", f.idx)),
		func(r io.Reader) { readRegistered(r, registered) })
	if err != nil {
		return err
	}
	f.p = p
	t := time.NewTimer(cl.cfg.ReadyTimeout)
	defer t.Stop()
	select {
	case <-registered:
		return nil
	case <-p.done:
		return fmt.Errorf("chaosbench: fleet %d exited before its nodes registered: %v", f.idx, p.err)
	case <-t.C:
		return fmt.Errorf("chaosbench: fleet %d: nodes not registered after %v", f.idx, cl.cfg.ReadyTimeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// nodeTTL is how long the dispatcher lets a node go without contact
// before it marks it down, with every node of the run registered.
func (cl *cluster) nodeTTL() time.Duration {
	nodes := cl.cfg.Nodes
	if cl.real != nil {
		nodes += Nodelets
	}
	return dispatcher.DefaultNodeTTL + time.Duration(nodes)*dispatcher.DefaultNodeTTLPerNode
}

// doubleRuns reads every fleet's pod log: how long tasks ran twice at
// once, and the pods still running at now of jobs already ended (stale
// pods that were never stopped).
func (cl *cluster) doubleRuns(jobs []api.JobStatus, now time.Time) (DoubleRun, []string, error) {
	var runs []podRun
	for _, f := range cl.fleets {
		rs, err := readPodLog(f.podLog, now)
		if err != nil {
			return DoubleRun{}, nil, err
		}
		runs = append(runs, rs...)
	}
	ended := map[string]bool{}
	for _, j := range jobs {
		ended[j.ID] = terminal(j.State)
	}
	var stale []string
	for _, r := range runs {
		job, _, _ := strings.Cut(r.pod, ".")
		if r.end == now.UnixNano() && ended[job] {
			stale = append(stale, r.node+" "+r.pod)
		}
	}
	return doubleRuns(runs), stale, nil
}

// busiestFleet returns the fleet process running the most pods now, as
// their pod logs say; among equals, the one at pick modulo their number.
func (cl *cluster) busiestFleet(pick int) (*fleetProc, error) {
	now := time.Now()
	var best []*fleetProc
	most := -1
	for _, f := range cl.fleets {
		runs, err := readPodLog(f.podLog, now)
		if err != nil {
			return nil, err
		}
		n := 0
		for _, r := range runs {
			if r.end == now.UnixNano() {
				n++
			}
		}
		switch {
		case n > most:
			best, most = []*fleetProc{f}, n
		case n == most:
			best = append(best, f)
		}
	}
	return best[pick%len(best)], nil
}

// pickFollower returns the follower at pick modulo their number, in ID
// order.
func (cl *cluster) pickFollower(leader *replica, pick int) *replica {
	var fs []*replica
	for _, r := range cl.reps {
		if r != leader {
			fs = append(fs, r)
		}
	}
	return fs[pick%len(fs)]
}

// partition sets the proxies of every direction between r and the others.
func (cl *cluster) partition(r *replica, mode ProxyMode) {
	i := r.id - 1
	for j := range cl.reps {
		if j != i {
			cl.proxies[[2]int{i, j}].Set(mode, cl.cfg.Delay)
			cl.proxies[[2]int{j, i}].Set(mode, cl.cfg.Delay)
		}
	}
}

// inject injects f, holds it, heals it and waits until every replica is
// up and agrees on a leader.
func (cl *cluster) inject(ctx context.Context, w *workload, f Fault) (FaultResult, error) {
	fr := FaultResult{Fault: f}
	lctx, cancel := context.WithTimeout(ctx, cl.cfg.ReadyTimeout)
	leader, err := findLeader(lctx, cl.reps)
	cancel()
	if err != nil {
		return fr, fmt.Errorf("chaosbench: before %s: %w", f.Kind, err)
	}
	mark := func() {
		fr.at = time.Now()
		fr.AtMs = fr.at.Sub(w.start).Milliseconds()
	}
	var heal func() error
	hold := f.Hold
	switch f.Kind {
	case KillLeader, KillFollower:
		v := leader
		fr.Victim = fmt.Sprintf("replica %d (leader)", v.id)
		if f.Kind == KillFollower {
			v = cl.pickFollower(leader, f.Pick)
			fr.Victim = fmt.Sprintf("replica %d (follower)", v.id)
		}
		mark()
		v.p.kill()
		heal = func() error { return cl.startReplica(v) }
	case KillAll:
		fr.Victim = "replicas 1-3"
		mark()
		for _, r := range cl.reps {
			_ = r.p.cmd.Process.Signal(syscall.SIGKILL)
		}
		for _, r := range cl.reps {
			<-r.p.done
		}
		heal = func() error {
			for _, r := range cl.reps {
				if err := cl.startReplica(r); err != nil {
					return err
				}
			}
			return nil
		}
	case DiskFull:
		v := leader
		fr.Victim = fmt.Sprintf("replica %d (leader)", v.id)
		mark()
		if err := fill(v.dir); err != nil {
			return fr, err
		}
		heal = func() error {
			if err := unfill(v.dir); err != nil {
				return err
			}
			if !v.p.exited() {
				fr.Note += "the replica had not exited on its full disk; "
				v.p.kill()
			}
			return cl.startReplica(v)
		}
	case SlowDisk:
		v := leader
		fr.Victim = fmt.Sprintf("replica %d (leader)", v.id)
		mark()
		if err := os.WriteFile(v.syncFile, []byte(cl.cfg.SyncDelay.String()), 0o644); err != nil {
			return fr, fmt.Errorf("chaosbench: slow disk: %w", err)
		}
		heal = func() error {
			if err := os.Remove(v.syncFile); err != nil {
				return fmt.Errorf("chaosbench: slow disk: %w", err)
			}
			return nil
		}
	case PartitionFollower, PartitionLeader, DelayFollower:
		v, role := leader, "leader"
		if f.Kind != PartitionLeader {
			v, role = cl.pickFollower(leader, f.Pick), "follower"
		}
		mode := Drop
		if f.Kind == DelayFollower {
			mode = Delay
		}
		fr.Victim = fmt.Sprintf("replica %d (%s)", v.id, role)
		mark()
		cl.partition(v, mode)
		heal = func() error { cl.partition(v, Pass); return nil }
	case KillFleet:
		fl, err := cl.busiestFleet(f.Pick)
		if err != nil {
			return fr, err
		}
		fr.Victim = fmt.Sprintf("fleet %d", fl.idx)
		mark()
		fl.p.kill()
		if err := markKilled(fl.podLog, time.Now()); err != nil {
			return fr, err
		}
		heal = func() error { return cl.startFleet(ctx, fl) }
	case FreezeFleet:
		fl, err := cl.busiestFleet(f.Pick)
		if err != nil {
			return fr, err
		}
		fr.Victim = fmt.Sprintf("fleet %d", fl.idx)
		hold = cl.nodeTTL() + f.Hold
		mark()
		if err := fl.p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			return fr, fmt.Errorf("chaosbench: freeze fleet %d: %w", fl.idx, err)
		}
		heal = func() error {
			if err := fl.p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				return fmt.Errorf("chaosbench: thaw fleet %d: %w", fl.idx, err)
			}
			return nil
		}
	case KillNodelet, CutNodelet:
		if cl.real == nil {
			return fr, fmt.Errorf("chaosbench: %s without real nodelets", f.Kind)
		}
		n, err := cl.real.busiestNodelet(f.Pick)
		if err != nil {
			return fr, err
		}
		fr.Victim, fr.node = "nodelet "+itoa(n.idx), n.name
		if f.Kind == KillNodelet {
			mark()
			n.p.kill()
			heal = func() error { return cl.startNodelet(n) }
			break
		}
		// Past the node's last contact (its open long-poll counts until
		// its wait ends), the TTL and a sweep of the dispatcher's
		// liveness check (every quarter TTL), so that the node is marked
		// down and its tasks run elsewhere before the heal.
		hold = nodeletPollWait + cl.nodeTTL()*5/4 + f.Hold
		mark()
		n.setCut(true)
		heal = func() error { n.setCut(false); return nil }
	default:
		return fr, fmt.Errorf("chaosbench: unknown fault %q", f.Kind)
	}
	sleepCtx(ctx, hold)
	fr.HeldMs = hold.Milliseconds()
	if err := heal(); err != nil {
		return fr, fmt.Errorf("chaosbench: heal %s: %w", f.Kind, err)
	}
	healed := time.Now()
	rctx, cancel := context.WithTimeout(ctx, cl.cfg.ReadyTimeout)
	defer cancel()
	if err := waitReady(rctx, cl.reps); err != nil {
		return fr, fmt.Errorf("chaosbench: after %s: %w", f.Kind, err)
	}
	if _, err := findLeader(rctx, cl.reps); err != nil {
		return fr, fmt.Errorf("chaosbench: after %s: %w", f.Kind, err)
	}
	fr.RecoverMs = time.Since(healed).Milliseconds()
	fr.recovered = time.Now()
	return fr, nil
}

// close stops the fleets, the replicas and the proxies, and unmounts the
// tmpfs mounts.
func (cl *cluster) close() {
	if cl.real != nil {
		cl.real.close()
		cl.real = nil
	}
	for _, f := range cl.fleets {
		if f.p != nil && !f.p.exited() {
			_ = f.p.cmd.Process.Signal(syscall.SIGCONT) // a frozen one hears no SIGINT
		}
	}
	for _, f := range cl.fleets {
		if f.p != nil && !f.p.exited() {
			f.p.stop(10 * time.Second)
		}
	}
	for _, r := range cl.reps {
		if r.p != nil && !r.p.exited() {
			r.p.kill()
		}
	}
	for _, p := range cl.proxies {
		_ = p.Close()
	}
	for _, r := range cl.reps {
		if r.tmpfs {
			_ = syscall.Unmount(r.dir, syscall.MNT_DETACH)
			r.tmpfs = false
		}
	}
	cl.fleets, cl.reps, cl.proxies = nil, nil, map[[2]int]*Proxy{}
}
