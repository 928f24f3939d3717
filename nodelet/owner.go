package nodelet

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"path"
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

// phase is where the agent is with one pod.
type phase uint8

const (
	phaseStarting phase = iota // a Start call is in flight
	phaseRunning               // started (or adopted); a waiter watches it
	phaseStopping              // a Stop call is in flight
	phaseExited                // ended; its final report is queued or pending
	phaseRemoving              // final report acknowledged; Remove in flight
	phaseDone                  // gone from the runtime (ended or never started); kept while desired so it is not started again
)

func (p phase) String() string {
	return [...]string{"starting", "running", "stopping", "exited", "removing", "done"}[p]
}

// pod is the owner's record of one pod.
type pod struct {
	want      DesiredPod // as started (or as recovered: ID, Generation, Tier)
	phase     phase
	startedAt time.Time
	// askedAt is when the agent decided to start it (zero for an adopted
	// pod).
	askedAt time.Time
	// unwanted: the target dropped it while starting; stop once started.
	unwanted bool
	// stopReason is why the agent ended it: ReasonStopped,
	// ReasonMemoryKiller or ReasonTimeLimit; "" when it ended on its own.
	stopReason api.TaskReason
	killMsg    string
	// exit is how it ended, in phaseExited and later (a value, not a
	// pointer: one allocation less a pod); endedAt is when the owner
	// learnt of it.
	exit    runtime.Exit
	endedAt time.Time
	// finalSeq is the outbox sequence of the final report, 0 until queued.
	finalSeq uint64
	// reportRunning: a running report is owed once the target names the
	// task (adopted pods).
	reportRunning bool
	// opFailed: the last Stop or Remove failed; retried on resync.
	opFailed bool
}

// slot is what the owner holds for one pod ID: the target's pod, when
// the target names it, and the agent's pod, when it has one. A slot with
// neither is deleted when reconciled. Marks and queued exits hold slots,
// so that the owner looks a pod ID up once for each change it learns of
// (a target, an event) rather than at every step that follows: on a
// simulated fleet's busy nodes, lookups of IDs in maps of hundreds were a
// sixth of the fleet's CPU.
type slot struct {
	id string
	// d is the target's pod; inTarget says the target names it.
	d        DesiredPod
	inTarget bool
	// seen is the owner's count of targets (owner.targets) when one last
	// named this ID, to find an ID named twice in one target.
	seen uint64
	// p is the agent's pod, nil when it has none.
	p *pod
	// published: the ID is in the agent's shared list of running pods
	// (publish keeps it there while its pod runs or stops).
	published bool
	// gone: deleted from owner.slots; a new slot holds the ID if it comes
	// back, and what still holds this one skips it.
	gone bool
}

func (p *pod) taskID() string {
	if p.want.TaskID != "" {
		return p.want.TaskID
	}
	return p.want.ID
}

type evKind uint8

const (
	evStarted evKind = iota
	evStartFailed
	evExited
	evStopFailed
	evRemoved
	evRemoveFailed
	evAcked
)

// event is what a pod goroutine or the reporter posts to the owner: about
// pod p of slot s, which the goroutine only passes on (the owner alone
// reads and writes them, but for the slot's ID, fixed when it is made).
type event struct {
	kind evKind
	s    *slot
	p    *pod
	exit runtime.Exit
	err  error
	seq  uint64 // evAcked: reports up to seq are acknowledged
}

type killReq struct {
	id, reason string
	reply      chan error
}

// owner is the one goroutine that owns desired and actual state. Its
// fields are touched only by run and what run calls.
//
// Its work is proportional to what changed, not to the pods it has: a new
// target, an event, a kill or a resync marks the pod IDs it concerns, and
// reconcile and publish visit only those. What changes with time or with
// acknowledgements alone — an ended pod becoming due for removal — is
// found in exits, the ended pods in the order of their final reports.
type owner struct {
	a   *Agent
	ctx context.Context
	wg  sync.WaitGroup
	sem chan struct{} // bounds Start and Remove calls in flight
	// slots are the pods of the target and of the agent, by ID.
	slots map[string]*slot
	// targets counts the targets taken; 0 before the first, when
	// nothing is started or stopped.
	targets    uint64
	generation uint64
	acked      uint64 // outbox sequence acknowledged
	stats      Stats
	// marked holds the slots to reconcile and publish next, in the
	// order marked and with repeats until reconcile sorts them: a slice
	// the loop reuses costs less than a set, which a pod joins several
	// times a second on a busy node.
	marked []*slot
	// exits queues ended pods whose final report is queued, by its
	// sequence, until they are removed.
	exits []exitEntry
	// deadlines are the running pods' run-time limits, earliest first;
	// an entry whose pod has moved on is dropped when it comes due.
	deadlines deadlineHeap
	// immediate says the runtime is a runtime.Immediate: Start and Remove
	// are called in the owner's loop, and what they would have posted
	// queues in local, handled before the loop waits again.
	immediate bool
	// offlineParent and onlineParent are the tiers' cgroups, joined once
	// rather than for every pod started.
	offlineParent, onlineParent string
	// bridgeAddr is Config.Addr as bridge-mode pods reach it (podAddr),
	// derived once rather than for every pod started.
	bridgeAddr string
	// lastSpec is the last pod spec spec derived, which the next pod of
	// the same api spec shares.
	lastSpec specMemo
	local    []event
	// handling is the buffer of the local events settle handles, kept
	// for the next ones.
	handling []event
}

// deadline is when the MaxRunTime of pod p of slot s, running, ends.
type deadline struct {
	at time.Time
	s  *slot
	p  *pod
}

type deadlineHeap []deadline

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h deadlineHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *deadlineHeap) Push(x any)        { *h = append(*h, x.(deadline)) }
func (h *deadlineHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	*h = old[:len(old)-1]
	return d
}

// exitEntry is an ended pod waiting in owner.exits, and its slot. An
// entry whose pod has moved on (removed, replaced) is dropped when it
// reaches the front.
type exitEntry struct {
	s   *slot
	p   *pod
	seq uint64
}

func newOwner(a *Agent, ctx context.Context) *owner {
	_, immediate := a.cfg.Runtime.(runtime.Immediate)
	return &owner{
		a:             a,
		ctx:           ctx,
		sem:           make(chan struct{}, a.cfg.MaxConcurrentStarts),
		slots:         map[string]*slot{},
		immediate:     immediate,
		offlineParent: path.Join(a.cfg.CgroupRoot, string(cgroup.Offline)),
		onlineParent:  path.Join(a.cfg.CgroupRoot, string(cgroup.Online)),
		bridgeAddr:    podAddr(a.cfg.Addr, a.cfg.HostIP),
	}
}

// mark notes that a slot's pod needs a look.
func (o *owner) mark(s *slot) { o.marked = append(o.marked, s) }

// slot returns the slot of pod id, made if it has none.
func (o *owner) slot(id string) *slot {
	s := o.slots[id]
	if s == nil {
		s = &slot{id: id}
		o.slots[id] = s
	}
	return s
}

// recover takes over what the runtime listed: running pods are watched
// again (and stopped later if the first target does not want them); ended
// ones are reported and removed.
func (o *owner) recover(listed []runtime.PodStatus) {
	for _, st := range listed {
		p := &pod{
			want:      DesiredPod{ID: st.ID, Generation: st.Generation, Tier: tierOf(o.a.cfg.CgroupRoot, st.CgroupParent), Pod: new(api.PodSpec)},
			startedAt: st.StartedAt,
		}
		s := o.slot(st.ID)
		s.p = p
		o.mark(s)
		switch {
		case st.State == runtime.StateRunning:
			p.phase = phaseRunning
			p.reportRunning = true
			o.stats.Adopted++
			o.watch(s, p)
		case st.Exit != nil:
			p.phase, p.endedAt = phaseExited, o.a.cfg.Clock.Now()
			p.exit = *st.Exit
		default:
			p.phase, p.endedAt = phaseExited, o.a.cfg.Clock.Now()
			p.exit = runtime.Exit{Code: -1, Err: runtime.ErrExitUnknown}
		}
	}
	o.publish()
}

func (o *owner) run(ctx context.Context) {
	resync := clock.NewTicker(o.a.cfg.Clock, o.a.cfg.ResyncPeriod)
	defer resync.Stop()
	// limit goes off at the earliest run-time limit, limitAt; it is set
	// again only when that changes.
	limit := clock.NewAlarm(o.a.cfg.Clock)
	defer limit.Stop()
	var limitAt time.Time
	for {
		switch {
		case len(o.deadlines) > 0 && !o.deadlines[0].at.Equal(limitAt):
			limitAt = o.deadlines[0].at
			limit.Set(max(limitAt.Sub(o.a.cfg.Clock.Now()), time.Millisecond))
		case len(o.deadlines) == 0 && !limitAt.IsZero():
			limitAt = time.Time{}
			limit.Stop()
		}
		select {
		case <-ctx.Done():
			return
		case t := <-o.a.targets:
			o.setTarget(t)
		case ev := <-o.a.events:
			o.handle(ev)
		case k := <-o.a.kills:
			k.reply <- o.kill(k.id, k.reason)
		case <-limit.C:
			limitAt = time.Time{}
		case <-resync.C:
			for _, s := range o.slots {
				if s.p != nil && s.p.opFailed {
					s.p.opFailed = false
					o.mark(s)
				}
			}
		}
		o.settle()
	}
}

// settle converges after what the loop took: the queued events and
// targets, the run-time limits, the marked pods, and the events an
// immediate runtime's calls left, until none is left.
func (o *owner) settle() {
	for {
		o.drain()
		o.expire()
		o.reconcile()
		o.publish()
		if len(o.local) == 0 {
			return
		}
		evs := o.local
		o.local = o.handling
		for _, ev := range evs {
			o.handle(ev)
		}
		clear(evs)
		o.handling = evs[:0]
	}
}

// limitRunTime schedules the end of the MaxRunTime of running pod p of
// slot s, if it has one.
func (o *owner) limitRunTime(s *slot, p *pod) {
	if limit := p.want.maxRunTime(); limit > 0 && p.phase == phaseRunning {
		heap.Push(&o.deadlines, deadline{at: p.startedAt.Add(limit), s: s, p: p})
	}
}

// expire stops the running pods whose MaxRunTime has passed.
func (o *owner) expire() {
	now := o.a.cfg.Clock.Now()
	for len(o.deadlines) > 0 && !o.deadlines[0].at.After(now) {
		d := heap.Pop(&o.deadlines).(deadline)
		s, p := d.s, d.p
		if s.gone || s.p != p || p.phase != phaseRunning || p.stopReason != "" {
			continue // ended, replaced or being stopped already
		}
		o.mark(s)
		o.stop(s, p, api.ReasonTimeLimit, fmt.Sprintf("ran longer than its max run time of %v", p.want.maxRunTime()), o.a.cfg.StopGrace)
	}
}

// drain takes the events and targets already queued, so that a burst of
// them costs one reconcile rather than one each.
func (o *owner) drain() {
	for range cap(o.a.events) {
		select {
		case t := <-o.a.targets:
			o.setTarget(t)
		case ev := <-o.a.events:
			o.handle(ev)
		default:
			return
		}
	}
}

// setTarget records a new target and marks the pods it changes: added,
// dropped, or with a new generation, priority or task. The first target
// marks every pod. A pod ID that appears twice is reported as failed to
// start; the first one counts.
func (o *owner) setTarget(t Target) {
	if t.Base != 0 {
		// pollTargets hands over changes only since the target it handed
		// over last, which is the one the owner holds.
		o.changeTarget(t)
		return
	}
	first := o.targets == 0
	o.targets++
	o.generation = t.Generation
	for _, d := range t.Pods {
		o.want(d, t.Generation)
	}
	for _, s := range o.slots {
		if s.inTarget && s.seen != o.targets {
			s.inTarget = false
			o.mark(s)
		} else if first {
			o.mark(s)
		}
	}
}

// changeTarget applies t, the changes since the target the owner holds,
// marking the pods they concern.
func (o *owner) changeTarget(t Target) {
	o.targets++
	o.generation = t.Generation
	for _, id := range t.Removed {
		if s := o.slots[id]; s != nil && s.inTarget {
			s.inTarget = false
			o.mark(s)
		}
	}
	for _, d := range t.Pods {
		o.want(d, t.Generation)
	}
}

// want makes d, a pod of the target of generation gen (the owner's
// latest), desired, marking it when it is new or changed from what the
// target named before; unless its ID came earlier in this target, which
// is reported as failed to start: the first counts.
func (o *owner) want(d DesiredPod, gen uint64) {
	if d.Tier == "" {
		d.Tier = cgroup.Offline
	}
	s := o.slot(d.ID)
	if s.seen == o.targets {
		o.reportStartFailed(d, fmt.Errorf("pod id %q appears twice in target %d", d.ID, gen))
		return
	}
	s.seen = o.targets
	if w := &s.d; !s.inTarget || w.Generation != d.Generation || w.Priority != d.Priority || w.TaskID != d.TaskID {
		o.mark(s)
	}
	s.d, s.inTarget = d, true
}

// check validates what the agent needs of a desired pod before the
// runtime sees it.
func (o *owner) check(d DesiredPod) error {
	var errs []error
	if msg := runtime.CheckName(d.ID); msg != "" {
		errs = append(errs, fmt.Errorf("pod id: %s", msg))
	}
	if !d.Tier.Valid() {
		errs = append(errs, fmt.Errorf("tier %q: want %q or %q", d.Tier, cgroup.Online, cgroup.Offline))
	}
	if d.Pod == nil {
		errs = append(errs, errors.New("pod: no spec"))
	}
	return errors.Join(errs...)
}

// reconcile starts what is missing, stops what is not wanted, reports
// and removes what ended, for the marked pods (in ID order, for a
// deterministic start and report order), then removes the ended pods that
// have become due. It never blocks: runtime calls run in goroutines that
// post events back.
func (o *owner) reconcile() {
	if o.targets == 0 {
		return // no target yet: adopt, but change nothing
	}
	slices.SortFunc(o.marked, func(a, b *slot) int { return strings.Compare(a.id, b.id) })
	o.marked = slices.Compact(o.marked)
	now := o.a.cfg.Clock.Now()
	// reconcilePod marks pods again (publish sees them); the range is
	// over the slots sorted above.
	for _, s := range o.marked {
		if s.gone {
			continue
		}
		o.reconcilePod(s, now)
		if s.p == nil && !s.inTarget {
			delete(o.slots, s.id)
			s.gone = true
		}
	}
	for len(o.exits) > 0 {
		e := o.exits[0]
		p := e.p
		switch {
		case e.s.gone || e.s.p != p || p.phase != phaseExited || p.finalSeq != e.seq:
			// Moved on since: removed or replaced.
		case p.opFailed:
			// A failed Remove: retried on resync.
		case !o.removable(p, now):
			return // not yet acknowledged or retained: nor are those behind it
		default:
			o.remove(e.s, p)
		}
		o.exits = o.exits[1:]
	}
}

// reconcilePod converges one slot's pod to the target.
func (o *owner) reconcilePod(s *slot, now time.Time) {
	d, inTarget := s.d, s.inTarget
	p := s.p
	if inTarget {
		switch {
		case p == nil:
			o.start(s, d)
			return
		case p.want.Generation != d.Generation:
			switch p.phase {
			case phaseDone:
				o.start(s, d)
				return
			case phaseRunning:
				o.stop(s, p, api.ReasonStopped, "", o.a.cfg.StopGrace)
			case phaseStarting:
				p.unwanted = true
			}
		default:
			// The same pod: keep what the dispatcher may change.
			p.want.Priority = d.Priority
			if d.TaskID != "" {
				p.want.TaskID = d.TaskID
			}
			if p.reportRunning && p.phase == phaseRunning {
				// Adopted: its limit counts from when the runtime
				// started it, and its spec (what it requests, its
				// ports) is the target's, which the runtime's listing
				// does not carry.
				p.reportRunning = false
				p.want.Group, p.want.Ports = d.Group, d.Ports
				if d.Pod != nil {
					p.want.Pod = d.Pod
				}
				o.limitRunTime(s, p)
				o.report(p, api.TaskRunning, api.ReasonStarted, 0, "adopted after a nodelet restart")
			}
		}
	}
	if p == nil {
		return
	}
	wanted := inTarget && d.Generation == p.want.Generation
	switch p.phase {
	case phaseStarting:
		if !wanted {
			p.unwanted = true
		}
	case phaseRunning:
		if p.opFailed {
			break // retried on resync
		}
		switch {
		case !wanted || p.unwanted:
			o.stop(s, p, api.ReasonStopped, "", o.a.cfg.StopGrace)
		case p.stopReason == api.ReasonMemoryKiller:
			// A kill whose Stop failed: retried on resync.
			o.stop(s, p, api.ReasonMemoryKiller, p.killMsg, o.a.cfg.KillGrace)
		case p.stopReason == api.ReasonTimeLimit:
			o.stop(s, p, api.ReasonTimeLimit, p.killMsg, o.a.cfg.StopGrace)
		}
	case phaseExited:
		if p.finalSeq == 0 {
			o.reportExit(p)
			o.exits = append(o.exits, exitEntry{s, p, p.finalSeq})
		} else if !p.opFailed && o.removable(p, now) {
			o.remove(s, p)
		}
	case phaseDone:
		if !wanted {
			s.p = nil
		}
	}
}

// removable reports whether an ended pod's final report is acknowledged
// and its retention over.
func (o *owner) removable(p *pod, now time.Time) bool {
	return p.finalSeq <= o.acked && now.Sub(p.endedAt) >= o.a.cfg.RetainExited
}

// specMemo is a derived pod spec and what it was derived from: the api
// spec's containers, volumes and simulation (by address) and the tier.
type specMemo struct {
	containers *api.ContainerSpec
	volumes    *api.Volume
	sim        *api.SimSpec
	n, nvol    int
	tier       cgroup.Tier
	spec       runtime.PodSpec
}

// firstVolume is the address of p's first volume, nil for none.
func firstVolume(p *api.PodSpec) *api.Volume {
	if len(p.Volumes) == 0 {
		return nil
	}
	return &p.Volumes[0]
}

// spec derives the runtime spec of d, with the identity its containers
// get (identityEnv). Offline pods get no CPU quota of
// their own: the offline tier's quota (the overcommit loop's) bounds them,
// and cgroup v1 refuses a child quota above its parent's.
//
// The pods of a task group share their api spec's memory (api's decoder
// reads a spec repeated in a target once), and then share their runtime
// spec's containers, volumes and simulation too, which runtimes do not
// change (ResolveHostPaths gives a spec volumes of its own): a pod with
// the api spec (at the same address) and tier of the last pod derived
// takes that one's. What is the pod's own (its IDs, cgroup, capbox,
// network, identity and ports) is set for every pod.
func (o *owner) spec(d DesiredPod) runtime.PodSpec {
	parent := o.offlineParent // check has let only the two tiers through
	if d.Tier == cgroup.Online {
		parent = o.onlineParent
	}
	var s runtime.PodSpec
	if m := &o.lastSpec; len(d.Pod.Containers) > 0 && &d.Pod.Containers[0] == m.containers && len(d.Pod.Containers) == m.n &&
		firstVolume(d.Pod) == m.volumes && len(d.Pod.Volumes) == m.nvol && d.Pod.Sim == m.sim && d.Tier == m.tier {
		s = m.spec
		s.ID, s.Generation, s.CgroupParent, s.SharePID = d.ID, d.Generation, parent, d.Pod.SharePID
	} else {
		s = runtime.FromAPI(d.ID, d.Generation, parent, d.Pod)
		if d.Tier == cgroup.Offline {
			for i := range s.Containers {
				s.Containers[i].Resources.MilliCPU = 0
			}
		}
		if len(d.Pod.Containers) > 0 {
			o.lastSpec = specMemo{containers: &d.Pod.Containers[0], volumes: firstVolume(d.Pod), sim: d.Pod.Sim,
				n: len(d.Pod.Containers), nvol: len(d.Pod.Volumes), tier: d.Tier, spec: s}
		}
	}
	s.Placeholder, s.InPod = d.Capbox, d.InCapbox
	s.Network = o.network(&d)
	s.Env = identityEnv(o.a.cfg.Node, o.podAddr(s.Network), o.a.cfg.HostIP, &d)
	s.Ports = portMappings(d.Ports)
	return s
}

// network is d's network mode: its spec's, else the node's default.
func (o *owner) network(d *DesiredPod) string {
	if m := d.Pod.Network.Mode; m != "" {
		return m
	}
	return o.a.cfg.DefaultNetwork
}

// podAddr is the dispatcher URLs as a pod of network mode reaches them.
func (o *owner) podAddr(mode string) string {
	if mode == runtime.NetworkBridge {
		return o.bridgeAddr
	}
	return o.a.cfg.Addr
}

// checkNetwork refuses a pod in host mode on a node that does not allow
// it, with an ErrNetworkDenied error saying so.
func (o *owner) checkNetwork(s *runtime.PodSpec) error {
	if s.Network == runtime.NetworkHost && !o.a.cfg.AllowHostNetwork {
		return fmt.Errorf("%w: the pod asks for the host's network, and node %s does not allow it (its nodelet runs without --allow-host-network)",
			ErrNetworkDenied, o.a.cfg.Node)
	}
	return nil
}

// put makes p the pod of slot s and marks it.
func (o *owner) put(s *slot, p *pod) {
	s.p = p
	o.mark(s)
}

// prepare checks d and derives its runtime spec, with its host paths
// resolved and its resource file written; an error says why the node
// will not start it.
func (o *owner) prepare(d *DesiredPod) (runtime.PodSpec, error) {
	if err := o.check(*d); err != nil {
		return runtime.PodSpec{}, err
	}
	spec := o.spec(*d)
	if err := o.checkNetwork(&spec); err != nil {
		return runtime.PodSpec{}, err
	}
	if err := spec.ResolveHostPaths(o.a.cfg.VolumeRoots); err != nil {
		return runtime.PodSpec{}, err
	}
	if err := o.a.prepareResources(&spec, d); err != nil {
		return runtime.PodSpec{}, err
	}
	return spec, nil
}

// start starts d in a goroutine that then waits for it.
// A pod the agent cannot start (prepare refuses it) is reported as
// failed to start and kept as done, so it is not tried again.
func (o *owner) start(s *slot, d DesiredPod) {
	spec, err := o.prepare(&d)
	if err != nil {
		o.stats.StartFailures++
		o.reportStartFailed(d, err)
		o.put(s, &pod{want: d, phase: phaseDone})
		return
	}
	p := &pod{want: d, phase: phaseStarting, askedAt: o.a.cfg.Clock.Now()}
	o.put(s, p)
	o.countStarting(&p.want, 1)
	o.reserve(&d)
	rt := o.a.cfg.Runtime
	if o.immediate {
		o.startNow(s, p, spec)
		return
	}
	o.wg.Go(func() {
		select {
		case o.sem <- struct{}{}:
		case <-o.ctx.Done():
			return
		}
		err := rt.Start(o.ctx, spec)
		<-o.sem
		if err != nil {
			o.post(event{kind: evStartFailed, s: s, p: p, err: err})
			return
		}
		if !o.post(event{kind: evStarted, s: s, p: p}) {
			return
		}
		o.wait(s, p)
	})
}

// reserve makes room for offline pod d in its tier before it starts
// (overcommit.Loop.Reserve), when the overcommit loop runs: the pod's
// memory request is guaranteed from its first byte, not from the loop's
// next period.
func (o *owner) reserve(d *DesiredPod) {
	if o.a.loop == nil || d.Tier != cgroup.Offline {
		return
	}
	if err := o.a.loop.Reserve(d.ID, podRequest(d)); err != nil {
		o.a.cfg.Logger.Warn("nodelet: reserve offline memory", "pod", d.ID, "err", err)
	}
}

// release drops pod d's reservation, if it has one: it failed to start
// or ended.
func (o *owner) release(d *DesiredPod) {
	if o.a.loop != nil && d.Tier == cgroup.Offline {
		o.a.loop.Release(d.ID)
	}
}

// startNow starts pod p of slot s with an immediate runtime, in the
// owner's loop.
func (o *owner) startNow(s *slot, p *pod, spec runtime.PodSpec) {
	if err := o.a.cfg.Runtime.Start(o.ctx, spec); err != nil {
		if o.ctx.Err() == nil {
			o.local = append(o.local, event{kind: evStartFailed, s: s, p: p, err: err})
		}
		return
	}
	o.local = append(o.local, event{kind: evStarted, s: s, p: p})
	n, ok := o.a.cfg.Runtime.(runtime.Notifier)
	if !ok {
		o.watch(s, p)
		return
	}
	if err := n.Notify(s.id, o.onExit(s, p)); err != nil {
		o.local = append(o.local, event{kind: evExited, s: s, p: p, exit: lostExit(err)})
	}
}

// onExit returns the callback that posts the end of pod p of slot s.
func (o *owner) onExit(s *slot, p *pod) func(runtime.Exit) {
	return func(exit runtime.Exit) {
		o.post(event{kind: evExited, s: s, p: p, exit: exit})
	}
}

// lostExit is the end of a pod whose end could not be waited for: it is
// reported lost.
func lostExit(err error) runtime.Exit {
	return runtime.Exit{Code: -1, Err: fmt.Errorf("wait: %w", err)}
}

// watch waits for running pod p of slot s in a goroutine.
func (o *owner) watch(s *slot, p *pod) {
	o.wg.Go(func() { o.wait(s, p) })
}

// wait reports the end of running pod p of slot s: through the runtime's
// callback when it is a runtime.Notifier (no goroutine waits), else by
// waiting.
func (o *owner) wait(s *slot, p *pod) {
	var (
		exit runtime.Exit
		err  error
	)
	if n, ok := o.a.cfg.Runtime.(runtime.Notifier); ok {
		err = n.Notify(s.id, o.onExit(s, p))
		if err == nil {
			return
		}
	} else {
		exit, err = o.a.cfg.Runtime.Wait(o.ctx, s.id)
	}
	if err != nil {
		if o.ctx.Err() == nil {
			// The pod vanished under us: report it lost.
			exit = lostExit(err)
		} else {
			return
		}
	}
	o.post(event{kind: evExited, s: s, p: p, exit: exit})
}

// post sends ev to the owner; false when the agent is stopping.
func (o *owner) post(ev event) bool {
	select {
	case o.a.events <- ev:
		return true
	case <-o.ctx.Done():
		return false
	}
}

// stop ends running pod p of slot s in a goroutine; its waiter reports
// the exit.
func (o *owner) stop(s *slot, p *pod, reason api.TaskReason, msg string, grace time.Duration) {
	if stopRank(reason) > stopRank(p.stopReason) {
		p.stopReason, p.killMsg = reason, msg
	}
	p.phase = phaseStopping
	switch reason {
	case api.ReasonMemoryKiller:
		o.stats.Kills++
	case api.ReasonTimeLimit:
		o.stats.Stops++
		o.stats.TimeLimits++
	default:
		o.stats.Stops++
	}
	rt := o.a.cfg.Runtime
	o.wg.Go(func() {
		if err := rt.Stop(o.ctx, s.id, grace); err != nil && o.ctx.Err() == nil {
			o.post(event{kind: evStopFailed, s: s, p: p, err: err})
		}
	})
}

// stopRank orders the reasons to stop a pod: a stop for a stronger reason
// keeps it over a later one's (the memory killer's over the time limit's,
// both over the target's).
func stopRank(r api.TaskReason) int {
	switch r {
	case api.ReasonMemoryKiller:
		return 3
	case api.ReasonTimeLimit:
		return 2
	case api.ReasonStopped:
		return 1
	}
	return 0
}

// remove deletes pod p of slot s, ended and reported, from the runtime in
// a goroutine.
func (o *owner) remove(s *slot, p *pod) {
	p.phase = phaseRemoving
	id, rt := s.id, o.a.cfg.Runtime
	if o.immediate {
		err := rt.Remove(o.ctx, id)
		switch {
		case err != nil && o.ctx.Err() != nil:
		case err != nil && !errors.Is(err, runtime.ErrNotFound):
			o.local = append(o.local, event{kind: evRemoveFailed, s: s, p: p, err: err})
		default:
			o.local = append(o.local, event{kind: evRemoved, s: s, p: p})
		}
		return
	}
	o.wg.Go(func() {
		select {
		case o.sem <- struct{}{}:
		case <-o.ctx.Done():
			return
		}
		err := rt.Remove(o.ctx, id)
		<-o.sem
		if err != nil && !errors.Is(err, runtime.ErrNotFound) {
			o.post(event{kind: evRemoveFailed, s: s, p: p, err: err})
			return
		}
		o.post(event{kind: evRemoved, s: s, p: p})
	})
}

// kill handles a memory-killer request.
func (o *owner) kill(id, reason string) error {
	s := o.slots[id]
	if s == nil || s.p == nil {
		return nil
	}
	p := s.p
	o.mark(s)
	switch p.phase {
	case phaseStarting:
		p.unwanted = true
		p.stopReason, p.killMsg = api.ReasonMemoryKiller, reason
	case phaseRunning, phaseStopping:
		o.stop(s, p, api.ReasonMemoryKiller, reason, o.a.cfg.KillGrace)
	}
	return nil
}

func (o *owner) handle(ev event) {
	if ev.kind == evAcked {
		o.acked = max(o.acked, ev.seq)
		return
	}
	s, p := ev.s, ev.p
	if ev.kind == evStarted || ev.kind == evStartFailed {
		o.countStarting(&p.want, -1)
	}
	if s.gone || s.p != p {
		return // a pod the owner has moved on from; cannot happen
	}
	o.mark(s)
	switch ev.kind {
	case evStarted:
		o.stats.Starts++
		p.phase = phaseRunning
		p.startedAt = o.a.cfg.Clock.Now()
		if ob := o.a.cfg.Observer; ob != nil {
			ob.PodStarted(p.want.Tier, p.startedAt.Sub(p.askedAt))
		}
		o.limitRunTime(s, p)
		o.report(p, api.TaskRunning, api.ReasonStarted, 0, "")
		if p.stopReason == api.ReasonMemoryKiller {
			o.stop(s, p, api.ReasonMemoryKiller, p.killMsg, o.a.cfg.KillGrace)
		}
	case evStartFailed:
		o.stats.StartFailures++
		o.a.cfg.Logger.Warn("nodelet: start pod", "pod", s.id, "generation", p.want.Generation, "err", ev.err)
		o.reportStartFailed(p.want, ev.err)
		p.phase = phaseDone
		o.a.dropResources(&p.want)
		o.release(&p.want)
	case evExited:
		o.stats.Exits++
		o.release(&p.want)
		p.exit = ev.exit
		p.phase, p.endedAt = phaseExited, o.a.cfg.Clock.Now()
	case evStopFailed:
		o.stats.OpErrors++
		o.a.cfg.Logger.Warn("nodelet: stop pod", "pod", s.id, "generation", p.want.Generation, "err", ev.err)
		if p.phase == phaseStopping {
			p.phase = phaseRunning
			p.opFailed = true
		}
	case evRemoveFailed:
		o.stats.OpErrors++
		o.a.cfg.Logger.Warn("nodelet: remove pod", "pod", s.id, "generation", p.want.Generation, "err", ev.err)
		p.phase = phaseExited
		p.opFailed = true
	case evRemoved:
		o.stats.Removed++
		p.phase = phaseDone
		p.exit = runtime.Exit{}
		o.a.dropResources(&p.want)
	}
}

// reportStartFailed queues the report of a pod that could not start:
// failed with api.ReasonImageDenied when the runtime refused an image of
// it (runtime.ErrImageDenied), api.ReasonVolumeDenied when the node or the
// runtime refused a host path (runtime.ErrVolumeDenied),
// api.ReasonNetworkDenied when the node refused its network mode
// (ErrNetworkDenied), else with
// api.ReasonStartFailed.
func (o *owner) reportStartFailed(d DesiredPod, err error) {
	p := &pod{want: d}
	reason := api.ReasonStartFailed
	switch {
	case errors.Is(err, runtime.ErrImageDenied):
		reason = api.ReasonImageDenied
		o.stats.ImageDenied++
	case errors.Is(err, runtime.ErrVolumeDenied):
		reason = api.ReasonVolumeDenied
		o.stats.VolumeDenied++
	case errors.Is(err, ErrNetworkDenied):
		reason = api.ReasonNetworkDenied
		o.stats.NetworkDenied++
	}
	o.report(p, api.TaskFailed, reason, 0, err.Error())
}

// reportExit queues the final report of an ended pod.
func (o *owner) reportExit(p *pod) {
	e := &p.exit
	var (
		state  api.TaskState
		reason api.TaskReason
		msg    string
	)
	switch {
	case p.stopReason == api.ReasonMemoryKiller:
		state, reason, msg = api.TaskKilled, api.ReasonMemoryKiller, p.killMsg
	case p.stopReason == api.ReasonTimeLimit:
		state, reason, msg = api.TaskKilled, api.ReasonTimeLimit, p.killMsg
	case p.stopReason == api.ReasonStopped:
		state, reason = api.TaskKilled, api.ReasonStopped
	case e.OOMKilled:
		state, reason = api.TaskFailed, api.ReasonOOMKilled
		o.stats.OOMKilled++
	case e.Err != nil:
		state, reason, msg = api.TaskLost, api.ReasonLost, e.Err.Error()
	case e.Code != 0 && len(e.ScratchFull) > 0:
		state, reason, msg = api.TaskFailed, api.ReasonScratchFull, scratchFullMessage(p.want.Pod, e)
	case e.Code == 0:
		state, reason = api.TaskSucceeded, api.ReasonExited
	default:
		state, reason = api.TaskFailed, api.ReasonExited
	}
	p.finalSeq = o.report(p, state, reason, int32(e.Code), msg)
}

func (o *owner) report(p *pod, state api.TaskState, reason api.TaskReason, code int32, msg string) uint64 {
	return o.a.out.add(PodReport{
		PodID:      p.want.ID,
		Generation: p.want.Generation,
		TaskReport: api.TaskReport{
			TaskID:   p.taskID(),
			State:    state,
			Reason:   reason,
			ExitCode: code,
			Message:  msg,
			Time:     o.a.cfg.Clock.Now(),
		},
	})
}

// countStarting counts d among the pods being started (delta 1) or no
// longer (-1).
func (o *owner) countStarting(d *DesiredPod, delta int) {
	o.stats.Starting += delta
	if d.Tier == cgroup.Online {
		o.stats.StartingOnline += delta
	}
}

// publish makes the running pods and the counters visible to other
// goroutines: the marked pods join or leave the shared list, and the marks
// are cleared.
func (o *owner) publish() {
	o.stats.Generation = o.generation
	a := o.a
	a.mu.Lock()
	for _, s := range o.marked {
		p := s.p
		if p == nil || p.phase != phaseRunning && p.phase != phaseStopping {
			if s.published {
				delete(a.mu.pods, s.id)
				s.published = false
			}
			continue
		}
		s.published = true
		op := overcommit.Pod{ID: p.want.ID, Tier: p.want.Tier, Priority: int(p.want.Priority), StartedAt: p.startedAt,
			Request: podRequest(&p.want), ResourceFile: a.resourceFile(&p.want)}
		a.mu.pods[s.id] = runningPod{op, p.taskID()}
	}
	o.stats.Running = len(a.mu.pods)
	s := o.stats
	s.ReportsAcked, s.ReportErrors, s.TargetErrors = a.mu.stats.ReportsAcked, a.mu.stats.ReportErrors, a.mu.stats.TargetErrors
	a.mu.stats = s
	a.mu.Unlock()
	clear(o.marked)
	o.marked = o.marked[:0]
}
