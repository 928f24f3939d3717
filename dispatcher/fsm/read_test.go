package fsm

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
)

// TestLoadRejectsJobNumberOutOfSequence checks that Load refuses a job
// record numbered 0 or at or beyond the job sequence (jobs are held in a
// table indexed by number) with an error naming the number.
func TestLoadRejectsJobNumberOutOfSequence(t *testing.T) {
	for _, num := range []uint64{0, 3, 1 << 40} {
		st := newMemStore()
		cmd, _ := SubmitJobs(time.Unix(1, 0), benchSpecs(2, true))
		if _, _, err := st.apply(New(), 1, cmd); err != nil {
			t.Fatal(err)
		}
		st.m[string(jobKey(num))] = st.m[string(jobKey(2))]
		err := New().Load(st)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("numbered %d,", num)) {
			t.Errorf("job record numbered %d: Load: %v", num, err)
		}
	}
}

// TestJobsPages checks Jobs' cursor: the jobs after the one named, in
// number order, at most Limit of them.
func TestJobsPages(t *testing.T) {
	st := newMemStore()
	f := New()
	cmd, _ := SubmitJobs(time.Unix(1, 0), benchSpecs(5, true))
	if _, _, err := st.apply(f, 1, cmd); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		after string
		limit int
		want  string
	}{
		{"", 0, "j1 j2 j3 j4 j5"},
		{"j2", 0, "j3 j4 j5"},
		{"j2", 2, "j3 j4"},
		{"j5", 0, ""},
		{"j99", 0, ""},
		{"j18446744073709551615", 0, ""},
		{"not-a-job", 1, "j1"},
	} {
		var ids []string
		for _, j := range f.Jobs(JobFilter{After: tc.after, Limit: tc.limit}) {
			ids = append(ids, j.ID)
		}
		if got := strings.Join(ids, " "); got != tc.want {
			t.Errorf("Jobs(after %q, limit %d) = %q, want %q", tc.after, tc.limit, got, tc.want)
		}
	}
}

// TestLazySpecsConcurrentReads checks that a submitted job's spec, left
// encoded by apply, decodes on first use to the spec submitted, also when
// many readers (node targets, job status) ask at once under the read lock.
func TestLazySpecsConcurrentReads(t *testing.T) {
	f := New()
	var w discard
	now := time.Unix(1_800_000_000, 0)
	c := api.Capacity{CPU: 64000, Memory: 64 << 30, Ports: 100}
	apply := func(index uint64, cmd []byte) {
		t.Helper()
		if _, err := f.apply(&w, index, cmd); err != nil {
			t.Fatalf("apply at %d: %v", index, err)
		}
	}
	must := func(cmd []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	apply(1, must(RegisterNode(now, api.NodeSpec{Name: "n1", Capacity: c, Allocatable: api.Allocatable{Online: c, Offline: c}})))
	specs := benchSpecs(3, true)
	for i := range specs {
		specs[i].Tasks[0].Count = 2
		specs[i].Tasks[0].Pod.Containers[0].Command = []string{"/bin/work", fmt.Sprint(i)}
	}
	want := slices.Clone(specs)
	apply(2, must(SubmitJobs(now, specs)))
	var as []Assignment
	for _, id := range []string{"j1", "j2", "j3"} {
		as = append(as, Assignment{Group: GroupKey{Job: id, Group: "g0"}, Node: "n1", Count: 2})
	}
	apply(3, CommitPlan(&Plan{Term: 1, Index: 2, Now: now, Assignments: as}))

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_, pods, ok := f.NodeTarget("n1")
			if !ok || len(pods) != 6 {
				t.Errorf("node target: ok=%v, %d pods, want 6", ok, len(pods))
				return
			}
			for _, p := range pods {
				i := int(p.Job[1] - '1')
				if !reflect.DeepEqual(p.Pod, want[i].Tasks[0].Pod) {
					t.Errorf("pod of %s: %+v, want %+v", p.TaskID, p.Pod, want[i].Tasks[0].Pod)
				}
			}
			for i, id := range []string{"j1", "j2", "j3"} {
				if st, ok := f.Job(id); !ok || !reflect.DeepEqual(st.Spec, want[i]) {
					t.Errorf("job %s: spec %+v, want %+v", id, st.Spec, want[i])
				}
			}
		})
	}
	wg.Wait()
}

// TestLazySpecsAfterExistingJob checks that a job answered by its
// idempotency key (not created again) does not shift the specs, the fields
// apply copies out of them, or the task groups the jobs after it in the
// same command get.
func TestLazySpecsAfterExistingJob(t *testing.T) {
	f := New()
	var w discard
	now := time.Unix(1_800_000_000, 0)
	specs := benchSpecs(3, true)
	for i := range specs {
		c := &specs[i].Tasks[0].Pod.Containers[0]
		c.Command = []string{"/bin/work", fmt.Sprint(i)}
		c.Resources.CPU = int64(1000 * (i + 1))
		specs[i].Queue, specs[i].Priority = fmt.Sprint("q", i), int32(i)
		specs[i].Tasks[0].Name = fmt.Sprint("g", i)
	}
	specs[0].IdempotencyKey = "first"
	first, err := SubmitJobs(now, specs[:1])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.apply(&w, 1, first); err != nil {
		t.Fatal(err)
	}
	// The same first job again (answered as existing), then two new ones.
	want := slices.Clone(specs)
	cmd, err := SubmitJobs(now, specs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.apply(&w, 2, cmd); err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"j1", "j2", "j3"} {
		st, ok := f.Job(id)
		if !ok || !reflect.DeepEqual(st.Spec, want[i]) {
			t.Fatalf("job %s: spec %+v, want %+v", id, st.Spec, want[i])
		}
		j := f.mu.jobs.get(uint64(i + 1))
		if g := j.groups[0]; g.demand.CPU != int64(1000*(i+1)) || g.name != want[i].Tasks[0].Name {
			t.Errorf("job %s: group %q with demand %+v, want %q with %d millicores", id, g.name, g.demand, want[i].Tasks[0].Name, 1000*(i+1))
		}
		if !reflect.DeepEqual(j.jobFields, fieldsOf(&want[i])) {
			t.Errorf("job %s: fields %+v, want %+v", id, j.jobFields, fieldsOf(&want[i]))
		}
	}
}

// TestNodeGenerationRecord checks that a node's target generation is kept
// in a record of its own, written when its target changes (the node's
// record, with its spec, is not rewritten), that Load reads it back, and
// that Load refuses a generation record that is malformed or names no
// node, and a node record of another version.
func TestNodeGenerationRecord(t *testing.T) {
	st := newMemStore()
	f := New()
	now := time.Unix(1, 0)
	index := uint64(0)
	apply := func(cmd []byte, err error) map[string]bool {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		index++
		if _, _, err := st.apply(f, index, cmd); err != nil {
			t.Fatal(err)
		}
		written := map[string]bool{}
		for _, op := range st.ops {
			written[string(op.key)] = true
		}
		return written
	}
	c := api.Capacity{CPU: 4000, Memory: 8 << 30}
	apply(RegisterNode(now, api.NodeSpec{Name: "n1", Capacity: c, Allocatable: api.Allocatable{Online: c, Offline: c}}))
	apply(SubmitJobs(now, benchSpecs(1, true)))
	written := apply(CommitPlan(&Plan{Term: 1, Now: now, Assignments: []Assignment{{Group: GroupKey{Job: "j1", Group: "g0"}, Node: "n1", Count: 2}}}), nil)
	nodeRec, genRec := string(nodeKey("n1")), string(appendGenKey(nil, "n1"))
	if written[nodeRec] || !written[genRec] {
		t.Fatalf("a plan wrote the node record: %v, its generation: %v; want false, true", written[nodeRec], written[genRec])
	}
	gen, _ := f.NodeGeneration("n1")
	loaded := New()
	if err := loaded.Load(st); err != nil {
		t.Fatal(err)
	}
	if g, _ := loaded.NodeGeneration("n1"); g != gen || gen == 0 {
		t.Fatalf("loaded generation %d, want %d (not 0)", g, gen)
	}
	for _, tc := range []struct {
		name, key string
		rec       []byte
	}{
		{"generation of 7 bytes", genRec, make([]byte, 7)},
		{"generation of an unknown node", string(appendGenKey(nil, "n2")), make([]byte, 8)},
		{"node record version 1", nodeRec, append([]byte{1}, st.m[nodeRec][1:]...)},
	} {
		t.Run(tc.name, func(t *testing.T) { st.loadRefuses(t, tc.key, tc.rec) })
	}
}

// TestJobFacts checks the facts job tokens rest on: an appmaster (with a
// task group or not) is one, a plain job and a capbox set are not, the
// submit time is the command's, and a cancelled job has ended; and that
// AppmasterPods names only the pods of appmaster jobs that have not
// ended, never a capbox or a task in one.
func TestJobFacts(t *testing.T) {
	st := newMemStore()
	f := New()
	specs := benchSpecs(3, true)
	specs[0].Appmaster = true
	specs[2].Appmaster, specs[2].Tasks = true, nil
	cmd, err := SubmitJobs(time.Unix(7, 5), specs)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.apply(f, 1, cmd); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]JobFacts{
		"j1": {Submitted: 7_000_000_005, Appmaster: true},
		"j2": {Submitted: 7_000_000_005},
		"j3": {Submitted: 7_000_000_005, Appmaster: true},
	} {
		if got, ok := f.JobFacts(id); !ok || got != want {
			t.Errorf("JobFacts(%s) = %+v, %v; want %+v", id, got, ok, want)
		}
	}
	for _, id := range []string{"j4", "j0", "x", ""} {
		if _, ok := f.JobFacts(id); ok {
			t.Errorf("JobFacts(%q) found a job", id)
		}
	}
	pods := []api.TargetPod{
		{Job: "j1"}, {Job: "j1"}, {Job: "j1", Capbox: true}, {Job: "j1", InCapbox: "j9/0/0/1"},
		{Job: "j2"}, {Job: "j99"}, {Job: "j1"},
	}
	named := func() []int {
		var out []int
		f.AppmasterPods(pods, func(i int, j JobFacts) {
			if j.Submitted != 7_000_000_005 {
				t.Errorf("pod %d: facts %+v", i, j)
			}
			out = append(out, i)
		})
		return out
	}
	if got := named(); !slices.Equal(got, []int{0, 1, 6}) {
		t.Errorf("AppmasterPods named %v, want [0 1 6]", got)
	}
	if _, _, err := st.apply(f, 2, CancelJob(time.Unix(8, 0), "j1")); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.JobFacts("j1"); !got.Ended {
		t.Errorf("a cancelled job's facts %+v: not ended", got)
	}
	if got := named(); len(got) != 0 {
		t.Errorf("AppmasterPods named %v of an ended job", got)
	}
}
