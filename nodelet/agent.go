package nodelet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/nodelet/cgroup"
	"github.com/sluicehq/sluice/nodelet/overcommit"
	"github.com/sluicehq/sluice/nodelet/runtime"
)

// Errors callers act on.
var (
	// ErrNotRunning: the Agent's Run has not started or has returned.
	ErrNotRunning = errors.New("nodelet: agent is not running")
	// ErrAlreadyRun: Run was called twice.
	ErrAlreadyRun = errors.New("nodelet: Run called more than once")
	// ErrNetworkDenied: a pod asks for a network mode the node does not
	// allow (host, without Config.AllowHostNetwork). Its task fails with
	// api.ReasonNetworkDenied.
	ErrNetworkDenied = errors.New("nodelet: network mode denied")
)

// Agent converges its host to the dispatcher's target. Create it with New
// and run it with Run; see the package comment.
type Agent struct {
	cfg  Config
	loop *overcommit.Loop // nil without Config.Overcommit
	// usage returns the node's latest usage and when it was measured;
	// ok is false before the first measurement. Nil without a source
	// (no overcommit loop): no heartbeats then.
	usage func() (u api.NodeUsage, at time.Time, ok bool)

	// Channels into the owner goroutine.
	targets chan Target
	events  chan event
	kills   chan killReq

	stopc    chan struct{} // closed by Close
	stopOnce sync.Once
	done     chan struct{} // closed when Run has returned

	out outbox

	// mu guards what the owner publishes for other goroutines.
	mu struct {
		sync.Mutex
		started bool
		pods    map[string]runningPod // running pods by ID, for the overcommit loop
		stats   Stats
		// Heartbeat counters, kept apart from stats, which the owner
		// publishes whole.
		heartbeats, heartbeatErrors uint64
	}
}

// Stats are the Agent's counters and gauges, as of its last change.
type Stats struct {
	// Generation is the newest target generation applied.
	Generation uint64
	// Running is how many pods run (or are being stopped); RunningOnline
	// those of them in the online tier.
	Running, RunningOnline int
	// Starting is how many pods are being started (waiting for a start
	// slot or in a runtime Start call); StartingOnline those of them in
	// the online tier.
	Starting, StartingOnline int
	// Starts and StartFailures count runtime Start calls by outcome.
	Starts, StartFailures uint64
	// ImageDenied, VolumeDenied and NetworkDenied count, of
	// StartFailures, the pods refused for their image, a host path or
	// their network mode (the reasons reported); the others failed in the
	// runtime.
	ImageDenied, VolumeDenied, NetworkDenied uint64
	// Adopted counts running pods taken over from an earlier agent.
	Adopted uint64
	// Stops counts pods stopped because no longer wanted or past their
	// run time; Kills those the memory killer chose.
	Stops, Kills uint64
	// TimeLimits counts, of Stops, the pods stopped for running past
	// their max run time.
	TimeLimits uint64
	// OOMKilled counts the pods that ended killed by the kernel at their
	// memory limit.
	OOMKilled uint64
	// Exits counts pods that ended, however.
	Exits uint64
	// Removed counts pods removed from the runtime after their final
	// report was acknowledged.
	Removed uint64
	// ReportsAcked counts reports the dispatcher acknowledged;
	// ReportErrors failed Report calls; TargetErrors failed Target calls.
	ReportsAcked, ReportErrors, TargetErrors uint64
	// PendingReports is how many reports wait for acknowledgement.
	PendingReports int
	// Heartbeats counts usage heartbeats the dispatcher acknowledged;
	// HeartbeatErrors failed Heartbeat calls (see UsageReporter).
	Heartbeats, HeartbeatErrors uint64
	// OpErrors counts failed runtime Stop and Remove calls (retried).
	OpErrors uint64
}

var (
	_ overcommit.Killer    = (*Agent)(nil)
	_ overcommit.PodSource = (*Agent)(nil)
)

// New copies cfg, fills defaults and validates it.
func New(cfg Config) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	a := &Agent{
		cfg:     cfg,
		targets: make(chan Target),
		events:  make(chan event, 64),
		kills:   make(chan killReq),
		stopc:   make(chan struct{}),
		done:    make(chan struct{}),
	}
	a.mu.pods = map[string]runningPod{}
	a.out.kick = make(chan struct{}, 1)
	if cfg.Overcommit != nil {
		oc := *cfg.Overcommit
		oc.Pods, oc.Killer = a, a
		if oc.Clock == nil {
			oc.Clock = cfg.Clock
		}
		if oc.Logger == nil {
			oc.Logger = cfg.Logger
		}
		loop, err := overcommit.NewLoop(oc)
		if err != nil {
			return nil, fmt.Errorf("nodelet: overcommit: %w", err)
		}
		a.loop = loop
		a.usage = func() (api.NodeUsage, time.Time, bool) {
			r, d, ok := loop.LastStep()
			a.mu.Lock()
			u := nodeUsage(r, a.mu.pods)
			a.mu.Unlock()
			if ok {
				u.Overcommit = overcommitStatus(d)
			}
			return u, r.Time, ok
		}
	}
	if cfg.RuntimeUsage {
		meter := cfg.Runtime.(runtime.Meter) // Validate checked
		a.usage = func() (api.NodeUsage, time.Time, bool) {
			now := a.cfg.Clock.Now()
			a.mu.Lock()
			defer a.mu.Unlock()
			return meteredUsage(meter, now, a.mu.pods), now, true
		}
	}
	return a, nil
}

// meteredUsage is the node's usage at now as meter reports it for each of
// the running pods, in the shape of nodeUsage's: each pod's under its
// task's ID, each tier's sum, and their total. A pod meter does not know
// (it ended since) is left out.
func meteredUsage(meter runtime.Meter, now time.Time, pods map[string]runningPod) api.NodeUsage {
	var u api.NodeUsage
	if len(pods) > 0 {
		u.Tasks = make([]api.TaskUsage, 0, len(pods))
	}
	for id, rp := range pods {
		pu, ok := meter.Usage(id, now)
		if !ok {
			continue
		}
		tier, qos := &u.Offline, api.QoSOffline
		if rp.Tier == cgroup.Online {
			tier, qos = &u.Online, api.QoSOnline
		}
		tier.CPU += pu.CPU
		tier.Memory += pu.Memory
		u.Tasks = append(u.Tasks, api.TaskUsage{TaskID: rp.taskID, QoS: qos, Usage: pu})
	}
	u.Total = api.Usage{CPU: u.Online.CPU + u.Offline.CPU, Memory: u.Online.Memory + u.Offline.Memory}
	return u
}

// nodeUsage converts the overcommit loop's report into the node's usage:
// each tier's last measurement (the CPU averaged over the loop's last
// period, the memory working set at its end), and their sum as the total.
// The report's smoothed (EWMA) values are left out: api.Usage is what is
// used now. Each pod of the report still running (in pods) adds its own
// last measurement under its task's ID, for the dispatcher's estimates.
func nodeUsage(r overcommit.Report, pods map[string]runningPod) api.NodeUsage {
	on := api.Usage{CPU: r.Online.LastCPUMillis, Memory: r.Online.LastMemoryBytes}
	off := api.Usage{CPU: r.Offline.LastCPUMillis, Memory: r.Offline.LastMemoryBytes}
	u := api.NodeUsage{
		Total:   api.Usage{CPU: on.CPU + off.CPU, Memory: on.Memory + off.Memory},
		Online:  on,
		Offline: off,
	}
	for _, p := range r.Pods {
		rp, ok := pods[p.ID]
		if !ok {
			continue
		}
		qos := api.QoSOffline
		if p.Tier == cgroup.Online {
			qos = api.QoSOnline
		}
		u.Tasks = append(u.Tasks, api.TaskUsage{TaskID: rp.taskID, QoS: qos, Usage: api.Usage{CPU: p.LastCPUMillis, Memory: p.LastMemoryBytes}})
	}
	return u
}

// overcommitStatus is the offline tier's quota as the overcommit loop's
// decision d set it, the one its usage report was made with: the CPU
// quota between its floor and ceiling, and the memory limit and
// guarantee as the controller decided them (the tier's cgroup may hold
// more memory for pods reserved since, until the loop's next period).
func overcommitStatus(d overcommit.Decision) *api.OvercommitStatus {
	return &api.OvercommitStatus{
		CPUQuota: d.CPU.OfflineQuotaMillis, CPUMin: d.CPU.MinMillis, CPUMax: d.CPU.MaxMillis,
		MemoryLimit: d.Memory.OfflineLimitBytes, MemoryGuaranteed: d.Memory.GuaranteedBytes,
		Decided: d.Now.UTC(),
	}
}

// Overcommit returns the overcommit loop Run runs, or nil.
func (a *Agent) Overcommit() *overcommit.Loop { return a.loop }

// Run recovers the pods the runtime has, then converges the host to the
// dispatcher's targets and reports state changes until ctx is done or
// Close is called. It returns nil then, after every goroutine it started
// has ended; pods keep running, for the next agent to adopt. It fails only
// when the runtime cannot list its pods.
func (a *Agent) Run(ctx context.Context) error {
	a.mu.Lock()
	if a.mu.started {
		a.mu.Unlock()
		return ErrAlreadyRun
	}
	a.mu.started = true
	a.mu.Unlock()
	defer close(a.done)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-a.stopc:
			cancel()
		case <-ctx.Done():
		}
	}()

	listed, err := a.cfg.Runtime.List(ctx)
	if err != nil {
		return fmt.Errorf("nodelet: recover: list pods: %w", err)
	}
	o := newOwner(a, ctx)
	o.recover(listed)

	o.wg.Go(func() { a.pollTargets(ctx) })
	o.wg.Go(func() { a.sendReports(ctx) })
	if a.loop != nil {
		o.wg.Go(func() { _ = a.loop.Run(ctx) })
	}
	if ur, ok := a.cfg.Dispatcher.(UsageReporter); ok && a.usage != nil {
		o.wg.Go(func() { a.sendHeartbeats(ctx, ur) })
	}
	o.run(ctx)
	cancel()
	o.wg.Wait()
	return nil
}

// Close stops Run and waits for it to return. It is safe to call more
// than once, and before or without Run.
func (a *Agent) Close() error {
	a.stopOnce.Do(func() { close(a.stopc) })
	a.mu.Lock()
	started := a.mu.started
	a.mu.Unlock()
	if started {
		<-a.done
	}
	return nil
}

// Stats returns the Agent's counters.
func (a *Agent) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.mu.stats
	for _, rp := range a.mu.pods {
		if rp.Tier == cgroup.Online {
			s.RunningOnline++
		}
	}
	s.Heartbeats, s.HeartbeatErrors = a.mu.heartbeats, a.mu.heartbeatErrors
	s.PendingReports = a.out.len()
	return s
}

// runningPod is a running pod as the overcommit loop sees it, and its task.
type runningPod struct {
	overcommit.Pod
	taskID string
}

// Pods lists the running pods for the overcommit loop
// (overcommit.PodSource), by ID. It returns a new slice each call.
func (a *Agent) Pods() []overcommit.Pod {
	a.mu.Lock()
	pods := make([]overcommit.Pod, 0, len(a.mu.pods))
	for _, rp := range a.mu.pods {
		pods = append(pods, rp.Pod)
	}
	a.mu.Unlock()
	slices.SortFunc(pods, func(x, y overcommit.Pod) int { return strings.Compare(x.ID, y.ID) })
	return pods
}

// Kill stops a pod for the memory killer (overcommit.Killer): SIGKILL
// after Config.KillGrace, reported as killed by the memory killer with
// reason. Killing an unknown or ended pod does nothing. It returns once
// the agent has taken the request, not when the pod has ended.
func (a *Agent) Kill(ctx context.Context, podID, reason string) error {
	req := killReq{id: podID, reason: reason, reply: make(chan error, 1)}
	select {
	case a.kills <- req:
	case <-a.done:
		return fmt.Errorf("kill pod %q: %w", podID, ErrNotRunning)
	case <-ctx.Done():
		return fmt.Errorf("kill pod %q: %w", podID, ctx.Err())
	}
	select {
	case err := <-req.reply:
		return err
	case <-ctx.Done():
		return fmt.Errorf("kill pod %q: %w", podID, ctx.Err())
	}
}

// pollTargets long-polls the dispatcher and hands each new target to the
// owner.
func (a *Agent) pollTargets(ctx context.Context) {
	var known uint64
	b := backoff{clock: a.cfg.Clock, min: a.cfg.RetryMin, max: a.cfg.RetryMax}
	for ctx.Err() == nil {
		start := a.cfg.Clock.Now()
		t, err := a.cfg.Dispatcher.Target(ctx, a.cfg.Node, known)
		if a.cfg.Observer != nil && ctx.Err() == nil {
			a.cfg.Observer.TargetPolled(clock.Since(a.cfg.Clock, start), err)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			a.mu.Lock()
			a.mu.stats.TargetErrors++
			a.mu.Unlock()
			a.cfg.Logger.Warn("nodelet: get target", "node", a.cfg.Node, "err", err)
			if !b.sleep(ctx) {
				return
			}
			continue
		}
		b.reset()
		if t.Generation == known && known != 0 {
			continue
		}
		if t.Base != 0 && t.Base != known {
			// Changes since a target the owner does not hold: a
			// Dispatcher's mistake. Ask for the whole target.
			a.mu.Lock()
			a.mu.stats.TargetErrors++
			a.mu.Unlock()
			a.cfg.Logger.Error("nodelet: target changes since another target; asking for the whole", "node", a.cfg.Node, "base", t.Base, "known", known)
			known = 0
			continue
		}
		select {
		case a.targets <- t:
			known = t.Generation
		case <-ctx.Done():
			return
		}
	}
}

// sendReports delivers the outbox in order, retrying until acknowledged.
func (a *Agent) sendReports(ctx context.Context) {
	b := backoff{clock: a.cfg.Clock, min: a.cfg.RetryMin, max: a.cfg.RetryMax}
	// batch is reused from call to call: Report does not keep it.
	var batch []PodReport
	for {
		var last uint64
		batch, last = a.out.peek(batch, a.cfg.ReportBatch)
		if len(batch) == 0 {
			select {
			case <-a.out.kick:
				continue
			case <-ctx.Done():
				return
			}
		}
		start := a.cfg.Clock.Now()
		err := a.cfg.Dispatcher.Report(ctx, a.cfg.Node, batch)
		if a.cfg.Observer != nil && ctx.Err() == nil {
			a.cfg.Observer.Reported(clock.Since(a.cfg.Clock, start), err)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			a.mu.Lock()
			a.mu.stats.ReportErrors++
			a.mu.Unlock()
			a.cfg.Logger.Warn("nodelet: report", "node", a.cfg.Node, "reports", len(batch), "err", err)
			if !b.sleep(ctx) {
				return
			}
			continue
		}
		b.reset()
		a.out.ack(last)
		a.mu.Lock()
		a.mu.stats.ReportsAcked += uint64(len(batch))
		a.mu.Unlock()
		select {
		case a.events <- event{kind: evAcked, seq: last}:
		case <-ctx.Done():
			return
		}
	}
}

// sendHeartbeats sends the latest usage every HeartbeatPeriod until ctx is
// done. A usage already sent (the loop has not measured since) is not sent
// again; a failed call is logged and counted, and the next period sends
// what is newest then.
func (a *Agent) sendHeartbeats(ctx context.Context, ur UsageReporter) {
	t := clock.NewTicker(a.cfg.Clock, a.cfg.HeartbeatPeriod)
	defer t.Stop()
	var sent time.Time // the measurement time of the last usage sent
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		u, at, ok := a.usage()
		if !ok || !at.After(sent) {
			continue
		}
		hctx, cancel := context.WithTimeout(ctx, a.cfg.HeartbeatPeriod)
		err := ur.Heartbeat(hctx, a.cfg.Node, u)
		cancel()
		if ctx.Err() != nil {
			return
		}
		a.mu.Lock()
		if err != nil {
			a.mu.heartbeatErrors++
		} else {
			a.mu.heartbeats++
		}
		a.mu.Unlock()
		if err != nil {
			a.cfg.Logger.Warn("nodelet: heartbeat", "node", a.cfg.Node, "err", err)
			continue
		}
		sent = at
	}
}

// outbox is the queue of reports not yet acknowledged, in order. The owner
// appends; the reporter peeks and acknowledges.
type outbox struct {
	kick chan struct{} // a report was added
	mu   sync.Mutex
	q    []queued
	seq  uint64 // of the last report added
}

type queued struct {
	seq uint64
	r   PodReport
}

// add appends r and returns its sequence number.
func (o *outbox) add(r PodReport) uint64 {
	o.mu.Lock()
	o.seq++
	s := o.seq
	o.q = append(o.q, queued{seq: s, r: r})
	o.mu.Unlock()
	select {
	case o.kick <- struct{}{}:
	default:
	}
	return s
}

// peek copies up to n reports from the front into dst, whose contents it
// replaces, and returns them and the last one's sequence.
func (o *outbox) peek(dst []PodReport, n int) ([]PodReport, uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	dst = dst[:0]
	n = min(n, len(o.q))
	if n == 0 {
		return dst, 0
	}
	for i := range n {
		dst = append(dst, o.q[i].r)
	}
	return dst, o.q[n-1].seq
}

// ack drops the reports up to sequence last.
func (o *outbox) ack(last uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	i := 0
	for i < len(o.q) && o.q[i].seq <= last {
		i++
	}
	o.q = append(o.q[:0], o.q[i:]...)
}

func (o *outbox) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.q)
}

// backoff is an exponential backoff between min and max on a Clock.
type backoff struct {
	clock         clock.Clock
	min, max, cur time.Duration
}

func (b *backoff) reset() { b.cur = 0 }

// sleep waits the next delay; false if ctx ended first.
func (b *backoff) sleep(ctx context.Context) bool {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	return clock.Sleep(ctx, b.clock, b.cur) == nil
}

// tierOf maps a pod's recorded cgroup parent back to its tier.
func tierOf(root, parent string) cgroup.Tier {
	if parent == root+"/"+string(cgroup.Online) {
		return cgroup.Online
	}
	return cgroup.Offline
}
