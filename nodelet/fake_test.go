package nodelet_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet"
	"github.com/sluicehq/sluice/nodelet/runtime"
)

// fakeDispatcher serves a target set by the test and records reports.
type fakeDispatcher struct {
	mu      sync.Mutex
	target  nodelet.Target
	changed chan struct{} // closed when the target changes
	// diffs: answer a known generation that is the last one returned
	// with the changes since (nodelet.Target.Base); wrongBase: answer
	// that many of those with a Base the agent does not hold.
	diffs     bool
	wrongBase int
	returned  nodelet.Target // the last target returned, whole
	// sentDiffs and sentWrong count the answers of changes, and those of
	// them with a wrong Base.
	sentDiffs, sentWrong int
	reports              []nodelet.PodReport
	failReports          int // fail this many Report calls next
	reportCalls          int
}

func newFakeDispatcher() *fakeDispatcher { return &fakeDispatcher{changed: make(chan struct{})} }

func (f *fakeDispatcher) setTarget(gen uint64, pods ...nodelet.DesiredPod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.target = nodelet.Target{Generation: gen, Pods: pods}
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeDispatcher) Target(ctx context.Context, node string, known uint64) (nodelet.Target, error) {
	for {
		f.mu.Lock()
		t, ch := f.target, f.changed
		f.mu.Unlock()
		if t.Generation != known && t.Generation != 0 {
			return f.answer(t, known), nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nodelet.Target{}, ctx.Err()
		}
	}
}

// answer returns t, or its changes since the target returned last when
// f.diffs and known is that one's generation.
func (f *fakeDispatcher) answer(t nodelet.Target, known uint64) nodelet.Target {
	f.mu.Lock()
	defer f.mu.Unlock()
	prev := f.returned
	f.returned = t
	if !f.diffs || known == 0 || known != prev.Generation {
		return t
	}
	out := nodelet.Target{Generation: t.Generation, Base: known}
	f.sentDiffs++
	if f.wrongBase > 0 {
		f.wrongBase--
		f.sentWrong++
		out.Base = known + 1000
	}
	was := map[string]nodelet.DesiredPod{}
	for _, p := range prev.Pods {
		was[p.ID] = p
	}
	for _, p := range t.Pods {
		if w, ok := was[p.ID]; !ok || !reflect.DeepEqual(w, p) {
			out.Pods = append(out.Pods, p)
		}
		delete(was, p.ID)
	}
	for id := range was {
		out.Removed = append(out.Removed, id)
	}
	return out
}

func (f *fakeDispatcher) Report(ctx context.Context, node string, rs []nodelet.PodReport) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reportCalls++
	if f.failReports > 0 {
		f.failReports--
		return errors.New("fake: dispatcher unavailable")
	}
	f.reports = append(f.reports, rs...)
	return nil
}

func (f *fakeDispatcher) failNext(n int) {
	f.mu.Lock()
	f.failReports = n
	f.mu.Unlock()
}

func (f *fakeDispatcher) allReports() []nodelet.PodReport {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reports)
}

// find returns the reports of pod id in state s.
func (f *fakeDispatcher) find(id string, s api.TaskState) []nodelet.PodReport {
	var out []nodelet.PodReport
	for _, r := range f.allReports() {
		if r.PodID == id && r.State == s {
			out = append(out, r)
		}
	}
	return out
}

// countingRuntime counts Start calls per pod ID and generation and can
// make chosen starts fail.
type countingRuntime struct {
	runtime.Runtime
	mu     sync.Mutex
	starts map[string]int
	fail   map[string]error
}

func newCounting(rt runtime.Runtime) *countingRuntime {
	return &countingRuntime{Runtime: rt, starts: map[string]int{}, fail: map[string]error{}}
}

func (c *countingRuntime) Start(ctx context.Context, spec runtime.PodSpec) error {
	c.mu.Lock()
	c.starts[fmt.Sprintf("%s/%d", spec.ID, spec.Generation)]++
	err := c.fail[spec.ID]
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return c.Runtime.Start(ctx, spec)
}

// notifyingRuntime is a countingRuntime over a runtime.Notifier that
// passes Notify on, so that the agent uses it.
type notifyingRuntime struct{ *countingRuntime }

func (n notifyingRuntime) Notify(id string, fn func(runtime.Exit)) error {
	return n.Runtime.(runtime.Notifier).Notify(id, fn)
}

// immediateRuntime and immediateNotifyingRuntime say they are a
// runtime.Immediate (the sim runtime under them is), so that the agent
// calls Start and Remove from its loop.
type (
	immediateRuntime          struct{ *countingRuntime }
	immediateNotifyingRuntime struct{ notifyingRuntime }
)

func (immediateRuntime) Immediate()          {}
func (immediateNotifyingRuntime) Immediate() {}

func (c *countingRuntime) startCounts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.starts))
	for k, v := range c.starts {
		out[k] = v
	}
	return out
}

// eventually polls cond until it holds, and fails tb if d passes first:
// for the state of the runtime's pods, processes and the agent's
// goroutines, which nothing signals as a whole.
func eventually(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	if !poll(d, 2*time.Millisecond, cond) {
		tb.Fatalf("timed out after %v waiting for %s", d, what)
	}
}

// poll tests cond every interval until it holds, and reports whether it
// did before d passed.
func poll(d, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
	return true
}

// listed returns the runtime's pods by ID.
func listed(t *testing.T, rt runtime.Runtime) map[string]runtime.PodStatus {
	t.Helper()
	l, err := rt.List(context.Background())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	m := make(map[string]runtime.PodStatus, len(l))
	for _, s := range l {
		m[s.ID] = s
	}
	return m
}

// running returns the IDs (with generation) of the runtime's running pods.
func running(t *testing.T, rt runtime.Runtime) []string {
	var out []string
	for id, s := range listed(t, rt) {
		if s.State == runtime.StateRunning {
			out = append(out, fmt.Sprintf("%s/%d", id, s.Generation))
		}
	}
	slices.Sort(out)
	return out
}
