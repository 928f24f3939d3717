package fsm

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
)

// TestForgetJobs runs three jobs of one submit, with idempotency keys, to
// their ends, and forgets them one at a time: a job is forgotten only once
// finished, a forgotten job leaves a marker while its submit record holds
// others, a restart (Load) does not bring it back, and once the last is
// gone the store holds nothing of any of them.
func TestForgetJobs(t *testing.T) {
	q := newSeq(t)
	f, s, apply := q.f, q.s, q.apply
	now := time.Unix(1_800_000_000, 0)
	forget := func(ids ...string) ForgetResult {
		t.Helper()
		r, err := DecodeForgetResult(apply(ForgetJobs(now, ids)))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	reload := func() {
		t.Helper()
		g := New()
		if err := g.Load(s); err != nil {
			t.Fatalf("load: %v", err)
		}
		if a, b := f.dump(), g.dump(); a != b {
			t.Fatalf("loaded state differs:\nlive:\n%s\nloaded:\n%s", a, b)
		}
	}
	q.node(now, api.Capacity{CPU: 4000, Memory: 4 << 30, Ports: 10})
	var specs []api.JobSpec
	for _, key := range []string{"a", "b", "c"} {
		specs = append(specs, api.JobSpec{Name: "j", IdempotencyKey: key, Tasks: []api.TaskGroupSpec{{Name: "work", Count: 2, Pod: api.PodSpec{
			Containers: []api.ContainerSpec{{Image: api.Image{Rootfs: "/r"}, Command: []string{"x"}, Resources: api.Resources{CPU: 100, Memory: 1 << 20}}}}}}})
	}
	cmd, err := SubmitJobs(now, specs)
	if err != nil {
		t.Fatal(err)
	}
	apply(cmd)
	var assign []Assignment
	for _, id := range []string{"j1", "j2"} {
		assign = append(assign, Assignment{Group: GroupKey{Job: id, Group: "work"}, Node: "n1", Count: 2})
	}
	apply(CommitPlan(&Plan{Term: 1, Index: q.index, Now: now, Assignments: assign}))
	if r := forget("j1", "j2", "j3"); r != (ForgetResult{Kept: 3}) {
		t.Fatalf("forgetting running and pending jobs: %+v, want all kept", r)
	}
	if got := f.Forgettable(now.Add(time.Hour), 10); len(got) != 0 {
		t.Fatalf("Forgettable = %v with nothing finished", got)
	}
	end := func(at time.Time, ids ...string) {
		var reps []Report
		for _, id := range ids {
			reps = append(reps, Report{Node: "n1", TaskReport: &api.TaskReport{TaskID: id, State: api.TaskRunning, Reason: api.ReasonStarted, Time: at}},
				Report{Node: "n1", TaskReport: &api.TaskReport{TaskID: id, State: api.TaskSucceeded, Reason: api.ReasonExited, Time: at}})
		}
		apply(UpdateTasks(at, reps))
	}
	end(now.Add(time.Second), "j2/0/0/1", "j2/0/1/1")
	end(now.Add(2*time.Second), "j1/0/0/1", "j1/0/1/1")
	apply(CancelJob(now.Add(3*time.Second), "j3"))
	if got := f.Forgettable(now.Add(2*time.Second), 10); !slices.Equal(got, []string{"j2", "j1"}) {
		t.Fatalf("Forgettable(2s) = %v, want [j2 j1] (in the order they finished)", got)
	}
	if got := f.Forgettable(now.Add(time.Hour), 2); !slices.Equal(got, []string{"j2", "j1"}) {
		t.Fatalf("Forgettable(1h, 2) = %v, want [j2 j1]", got)
	}
	reload()

	if r := forget("j2", "j2", "j9", "nonsense"); r != (ForgetResult{Forgotten: 1, Kept: 3}) {
		t.Fatalf("forget j2: %+v", r)
	}
	if _, ok := f.Job("j2"); ok {
		t.Fatal("j2 still found after it was forgotten")
	}
	if _, ok := s.m[string(numKey(prefixForgotten, 2))]; !ok {
		t.Fatal("no marker for j2 while its submit record holds j1 and j3")
	}
	reload()
	if got := f.Forgettable(now.Add(time.Hour), 10); !slices.Equal(got, []string{"j1", "j3"}) {
		t.Fatalf("Forgettable after forgetting j2 = %v, want [j1 j3]", got)
	}
	// A forgotten job's idempotency key is free again: a new job.
	cmd, err = SubmitJobs(now, specs[1:2])
	if err != nil {
		t.Fatal(err)
	}
	if res, err := DecodeSubmitResult(apply(cmd)); err != nil || res.Jobs[0].ID != "j4" || res.Jobs[0].Existing {
		t.Fatalf("resubmitting key b: %+v, %v; want the new job j4", res, err)
	}
	if r := forget("j1", "j3"); r != (ForgetResult{Forgotten: 2}) {
		t.Fatalf("forget j1 j3: %+v", r)
	}
	reload()
	for k := range s.m {
		if strings.HasPrefix(k, prefixSubmit) && k != string(numKey(prefixSubmit, 4)) ||
			strings.HasPrefix(k, prefixForgotten) || strings.HasPrefix(k, prefixTask) ||
			strings.HasPrefix(k, prefixGroup) || strings.HasPrefix(k, prefixJob) ||
			strings.HasPrefix(k, prefixIdem) && k != string(idemKey("b")) {
			t.Errorf("key %q left after j1 to j3 were forgotten", k)
		}
	}
	if f.mu.jobs.len() != 1 || f.mu.jobs.get(4) == nil {
		t.Fatalf("job table holds %d jobs, want only j4", f.mu.jobs.len())
	}
	// A command naming more than MaxForget jobs, or cut short, is
	// refused whole.
	many := make([]string, MaxForget+1)
	for i := range many {
		many[i] = "j4"
	}
	cut := ForgetJobs(now, []string{"j4"})
	for _, cmd := range [][]byte{ForgetJobs(now, many), cut[:len(cut)-1]} {
		q.index++
		if _, writes, err := s.apply(f, q.index, cmd); err == nil || writes != 0 {
			t.Errorf("a bad forget command: err %v, %d writes; want refused, nothing written", err, writes)
		}
	}
}

// TestForgetUnstoredRecords checks that the records of a job changed since
// the state was last stored, then forgotten, are not stored after its
// records were deleted, and that what is stored loads as the live state.
func TestForgetUnstoredRecords(t *testing.T) {
	q := newSeq(t)
	q.s.keepBack = true
	now := time.Unix(1_800_000_000, 0)
	q.node(now, api.Capacity{CPU: 4000, Memory: 4 << 30, Ports: 10})
	spec := api.JobSpec{Name: "j", Tasks: []api.TaskGroupSpec{{Name: "work", Count: 2, Pod: api.PodSpec{
		Containers: []api.ContainerSpec{{Image: api.Image{Rootfs: "/r"}, Command: []string{"x"}, Resources: api.Resources{CPU: 100, Memory: 1 << 20}}}}}}}
	cmd, err := SubmitJobs(now, []api.JobSpec{spec, spec})
	if err != nil {
		t.Fatal(err)
	}
	q.apply(cmd)
	q.s.store(q.f)
	assign := []Assignment{
		{Group: GroupKey{Job: "j1", Group: "work"}, Node: "n1", Count: 2},
		{Group: GroupKey{Job: "j2", Group: "work"}, Node: "n1", Count: 1},
	}
	q.apply(CommitPlan(&Plan{Term: 1, Index: q.index, Now: now, Assignments: assign}))
	var reps []Report
	for _, id := range []string{"j1/0/0/1", "j1/0/1/1"} {
		reps = append(reps, Report{Node: "n1", TaskReport: &api.TaskReport{TaskID: id, State: api.TaskRunning, Reason: api.ReasonStarted, Time: now}},
			Report{Node: "n1", TaskReport: &api.TaskReport{TaskID: id, State: api.TaskSucceeded, Reason: api.ReasonExited, Time: now}})
	}
	q.apply(UpdateTasks(now, reps))
	if r, err := DecodeForgetResult(q.apply(ForgetJobs(now, []string{"j1"}))); err != nil || r.Forgotten != 1 {
		t.Fatalf("forget j1: %+v, %v", r, err)
	}
	q.s.store(q.f)
	for k := range q.s.m {
		if strings.HasPrefix(k, string(numKey(prefixTask, 1))) || strings.HasPrefix(k, string(numKey(prefixGroup, 1))) {
			t.Errorf("record %q of the forgotten j1 stored", k)
		}
	}
	if _, ok := q.s.m[string(taskRecordKey(nil, taskKey{job: 2}))]; !ok {
		t.Error("the record of j2's placed task was not stored")
	}
	g := New()
	if err := g.Load(q.s); err != nil {
		t.Fatal(err)
	}
	if a, b := q.f.dump(), g.dump(); a != b {
		t.Fatalf("loaded state differs:\nlive:\n%s\nloaded:\n%s", a, b)
	}
}

// TestLoadRefusesForgetMarkers checks that Load refuses the records that
// forgetting never leaves: a marker for a job in no submit record, a
// submit record all of whose jobs are marked, an idempotency key of a
// job that is not there.
func TestLoadRefusesForgetMarkers(t *testing.T) {
	f, s := New(), newMemStore()
	now := time.Unix(1_800_000_000, 0)
	spec := api.JobSpec{Name: "j", Tasks: []api.TaskGroupSpec{{Name: "work", Count: 1, Pod: api.PodSpec{
		Containers: []api.ContainerSpec{{Image: api.Image{Rootfs: "/r"}, Command: []string{"x"}, Resources: api.Resources{CPU: 100, Memory: 1 << 20}}}}}}}
	cmd, err := SubmitJobs(now, []api.JobSpec{spec, spec})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.apply(f, 1, cmd); err != nil {
		t.Fatal(err)
	}
	s.loadRefuses(t, string(numKey(prefixForgotten, 7)), nil)
	s.m[string(numKey(prefixForgotten, 1))] = nil
	s.loadRefuses(t, string(numKey(prefixForgotten, 2)), nil)
	s.loadRefuses(t, string(numKey(prefixForgotten, 2)), []byte{1})
	delete(s.m, string(numKey(prefixForgotten, 1)))
	s.loadRefuses(t, string(idemKey("k")), []byte{0, 0, 0, 0, 0, 0, 0, 9})
	if err := New().Load(s); err != nil {
		t.Fatalf("the store as it was: %v", err)
	}
}

// TestFinishedQueueTrim checks that the finished queue drops forgotten
// jobs only from its head, and gives back their room once they are most
// of it.
func TestFinishedQueueTrim(t *testing.T) {
	var q finishedQueue
	js := make([]job, 3000)
	for i := range js {
		q.push(&js[i])
	}
	js[1].forgotten = true
	q.trim()
	if q.head != 0 {
		t.Fatalf("head %d after forgetting the second job, want 0", q.head)
	}
	for i := range 2000 {
		js[i].forgotten = true
	}
	q.trim()
	if q.head != 0 || len(q.jobs) != 1000 || q.jobs[0] != &js[2000] {
		t.Fatalf("after forgetting 2,000 at the head: head %d, %d jobs; want 0 and 1,000 from job 2,000", q.head, len(q.jobs))
	}
}
