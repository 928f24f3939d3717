package fsm

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/internal/seedtest"
)

// TestTaskRecords checks that a group's tasks are stored taskChunk to a
// record: storing the state writes the records of the tasks that changed
// since, each once whatever how many of its tasks changed, and no other;
// Load reads every task back; and Load refuses a task record that is
// malformed, of another version, or out of place.
func TestTaskRecords(t *testing.T) {
	q := newSeq(t)
	q.s.keepBack = true // store only when the test says
	now := time.Unix(1_800_000_000, 0)
	q.node(now, api.Capacity{CPU: 100_000, Memory: 100 << 30, Ports: 10})
	spec := api.JobSpec{Name: "j", Tasks: []api.TaskGroupSpec{{Name: "a", Count: 200, Pod: api.PodSpec{Containers: []api.ContainerSpec{{
		Image: api.Image{Rootfs: "/r"}, Command: []string{"x"}, Resources: api.Resources{CPU: 100, Memory: 1 << 20}}}}}}}
	spec.SetDefaults()
	cmd, err := SubmitJobs(now, []api.JobSpec{spec})
	if err != nil {
		t.Fatal(err)
	}
	q.apply(cmd)
	recKey := func(index uint32) string { return string(taskRecordKey(nil, taskKey{job: 1, index: index})) }
	// store stores the state and returns the task records it wrote, by
	// first index, with the states of their tasks.
	store := func() map[uint32][]api.TaskState {
		t.Helper()
		q.s.store(q.f)
		written := map[uint32][]api.TaskState{}
		for _, op := range q.s.ops {
			k, ok := strings.CutPrefix(string(op.key), prefixTask)
			if !ok {
				continue
			}
			key, _ := decodeTaskSuffix([]byte(k))
			ts, err := decodeTasks(key, op.val)
			if err != nil {
				t.Fatalf("written task record %x: %v", op.key, err)
			}
			for _, task := range ts {
				written[key.index] = append(written[key.index], task.state)
			}
		}
		return written
	}
	place := func(count int64) {
		q.apply(CommitPlan(&Plan{Term: 1, Index: q.index, Now: now, Assignments: []Assignment{
			{Group: GroupKey{Job: "j1", Group: "a"}, Node: "n1", Count: count}}}))
	}
	run := func(indexes ...int) {
		var rs []Report
		for _, i := range indexes {
			rs = append(rs, Report{Node: "n1", TaskReport: &api.TaskReport{TaskID: fmt.Sprintf("j1/0/%d/1", i), State: api.TaskRunning, Reason: api.ReasonStarted, Time: now}})
		}
		q.apply(UpdateTasks(now, rs))
	}
	states := func(n int, s api.TaskState, rest ...api.TaskState) []api.TaskState {
		return append(slices.Repeat([]api.TaskState{s}, n), rest...)
	}
	assigned, running := api.TaskAssigned, api.TaskRunning

	if got := store(); len(got) != 0 {
		t.Fatalf("a submit wrote task records %v", got)
	}
	place(70)
	run(0, 1, 65)
	want := map[uint32][]api.TaskState{
		0:  append([]api.TaskState{running, running}, states(62, assigned)...),
		64: {assigned, running, assigned, assigned, assigned, assigned},
	}
	if got := store(); !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("after placing 70 tasks: wrote %v, want %v", got, want)
	}
	run(66, 67)
	want = map[uint32][]api.TaskState{64: {assigned, running, running, running, assigned, assigned}}
	if got := store(); !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("after two reports of the second record's tasks: wrote %v, want %v", got, want)
	}
	place(130)
	run(199)
	want = map[uint32][]api.TaskState{
		64:  append([]api.TaskState{assigned, running, running, running}, states(60, assigned)...),
		128: states(64, assigned),
		192: states(7, assigned, running),
	}
	if got := store(); !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("after placing the other 130: wrote %v, want %v", got, want)
	}
	if got := store(); len(got) != 0 {
		t.Fatalf("storing again with nothing changed wrote %v", got)
	}
	var keys []string
	for k := range q.s.m {
		if strings.HasPrefix(k, prefixTask) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if wantKeys := []string{recKey(0), recKey(64), recKey(128), recKey(192)}; !slices.Equal(keys, wantKeys) {
		t.Fatalf("task keys %x, want %x", keys, wantKeys)
	}
	loaded := New()
	if err := loaded.Load(q.s); err != nil {
		t.Fatal(err)
	}
	if a, b := q.f.dump(), loaded.dump(); a != b {
		t.Fatalf("loaded state differs:\nlive:\n%s\nloaded:\n%s", a, b)
	}

	first := q.s.m[recKey(0)]
	_, err = decodeTasks(taskKey{job: 1, index: 1}, q.s.m[recKey(192)])
	if want := "task record j1/0/1: 8 tasks (want 1 to 64, from an index that is a multiple of 64)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a record under index 1: %v; want %q", err, want)
	}
	for _, tc := range []struct {
		name, key string
		rec       []byte
	}{
		{"version 2", recKey(0), append([]byte{2}, first[1:]...)},
		{"no tasks", recKey(0), []byte{taskRecordVersion, 0}},
		{"more tasks than a record holds", recKey(0), encodeTasks(nil, slices.Repeat(q.f.mu.jobs.get(1).groups[0].tasks[:1], taskChunk+1))},
		{"a first index not a multiple of the record's size", recKey(1), q.s.m[recKey(192)]},
		{"a gap before the record", recKey(256), q.s.m[recKey(192)]},
		{"the first record short of full", recKey(0), q.s.m[recKey(192)]},
		{"a count past the bytes", recKey(0), []byte{taskRecordVersion, 200, 1}},
		{"truncated", recKey(0), first[:len(first)-1]},
		{"trailing bytes", recKey(0), append(slices.Clone(first), 0)},
		{"an unknown state", recKey(192), func() []byte {
			rec := encodeTasks(nil, q.f.mu.jobs.get(1).groups[0].tasks[192:])
			// version, count, one node name (its length, "n1"), the
			// first task's attempt, then its state
			rec[7] = 99
			return rec
		}()},
		{"a node past the names", recKey(192), func() []byte {
			rec := encodeTasks(nil, q.f.mu.jobs.get(1).groups[0].tasks[192:])
			rec[9] = 1 // after the state and the flags: the first task's node, of one named
			return rec
		}()},
		{"a task of a job that does not exist", string(taskRecordKey(nil, taskKey{job: 9})), first},
		{"an active task on an unknown node", recKey(192), func() []byte {
			ts := slices.Clone(q.f.mu.jobs.get(1).groups[0].tasks[192:])
			ts[0] = &task{key: ts[0].key, attempt: 1, state: api.TaskRunning, node: "n9"}
			return encodeTasks(nil, ts)
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q.s.loadRefuses(t, tc.key, tc.rec)
			// What decodeTasks says, where the record alone is wrong.
			why, ok := map[string]string{"an unknown state": "state 99", "a node past the names": "node 1 of 1 named"}[tc.name]
			if !ok {
				return
			}
			k, _ := decodeTaskSuffix([]byte(strings.TrimPrefix(tc.key, prefixTask)))
			if _, err := decodeTasks(k, tc.rec); err == nil || !strings.Contains(err.Error(), why) {
				t.Errorf("decodeTasks: %v; want %q", err, why)
			}
		})
	}
}

// TestTaskRecordRoundTrip checks that a task record reads back every
// field of its tasks, with nodes that repeat near and far apart (the
// encoder looks back a few names only), none, and times that go back as
// well as forward.
func TestTaskRecordRoundTrip(t *testing.T) {
	r := seedtest.Rand(t)
	nodes := []string{"", "n1", "n2", "node-with-a-longer-name", "n3", "n4", "n5", "n6"}
	reasons := []api.TaskReason{"", api.ReasonStarted, "exit code 3"}
	for range 200 {
		n := 1 + r.IntN(taskChunk)
		ts := make([]*task, n)
		for i := range ts {
			ts[i] = &task{
				key:       taskKey{job: 7, group: 1, index: uint32(i)},
				attempt:   1 + r.Uint32N(3),
				state:     api.TaskState(r.IntN(int(api.TaskLost) + 1)),
				node:      nodes[r.IntN(len(nodes))],
				stop:      r.IntN(2) == 0,
				closed:    r.IntN(2) == 0,
				preempted: r.IntN(2) == 0,
				exitCode:  int32(r.IntN(512) - 256),
				reason:    reasons[r.IntN(len(reasons))],
				updated:   1_800_000_000_000_000_000 + r.Int64N(1e12) - 5e11,
			}
			for range r.IntN(3) {
				ts[i].ports = append(ts[i].ports, uint16(1+r.IntN(65535)))
			}
		}
		got, err := decodeTasks(taskKey{job: 7, group: 1}, encodeTasks(nil, ts))
		if err != nil {
			t.Fatal(err)
		}
		for i := range ts {
			if !reflect.DeepEqual(got[i], ts[i]) {
				t.Fatalf("task %d of %d read back as %+v, want %+v", i, n, *got[i], *ts[i])
			}
		}
	}
}
