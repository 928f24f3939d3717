package nodelet_test

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet"
	"github.com/sluicehq/sluice/nodelet/cgroup"
	"github.com/sluicehq/sluice/nodelet/runtime/sim"
)

// loopDispatcher plays the dispatcher for one agent in a closed loop: it
// keeps inFlight pods in the agent's target, and for each pod the agent
// reports ended it removes the pod and adds a new one, until it has
// added quota, as the dispatcher's targets do (changes since the last
// target). ended counts the ended pods of every loopDispatcher sharing it.
type loopDispatcher struct {
	node  string
	ended *endCount
	mu    sync.Mutex
	// failed counts the pods that ended otherwise than succeeded; failure
	// is the first one's report.
	failed  int
	failure string
	// gen is the generation of the last target returned; added and
	// removed are the changes since.
	gen      uint64
	added    []nodelet.DesiredPod
	removed  []string
	next     int // pods made so far
	quota    int
	inTarget map[string]bool // task IDs in the target
	changed  chan struct{}   // closed when added or removed grows
}

// endCount counts ended pods and closes done once they reach want.
type endCount struct {
	n    atomic.Int64
	want int64
	once sync.Once
	done chan struct{}
}

func newEndCount(want int64) *endCount { return &endCount{want: want, done: make(chan struct{})} }

func (e *endCount) add(n int64) {
	if e.n.Add(n) >= e.want {
		e.once.Do(func() { close(e.done) })
	}
}

func newLoopDispatcher(node string, quota, inFlight int, ended *endCount) *loopDispatcher {
	d := &loopDispatcher{node: node, ended: ended, quota: quota, inTarget: map[string]bool{}, changed: make(chan struct{})}
	for range min(inFlight, quota) {
		d.addLocked()
	}
	return d
}

// addLocked adds a new pod that ends as soon as it starts.
func (d *loopDispatcher) addLocked() {
	id := fmt.Sprintf("%s-j%d-0-%d", d.node, d.next/16, d.next%16)
	d.next++
	d.inTarget[id] = true
	d.added = append(d.added, benchDesired(id))
}

// benchDesired is the benchmark's desired pod named id.
func benchDesired(id string) nodelet.DesiredPod {
	return nodelet.DesiredPod{ID: id, TaskID: id, Generation: 1, Tier: cgroup.Offline, Priority: 10, Pod: &benchPod}
}

// benchPod is a loadgen task's spec, defaulted as the api does, that ends
// at once: the pods of the benchmark share it, as the pods of a task group
// do.
var benchPod = api.PodSpec{
	Containers: []api.ContainerSpec{{Name: "c0", Image: api.Image{Rootfs: "/sim"}, Command: []string{"/bin/work"},
		Resources: api.Resources{CPU: 500, Memory: 256 << 20}}},
	Sim: &api.SimSpec{RunTime: api.Duration(time.Nanosecond)},
}

func (d *loopDispatcher) Target(ctx context.Context, node string, known uint64) (nodelet.Target, error) {
	for {
		d.mu.Lock()
		if known == 0 || len(d.added) > 0 || len(d.removed) > 0 {
			t := nodelet.Target{Generation: d.gen + 1, Base: known, Pods: d.added, Removed: d.removed}
			if known == 0 {
				t.Base, t.Removed = 0, nil
				t.Pods = t.Pods[:0:0]
				for id := range d.inTarget {
					t.Pods = append(t.Pods, benchDesired(id))
				}
			}
			d.gen++
			d.added, d.removed = nil, nil
			d.mu.Unlock()
			return t, nil
		}
		ch := d.changed
		d.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nodelet.Target{}, ctx.Err()
		}
	}
}

func (d *loopDispatcher) Report(ctx context.Context, node string, rs []nodelet.PodReport) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var ended int64
	for _, r := range rs {
		if !r.State.Done() || !d.inTarget[r.TaskID] {
			continue
		}
		ended++
		if r.State != api.TaskSucceeded {
			if d.failed++; d.failed == 1 {
				d.failure = fmt.Sprintf("%s %s: %s", r.State, r.Reason, r.Message)
			}
		}
		delete(d.inTarget, r.TaskID)
		d.removed = append(d.removed, r.PodID)
		if d.next < d.quota {
			d.addLocked()
		}
	}
	if ended > 0 {
		close(d.changed)
		d.changed = make(chan struct{})
		d.ended.add(ended)
	}
	return nil
}

// cpuTime is the CPU time the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAgentPods measures what a simulated fleet's nodelets spend on a
// pod's life, from the target that adds it, through its start, its
// running and ended reports and its removal from the runtime, to the
// target that drops it: 300 agents on sim hosts, 16 pods in each one's
// target at a time, each pod replaced as soon as it is reported ended.
// cpu-ns/pod is the process's CPU time (both cores) per pod; allocs/pod
// and B/pod the process's allocations.
func BenchmarkAgentPods(b *testing.B) {
	const agents, inFlight = 300, 16
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	quota := max(b.N/agents, 1)
	want := int64(quota * agents)
	ended := newEndCount(want)
	var wg sync.WaitGroup
	var disps []*loopDispatcher
	for i := range agents {
		host := sim.NewHost()
		d := newLoopDispatcher(fmt.Sprintf("n%d", i), quota, inFlight, ended)
		disps = append(disps, d)
		a, err := nodelet.New(nodelet.Config{Node: d.node, Runtime: sim.New(host), Dispatcher: d})
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			defer host.Close()
			if err := a.Run(ctx); err != nil && ctx.Err() == nil {
				b.Errorf("agent %s: %v", d.node, err)
			}
		})
	}
	b.ResetTimer()
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	cpu := cpuTime(b)
	<-ended.done
	b.StopTimer()
	cpu = cpuTime(b) - cpu
	goruntime.ReadMemStats(&after)
	b.ReportMetric(float64(cpu)/float64(want), "cpu-ns/pod")
	b.ReportMetric(float64(b.Elapsed())/float64(want), "ns/pod")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(want), "allocs/pod")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(want), "B/pod")
	b.ReportMetric(0, "ns/op")
	cancel()
	wg.Wait()
	for _, d := range disps {
		if d.failed > 0 {
			b.Fatalf("%s: %d pods did not succeed, the first: %s", d.node, d.failed, d.failure)
		}
	}
}
