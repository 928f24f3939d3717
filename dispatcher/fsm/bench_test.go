package fsm

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
)

const benchN = 10_000

// benchNodes returns an FSM (applying to a writer that keeps nothing, so
// that only the FSM's own work is measured) with nodes nodes of 64 cores
// named node-00000 on, a function that applies a command to it, and the
// commands' clock.
func benchNodes(b *testing.B, nodes int) (*FSM, func([]byte, error), time.Time) {
	f := New()
	w := &discard{}
	now := time.Unix(1_800_000_000, 0)
	must := func(cmd []byte, err error) {
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.apply(w, 1, cmd); err != nil {
			b.Fatal(err)
		}
	}
	for i := range nodes {
		c := api.Capacity{CPU: 64_000, Memory: 256 << 30, Ports: 100}
		must(RegisterNode(now, api.NodeSpec{Name: fmt.Sprintf("node-%05d", i), Capacity: c, Allocatable: api.Allocatable{Online: c, Offline: c}}))
	}
	return f, must, now
}

// benchState returns an FSM (applying to a writer that keeps nothing, so
// that only the FSM's own work is measured) with 1,000 nodes and jobs
// totalling benchN pending tasks, and a plan placing them all, one task per
// assignment.
func benchState(b *testing.B, perAssignment int64) (*FSM, *Plan) {
	const nodes = 1000
	f, must, now := benchNodes(b, nodes)
	var specs []api.JobSpec
	for range 10 {
		specs = append(specs, api.JobSpec{Name: "array", Tasks: []api.TaskGroupSpec{{Count: benchN / 10, Pod: api.PodSpec{Containers: []api.ContainerSpec{{
			Image: api.Image{Rootfs: "/img"}, Command: []string{"/bin/work"},
			Resources: api.Resources{CPU: 500, Memory: 1 << 30}}}}}}})
	}
	must(SubmitJobs(now, specs))
	p := &Plan{Term: 1, Now: now}
	for i := range benchN / perAssignment {
		p.Assignments = append(p.Assignments, Assignment{
			Group: GroupKey{Job: jobID(uint64(1 + i*perAssignment/(benchN/10))), Group: "g0"},
			Node:  fmt.Sprintf("node-%05d", i%nodes), Count: perAssignment,
		})
	}
	return f, p
}

func BenchmarkApplyPlan(b *testing.B) {
	for _, per := range []int64{1, 10} {
		b.Run(fmt.Sprintf("tasks-per-assignment=%d", per), func(b *testing.B) {
			var w discard
			var cmd []byte
			for b.Loop() {
				b.StopTimer()
				f, p := benchState(b, per)
				cmd = CommitPlan(p)
				runtime.GC()
				b.StartTimer()
				res, err := f.apply(&w, 2, cmd)
				if err != nil {
					b.Fatal(err)
				}
				f.writeDeferred(&w) // the records, as the next stored state writes them
				b.StopTimer()
				if r, _ := DecodePlanResult(res); r.Placed != benchN {
					b.Fatalf("placed %d: %v", r.Placed, r.Rejected[:1])
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchN), "ns/task")
			b.ReportMetric(float64(len(cmd))*float64(per)/benchN, "cmd-bytes/assignment")
			b.ReportMetric(float64(w.n)/float64(b.N*benchN), "written-bytes/task")
		})
	}
}

func BenchmarkApplyUpdates(b *testing.B) {
	var w discard
	var cmd []byte
	for b.Loop() {
		b.StopTimer()
		f, p := benchState(b, 1)
		if _, err := f.apply(&w, 2, CommitPlan(p)); err != nil {
			b.Fatal(err)
		}
		reps := make([]Report, 0, benchN)
		f.eachTaskLocked(func(t *task) {
			reps = append(reps, Report{Node: t.node, TaskReport: &api.TaskReport{TaskID: taskID(t.key, t.attempt), State: api.TaskRunning, Reason: api.ReasonStarted, Time: p.Now}})
		})
		// The dispatcher batches reports as nodes send them: each node's
		// together.
		slices.SortStableFunc(reps, func(a, b Report) int { return strings.Compare(a.Node, b.Node) })
		cmd = UpdateTasks(p.Now, reps)
		w.n = 0
		runtime.GC()
		b.StartTimer()
		res, err := f.apply(&w, 3, cmd)
		if err != nil {
			b.Fatal(err)
		}
		f.writeDeferred(&w)
		b.StopTimer()
		if r, _ := DecodeUpdateResult(res); r.Applied != benchN {
			b.Fatalf("applied %+v", r)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchN), "ns/report")
	b.ReportMetric(float64(len(cmd))/benchN, "cmd-bytes/report")
}

// BenchmarkNodeTargetChanges measures the FSM's part of the leader's
// answer to a node's long-poll after a plan: the pods of the changes since
// the node's last target, five new pods on each of 1,000 nodes that run
// five already, as the second plan's change set journals them.
func BenchmarkNodeTargetChanges(b *testing.B) {
	f, p := benchState(b, 1)
	second := *p
	p.Assignments, second.Assignments = p.Assignments[:benchN/2], p.Assignments[benchN/2:]
	if _, err := f.apply(&discard{}, 2, CommitPlan(p)); err != nil {
		b.Fatal(err)
	}
	changes := map[string][]TaskAttempt{}
	defer f.Subscribe(func(c *Changes) {
		for _, tc := range c.TargetChanges {
			name := c.TargetNodes[tc.Node].Name
			changes[name] = append(changes[name], tc.TaskAttempt())
		}
	})()
	if _, err := f.apply(&discard{}, 3, CommitPlan(&second)); err != nil {
		b.Fatal(err)
	}
	if len(changes) != len(f.mu.nodes) {
		b.Fatalf("%d nodes journaled, want %d", len(changes), len(f.mu.nodes))
	}
	pods := 0
	b.ReportAllocs()
	for b.Loop() {
		for name, list := range changes {
			_, added, removed, ok := f.NodeTargetChanges(name, list)
			if !ok || len(removed) != 0 {
				b.Fatalf("node %s: ok %v, removed %v", name, ok, removed)
			}
			pods += len(added)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(pods), "ns/pod")
}

// benchSpecs returns n specs of a typical small job, each with its own name
// and argument, with defaults applied when defaulted (as the dispatcher's
// leader proposes them, after decoding a request) or as a Go caller might
// build them.
func benchSpecs(n int, defaulted bool) []api.JobSpec {
	specs := make([]api.JobSpec, n)
	for i := range specs {
		specs[i] = api.JobSpec{Name: fmt.Sprintf("job-%d", i), Tasks: []api.TaskGroupSpec{{Count: 100, Pod: api.PodSpec{Containers: []api.ContainerSpec{{
			Image: api.Image{Rootfs: "/img"}, Command: []string{"/bin/work", fmt.Sprintf("--part=%d", i)}, Env: map[string]string{"A": "b"},
			Resources: api.Resources{CPU: 500, Memory: 1 << 30}}}}}}}
		if defaulted {
			specs[i].SetDefaults()
		}
	}
	return specs
}

// BenchmarkSubmit measures applying a submit command of 1,000 jobs:
// decoding, defaults, validation and records, per job.
func BenchmarkSubmit(b *testing.B) {
	for _, defaulted := range []bool{true, false} {
		b.Run(fmt.Sprintf("defaulted=%v", defaulted), func(b *testing.B) {
			specs := benchSpecs(1000, defaulted)
			cmd, err := SubmitJobs(time.Unix(1, 0), specs)
			if err != nil {
				b.Fatal(err)
			}
			var w discard
			for b.Loop() {
				f := New()
				if _, err := f.apply(&w, 1, cmd); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(specs)), "ns/job")
			b.ReportMetric(float64(len(cmd))/float64(len(specs)), "cmd-bytes/job")
			b.ReportMetric(float64(w.n)/float64(b.N*len(specs)), "written-bytes/job")
		})
	}
}

// BenchmarkSubmitMillion measures submitting a million jobs to one FSM, in
// a thousand commands of a thousand: BenchmarkSubmit's work plus what
// growing state costs (tables, the collector over a growing heap).
func BenchmarkSubmitMillion(b *testing.B) {
	cmd, err := SubmitJobs(time.Unix(1, 0), benchSpecs(1000, true))
	if err != nil {
		b.Fatal(err)
	}
	var w discard
	for b.Loop() {
		f := New()
		for i := range 1000 {
			if _, err := f.apply(&w, uint64(1+i), cmd); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1_000_000), "ns/job")
}

// BenchmarkSubmitEncode measures SubmitJobs on the leader, per job.
func BenchmarkSubmitEncode(b *testing.B) {
	specs := benchSpecs(1000, true)
	for b.Loop() {
		if _, err := SubmitJobs(time.Unix(1, 0), specs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(specs)), "ns/job")
}

// BenchmarkEncodeTasks measures a full task record's encoding, its tasks
// on one node each (spread) or ten to a node (packed).
func BenchmarkEncodeTasks(b *testing.B) {
	for _, per := range []int{1, 10} {
		b.Run(fmt.Sprintf("tasks-per-node=%d", per), func(b *testing.B) {
			ts := make([]*task, taskChunk)
			for i := range ts {
				ts[i] = &task{attempt: 1, state: api.TaskRunning, node: fmt.Sprintf("node-%05d", i/per),
					reason: api.ReasonStarted, updated: 1_800_000_000_000_000_000 + int64(i/per)*1e6}
			}
			var buf []byte
			for b.Loop() {
				buf = encodeTasks(buf, ts)
			}
			b.ReportMetric(float64(len(buf))/taskChunk, "bytes/task")
		})
	}
}

// BenchmarkRetainedJobs measures the heap a finished job holds while it
// is retained (dispatcher.Config.JobRetention, JobRetentionMax): jobs of
// one task and of 100 (benchSpecs' spec) are submitted, placed, run and
// succeed; the heap after a collection, less the heap before the submit,
// is reported per job.
func BenchmarkRetainedJobs(b *testing.B) {
	for _, c := range []struct{ jobs, tasks int64 }{{20_000, 1}, {1_000, 100}} {
		b.Run(fmt.Sprintf("tasks=%d", c.tasks), func(b *testing.B) {
			var perJob float64
			for b.Loop() {
				b.StopTimer()
				f, must, now := benchNodes(b, 100)
				specs := benchSpecs(int(c.jobs), true)
				for i := range specs {
					specs[i].Tasks[0].Count = c.tasks
					specs[i].Tasks[0].Pod.Containers[0].Resources = api.Resources{CPU: 10, Memory: 1 << 20}
				}
				cmd, err := SubmitJobs(now, specs)
				if err != nil {
					b.Fatal(err)
				}
				before := heapInUse()
				b.StartTimer()
				must(cmd, nil)
				p := &Plan{Term: 1, Now: now}
				for i := range c.jobs {
					p.Assignments = append(p.Assignments, Assignment{
						Group: GroupKey{Job: jobID(uint64(1 + i)), Group: specs[i].Tasks[0].Name},
						Node:  fmt.Sprintf("node-%05d", i%100), Count: c.tasks,
					})
				}
				must(CommitPlan(p), nil)
				for _, st := range []api.TaskState{api.TaskRunning, api.TaskSucceeded} {
					var reps []Report
					f.eachTaskLocked(func(t *task) {
						reps = append(reps, Report{Node: t.node, TaskReport: &api.TaskReport{TaskID: taskID(t.key, t.attempt), State: st, Reason: api.ReasonExited, Time: now}})
					})
					slices.SortStableFunc(reps, func(a, b Report) int { return strings.Compare(a.Node, b.Node) })
					for len(reps) > 0 {
						n := min(len(reps), 20_000)
						must(UpdateTasks(now, reps[:n]), nil)
						reps = reps[n:]
					}
				}
				f.writeDeferred(&discard{})
				b.StopTimer()
				if got := len(f.Forgettable(now.Add(time.Hour), int(c.jobs)+1)); got != int(c.jobs) {
					b.Fatalf("%d jobs finished of %d", got, c.jobs)
				}
				perJob = float64(heapInUse()-before) / float64(c.jobs)
				// What was alive at the first reading is alive at the second.
				runtime.KeepAlive(f)
				runtime.KeepAlive(specs)
				runtime.KeepAlive(cmd)
				b.StartTimer()
			}
			b.ReportMetric(perJob, "heap-bytes/job")
		})
	}
}

// heapInUse returns the heap's live bytes after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// BenchmarkPlaceDynamicPorts measures a plan that places tasks of one
// dynamic port each on one node of the default port range, as many as
// fit in it: each task's port is assigned as the plan is applied.
func BenchmarkPlaceDynamicPorts(b *testing.B) {
	for _, tasks := range []int64{100, 2_000} {
		b.Run(fmt.Sprintf("tasks=%d", tasks), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				f, w, now := New(), &discard{}, time.Unix(1_800_000_000, 0)
				must := func(cmd []byte, err error) {
					if err != nil {
						b.Fatal(err)
					}
					if _, err := f.apply(w, 1, cmd); err != nil {
						b.Fatal(err)
					}
				}
				c := api.Capacity{CPU: 1 << 40, Memory: 1 << 50, Ports: api.DefaultPortRange.Size()}
				must(RegisterNode(now, api.NodeSpec{Name: "n1", Capacity: c, Allocatable: api.Allocatable{Online: c, Offline: c}, Ports: api.DefaultPortRange}))
				spec := api.JobSpec{Name: "ports", Tasks: []api.TaskGroupSpec{{Name: "g", Count: tasks, Pod: api.PodSpec{Containers: []api.ContainerSpec{{
					Image: api.Image{Rootfs: "/img"}, Command: []string{"/bin/work"},
					Resources: api.Resources{CPU: 1, Memory: 1, Ports: []api.Port{{Name: "http"}}}}}}}}}
				spec.SetDefaults()
				must(SubmitJobs(now, []api.JobSpec{spec}))
				plan := &Plan{Term: 1, Now: now, Assignments: []Assignment{{Group: GroupKey{Job: jobID(1), Group: "g"}, Node: "n1", Count: tasks}}}
				b.StartTimer()
				must(CommitPlan(plan), nil)
			}
		})
	}
}

// BenchmarkQueueCounts measures the cluster summary over 100,000 jobs of
// one group each, per job, and the longest hold of the lock (one chunk).
func BenchmarkQueueCounts(b *testing.B) {
	cmd, err := SubmitJobs(time.Unix(1, 0), benchSpecs(1000, true))
	if err != nil {
		b.Fatal(err)
	}
	var w discard
	f := New()
	for i := range 100 {
		if _, err := f.apply(&w, uint64(1+i), cmd); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if qs := f.QueueCounts(); len(qs) != 1 || qs[0].Tasks.Count != 100*1000*100 {
			b.Fatalf("QueueCounts = %+v", qs)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100_000), "ns/job")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)*queueCountChunk/100_000/1000, "µs/chunk")
}
