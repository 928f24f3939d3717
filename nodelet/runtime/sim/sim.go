package sim

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/nodelet/runtime"
)

// Host is a simulated machine: the pods of every Runtime over it.
type Host struct {
	mu struct {
		sync.Mutex
		pods   map[string]*pod // guarded by mu
		closed bool
		// ends holds the running pods with a run time, by when it is
		// over: the clock goroutine ends them then. stale counts the
		// pods in it that ended sooner (stopped, or the host closed),
		// which stay until their time or a compaction.
		ends  endQueue
		stale int
		// clock is set once the clock goroutine has started.
		clock bool
	}
	// kick wakes the clock goroutine: the earliest end moved sooner, or
	// the host closed.
	kick chan struct{}
	// clockDone is closed when the clock goroutine has returned.
	clockDone chan struct{}
	// clock is the host's time: pods' start, end and run times.
	clock clock.Clock
	// epoch is what the queue's times count from.
	epoch time.Time
}

type pod struct {
	spec     runtime.PodSpec // the caller's, which Start may keep
	started  time.Time
	finished time.Time
	queued   bool // in Host.mu.ends
	// ended: exit is set, and immutable from then on.
	ended bool
	exit  runtime.Exit
	// done is closed when the pod ends; it is made for the first waiter
	// (doneLocked): a pod nobody waits for needs none.
	done chan struct{}
	// notify are the callbacks of Notify waiting for the pod's end.
	notify []func(runtime.Exit)
	// oneNotify and oneExit hold the first callback and a one-container
	// pod's container exit, in place rather than in allocations of
	// their own; neither changes once the pod has ended.
	oneNotify [1]func(runtime.Exit)
	oneExit   [1]runtime.ContainerExit
}

// doneLocked returns a channel that is closed when p ends.
func (p *pod) doneLocked() <-chan struct{} {
	if p.done == nil {
		p.done = make(chan struct{})
		if p.ended {
			close(p.done)
		}
	}
	return p.done
}

// NewHost returns an empty host on the system clock.
func NewHost() *Host { return NewHostOn(clock.System{}) }

// NewHostOn returns an empty host whose pods start, run and end on c.
func NewHostOn(c clock.Clock) *Host {
	h := &Host{clock: c, epoch: c.Now(), kick: make(chan struct{}, 1), clockDone: make(chan struct{})}
	h.mu.pods = map[string]*pod{}
	return h
}

// Close ends every running pod (code 137, as if the machine lost power)
// and waits for the clock goroutine to return.
func (h *Host) Close() {
	h.mu.Lock()
	h.mu.closed = true
	for _, p := range h.mu.pods {
		if fns := h.endLocked(p, 137); fns != nil {
			go callNotify(p, fns)
		}
	}
	clock := h.mu.clock
	h.mu.Unlock()
	if clock {
		h.wake()
		<-h.clockDone
	}
}

// wake wakes the clock goroutine, unless a wake is pending.
func (h *Host) wake() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// addEndLocked queues p, which has a run time, for the clock goroutine,
// starting that goroutine with the host's first such pod.
func (h *Host) addEndLocked(p *pod) {
	at := int64(p.started.Sub(h.epoch))
	if run := int64(p.spec.Sim.RunTime); run > math.MaxInt64-at {
		at = math.MaxInt64 // centuries: it never ends by itself
	} else {
		at += run
	}
	h.mu.ends.push(end{at: at, p: p})
	p.queued = true
	switch {
	case !h.mu.clock:
		h.mu.clock = true
		go h.runClock()
	case h.mu.ends[0].p == p:
		h.wake()
	}
}

// runClock ends the pods whose run time is over, then sleeps until the
// next one's is, until the host closes. It calls the ended pods'
// callbacks itself, outside the mutex: one goroutine a host, where a
// timer per pod started a goroutine per pod's end.
func (h *Host) runClock() {
	defer close(h.clockDone)
	timer := clock.NewAlarm(h.clock)
	defer timer.Stop()
	type ended struct {
		p   *pod
		fns []func(runtime.Exit)
	}
	var due []ended
	for {
		h.mu.Lock()
		if h.mu.closed {
			h.mu.Unlock()
			return
		}
		now := int64(clock.Since(h.clock, h.epoch))
		for len(h.mu.ends) > 0 && h.mu.ends[0].at <= now {
			p := h.mu.ends.pop().p
			p.queued = false
			if p.ended {
				h.mu.stale--
				continue
			}
			if fns := h.endLocked(p, p.spec.Sim.ExitCode); fns != nil {
				due = append(due, ended{p, fns})
			}
		}
		next := time.Duration(-1)
		if len(h.mu.ends) > 0 {
			next = time.Duration(h.mu.ends[0].at - now)
		}
		h.mu.Unlock()
		for _, e := range due {
			callNotify(e.p, e.fns)
		}
		clear(due)
		due = due[:0]
		if next >= 0 {
			timer.Set(next)
		} else {
			timer.Stop()
		}
		select {
		case <-timer.C:
		case <-h.kick:
		}
	}
}

// end is a queued pod and when its run time is over, in nanoseconds
// since the host's epoch: the heap compares times without reaching into
// the pods, which lie all over memory.
type end struct {
	at int64
	p  *pod
}

// endQueue is a min-heap of ends by time. It is not a container/heap:
// that boxes each pushed value, an allocation a pod.
type endQueue []end

func (q *endQueue) push(e end) {
	*q = append(*q, e)
	q.up(len(*q) - 1)
}

func (q *endQueue) pop() end {
	old := *q
	e, last := old[0], len(old)-1
	old[0] = old[last]
	old[last] = end{}
	*q = old[:last]
	q.down(0)
	return e
}

func (q endQueue) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if q[parent].at <= q[i].at {
			return
		}
		q[parent], q[i] = q[i], q[parent]
		i = parent
	}
}

func (q endQueue) down(i int) {
	for {
		least, l := i, 2*i+1
		if l < len(q) && q[l].at < q[least].at {
			least = l
		}
		if r := l + 1; r < len(q) && q[r].at < q[least].at {
			least = r
		}
		if least == i {
			return
		}
		q[i], q[least] = q[least], q[i]
		i = least
	}
}

// maxStale is how many ended pods a host's queue may hold before it is
// compacted, when they are also more than half of it.
const maxStale = 64

// compactLocked drops the pods that ended sooner from the queue.
func (h *Host) compactLocked() {
	q := h.mu.ends[:0]
	for _, e := range h.mu.ends {
		if !e.p.ended {
			q = append(q, e)
		} else {
			e.p.queued = false
		}
	}
	clear(h.mu.ends[len(q):])
	h.mu.ends, h.mu.stale = q, 0
	for i := len(q)/2 - 1; i >= 0; i-- {
		q.down(i)
	}
}

// endLocked ends p with code unless it has ended, and returns the
// callbacks waiting for its end, which the caller calls once it has let go
// of the lock (callNotify).
func (h *Host) endLocked(p *pod, code int) []func(runtime.Exit) {
	if p.ended {
		return nil
	}
	p.exit = runtime.Exit{Code: code, Containers: p.oneExit[:]}
	if len(p.spec.Containers) != 1 {
		p.exit.Containers = make([]runtime.ContainerExit, len(p.spec.Containers))
	}
	for i, c := range p.spec.Containers {
		p.exit.Containers[i] = runtime.ContainerExit{Name: c.Name, Code: code}
	}
	p.ended, p.finished = true, h.clock.Now()
	if p.queued { // ended sooner than its run time
		h.mu.stale++
		if h.mu.stale > maxStale && 2*h.mu.stale > len(h.mu.ends) {
			h.compactLocked()
		}
	}
	if p.done != nil {
		close(p.done)
	}
	fns := p.notify
	p.notify = nil
	return fns
}

// callNotify calls fns with p's exit.
func callNotify(p *pod, fns []func(runtime.Exit)) {
	for _, fn := range fns {
		fn(p.exit) // immutable once set
	}
}

// Runtime is a runtime.Runtime over a Host.
type Runtime struct {
	h  *Host
	mu struct {
		sync.Mutex
		closed bool
	}
}

var (
	_ runtime.Runtime   = (*Runtime)(nil)
	_ runtime.Notifier  = (*Runtime)(nil)
	_ runtime.Immediate = (*Runtime)(nil)
	_ runtime.Meter     = (*Runtime)(nil)
)

// New returns a Runtime over h.
func New(h *Host) *Runtime { return &Runtime{h: h} }

func (r *Runtime) check() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.closed {
		return runtime.ErrClosed
	}
	return nil
}

// Immediate implements runtime.Immediate: Start and Remove only change
// the host's map.
func (r *Runtime) Immediate() {}

// Start implements runtime.Runtime.
func (r *Runtime) Start(ctx context.Context, spec runtime.PodSpec) error {
	if err := r.check(); err != nil {
		return err
	}
	if err := spec.Validate(); err != nil {
		return fmt.Errorf("start pod %q: %w", spec.ID, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("start pod %q: %w", spec.ID, err)
	}
	h := r.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.closed {
		return fmt.Errorf("start pod %q: host closed: %w", spec.ID, runtime.ErrClosed)
	}
	if _, ok := h.mu.pods[spec.ID]; ok {
		return fmt.Errorf("start pod %q: %w", spec.ID, runtime.ErrExists)
	}
	p := &pod{spec: spec, started: h.clock.Now()}
	h.mu.pods[spec.ID] = p
	if p.spec.Sim != nil {
		h.addEndLocked(p)
	}
	return nil
}

func (r *Runtime) get(op, id string) (*pod, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	r.h.mu.Lock()
	defer r.h.mu.Unlock()
	return r.getLocked(op, id)
}

// getLocked is get with the host's lock held, for a caller that changes
// the pod's entry under the same lock.
func (r *Runtime) getLocked(op, id string) (*pod, error) {
	p, ok := r.h.mu.pods[id]
	if !ok {
		return nil, fmt.Errorf("%s pod %q: %w", op, id, runtime.ErrNotFound)
	}
	return p, nil
}

// Wait implements runtime.Runtime.
func (r *Runtime) Wait(ctx context.Context, id string) (runtime.Exit, error) {
	p, err := r.get("wait", id)
	if err != nil {
		return runtime.Exit{}, err
	}
	select {
	case <-r.done(p):
		return p.exit, nil // immutable once done is closed
	case <-ctx.Done():
		return runtime.Exit{}, fmt.Errorf("wait pod %q: %w", id, ctx.Err())
	}
}

// Stop implements runtime.Runtime: the pod obeys SIGTERM at once.
func (r *Runtime) Stop(ctx context.Context, id string, grace time.Duration) error {
	p, err := r.get("stop", id)
	if err != nil {
		return err
	}
	r.h.mu.Lock()
	fns := r.h.endLocked(p, 128+15)
	r.h.mu.Unlock()
	if fns != nil {
		go callNotify(p, fns)
	}
	return nil
}

// Notify implements runtime.Notifier.
func (r *Runtime) Notify(id string, fn func(runtime.Exit)) error {
	p, err := r.get("notify", id)
	if err != nil {
		return err
	}
	r.h.mu.Lock()
	ended := p.ended
	if !ended {
		if p.notify == nil {
			p.notify = p.oneNotify[:0]
		}
		p.notify = append(p.notify, fn)
	}
	r.h.mu.Unlock()
	if ended {
		go fn(p.exit)
	}
	return nil
}

// done returns a channel that is closed when p ends.
func (r *Runtime) done(p *pod) <-chan struct{} {
	r.h.mu.Lock()
	defer r.h.mu.Unlock()
	return p.doneLocked()
}

// Remove implements runtime.Runtime.
func (r *Runtime) Remove(ctx context.Context, id string) error {
	if err := r.check(); err != nil {
		return err
	}
	r.h.mu.Lock()
	defer r.h.mu.Unlock()
	p, err := r.getLocked("remove", id)
	if err != nil {
		return err
	}
	if !p.ended {
		return fmt.Errorf("remove pod %q: %w", id, runtime.ErrRunning)
	}
	delete(r.h.mu.pods, id)
	return nil
}

// List implements runtime.Runtime.
func (r *Runtime) List(ctx context.Context) ([]runtime.PodStatus, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	r.h.mu.Lock()
	defer r.h.mu.Unlock()
	out := make([]runtime.PodStatus, 0, len(r.h.mu.pods))
	for _, id := range slices.Sorted(maps.Keys(r.h.mu.pods)) {
		p := r.h.mu.pods[id]
		st := runtime.PodStatus{
			ID: id, Generation: p.spec.Generation, CgroupParent: p.spec.CgroupParent,
			State: runtime.StateRunning, StartedAt: p.started,
		}
		if p.ended {
			e := p.exit
			st.State, st.FinishedAt, st.Exit = runtime.StateExited, p.finished, &e
		}
		out = append(out, st)
	}
	return out, nil
}

// Usage implements runtime.Meter: a running pod uses what its SimSpec's
// Usage says at now (nothing without one). A closed Runtime reports no pod.
func (r *Runtime) Usage(id string, now time.Time) (api.Usage, bool) {
	if r.check() != nil {
		return api.Usage{}, false
	}
	r.h.mu.Lock()
	defer r.h.mu.Unlock()
	p, ok := r.h.mu.pods[id]
	if !ok || p.ended {
		return api.Usage{}, false
	}
	if p.spec.Sim == nil {
		return api.Usage{}, true
	}
	return p.spec.Sim.Usage.At(now), true
}

// Spec returns the spec pod id was started with, as Start was given it
// (the runtime may share its memory with the caller's: do not modify it).
func (r *Runtime) Spec(id string) (runtime.PodSpec, error) {
	p, err := r.get("spec", id)
	if err != nil {
		return runtime.PodSpec{}, err
	}
	return p.spec, nil
}

// Logs implements runtime.Runtime: simulated pods print nothing, so the
// reader is empty; with Follow it ends when the pod does.
func (r *Runtime) Logs(ctx context.Context, id, container string, opts runtime.LogOptions) (io.ReadCloser, error) {
	p, err := r.get("logs", id)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(p.spec.Containers, func(c runtime.ContainerSpec) bool { return c.Name == container }) {
		return nil, fmt.Errorf("logs pod %q container %q: %w", id, container, runtime.ErrNotFound)
	}
	if !opts.Follow {
		return io.NopCloser(strings.NewReader("")), nil
	}
	return &waitReader{ctx: ctx, done: r.done(p)}, nil
}

// waitReader is an empty reader that reaches EOF when done closes.
type waitReader struct {
	ctx  context.Context
	done <-chan struct{}
}

func (w *waitReader) Read([]byte) (int, error) {
	select {
	case <-w.done:
		return 0, io.EOF
	case <-w.ctx.Done():
		return 0, w.ctx.Err()
	}
}

func (w *waitReader) Close() error { return nil }

// Close implements runtime.Runtime; the pods keep running on the Host.
func (r *Runtime) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.closed = true
	return nil
}
