package fsm

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/internal/seedtest"
)

// historyJob is a job of groups "a" and "b", count tasks each, without
// retries, named name in queue q with a label.
func historyJob(name, q string, count int64) api.JobSpec {
	pod := api.PodSpec{Containers: []api.ContainerSpec{{Image: api.Image{Rootfs: "/r"}, Command: []string{"x"},
		Resources: api.Resources{CPU: 100, Memory: 1 << 20}}}}
	return api.JobSpec{Name: name, Queue: q, Labels: map[string]string{"team": "data", "run": name},
		Retry: api.RetryPolicy{MaxAttempts: 1},
		Tasks: []api.TaskGroupSpec{{Name: "a", Count: count, Pod: pod}, {Name: "b", Count: count, Pod: pod}}}
}

func taskReport(id string, st api.TaskState, reason api.TaskReason, exit int32) Report {
	return Report{Node: "n1", TaskReport: &api.TaskReport{TaskID: id, State: st, Reason: reason, ExitCode: exit}}
}

// TestHistorySummary runs a job to a failure (a task failed, then one
// lost, the rest succeeded) and cancels another, forgets both to history
// and a third without: each summary holds the job's name, queue, labels,
// times, final state, counts and first failure, survives a Load, and a
// job forgotten without history leaves none.
func TestHistorySummary(t *testing.T) {
	q := newSeq(t)
	t0 := time.Unix(1_800_000_000, 0).UTC()
	q.node(t0, api.Capacity{CPU: 4000, Memory: 4 << 30, Ports: 10})
	q.submit(t0, historyJob("etl", "batch", 2), historyJob("dropped", "adhoc", 2), historyJob("quiet", "batch", 1))
	t1 := t0.Add(time.Second)
	q.plan(t1, Assignment{Group: GroupKey{Job: "j1", Group: "a"}, Node: "n1", Count: 2})
	t2 := t0.Add(2 * time.Second)
	q.plan(t2, Assignment{Group: GroupKey{Job: "j1", Group: "b"}, Node: "n1", Count: 2},
		Assignment{Group: GroupKey{Job: "j3", Group: "a"}, Node: "n1", Count: 1},
		Assignment{Group: GroupKey{Job: "j2", Group: "a"}, Node: "n1", Count: 1})
	t3, t4, t5 := t0.Add(3*time.Second), t0.Add(4*time.Second), t0.Add(5*time.Second)
	var running []Report
	for _, id := range []string{"j1/0/0/1", "j1/0/1/1", "j1/1/0/1", "j1/1/1/1", "j2/0/0/1", "j3/0/0/1"} {
		running = append(running, taskReport(id, api.TaskRunning, api.ReasonStarted, 0))
	}
	q.apply(UpdateTasks(t2, running))
	q.apply(UpdateTasks(t3, []Report{taskReport("j1/0/1/1", api.TaskFailed, api.ReasonExited, 3), taskReport("j1/0/0/1", api.TaskSucceeded, api.ReasonExited, 0)}))
	q.apply(UpdateTasks(t4, []Report{taskReport("j1/1/0/1", api.TaskLost, api.ReasonLost, 0), taskReport("j3/0/0/1", api.TaskSucceeded, api.ReasonExited, 0)}))
	q.apply(CancelJob(t4, "j2"))
	q.apply(UpdateTasks(t5, []Report{taskReport("j1/1/1/1", api.TaskSucceeded, api.ReasonExited, 0), taskReport("j2/0/0/1", api.TaskKilled, api.ReasonStopped, 0)}))
	if r, err := DecodeForgetResult(q.apply(ForgetJobsToHistory(t5, []string{"j1", "j2", "j3"}))); err != nil || r != (ForgetResult{Forgotten: 2, Kept: 1}) {
		t.Fatalf("forget to history: %+v, %v; want j1 and j2 forgotten, j3 (running) kept", r, err)
	}
	want1 := JobStatus{ID: "j1", State: JobFailed, History: true, Submitted: t0, Started: t1, Ended: t5,
		Spec:         api.JobSpec{Name: "etl", Queue: "batch", Labels: map[string]string{"team": "data", "run": "etl"}},
		Totals:       GroupStatus{Count: 4, Succeeded: 2, Failed: 2},
		FirstFailure: &TaskFailure{TaskID: "j1/0/1/1", State: api.TaskFailed, Reason: api.ReasonExited, ExitCode: 3, At: t3}}
	want2 := JobStatus{ID: "j2", State: JobCancelled, History: true, Submitted: t0, Started: t2, Ended: t5,
		Spec:   api.JobSpec{Name: "dropped", Queue: "adhoc", Labels: map[string]string{"team": "data", "run": "dropped"}},
		Totals: GroupStatus{Count: 4, Killed: 4}}
	check := func(f *FSM, when string) {
		t.Helper()
		for _, want := range []JobStatus{want1, want2} {
			got, ok := f.Summary(want.ID)
			if !ok || !reflect.DeepEqual(got, want) {
				t.Errorf("%s: Summary(%s) = %+v %+v, %v;\nwant %+v %+v", when, want.ID, got, got.FirstFailure, ok, want, want.FirstFailure)
			}
		}
		if _, ok := f.Summary("j3"); ok {
			t.Errorf("%s: a summary of j3, which is not forgotten", when)
		}
	}
	check(q.f, "applied")
	g := New()
	if err := g.Load(q.s); err != nil {
		t.Fatal(err)
	}
	check(g, "loaded")
	if a, b := q.f.dump(), g.dump(); a != b {
		t.Fatalf("loaded state differs:\nlive:\n%s\nloaded:\n%s", a, b)
	}
	// A job forgotten without history leaves no summary.
	q.apply(CancelJob(t5, "j3"))
	if r, _ := DecodeForgetResult(q.apply(ForgetJobs(t5, []string{"j3"}))); r.Forgotten != 1 {
		t.Fatalf("forget j3: %+v", r)
	}
	if _, ok := q.f.Summary("j3"); ok || q.f.HistoryLen() != 2 {
		t.Errorf("j3 forgotten without history: summary %v, %d summaries; want none of it, 2", ok, q.f.HistoryLen())
	}
	// Unknown flags refuse the command whole.
	bad := append(ForgetJobs(t5, []string{"j9"}), 2)
	q.index++
	if _, writes, err := q.s.apply(q.f, q.index, bad); !errors.Is(err, ErrCorrupt) || writes != 0 {
		t.Errorf("a forget command with unknown flags: %v, %d writes; want ErrCorrupt, none", err, writes)
	}
}

// TestHistoryPrune keeps summaries of jobs that end a minute apart and
// prunes them by age and by count: what HistoryPrunable names is those of
// the jobs that ended first, and PruneHistory drops exactly those named.
func TestHistoryPrune(t *testing.T) {
	q := newSeq(t)
	t0 := time.Unix(1_800_000_000, 0).UTC()
	var specs []api.JobSpec
	for range 6 {
		specs = append(specs, historyJob("j", "batch", 1))
	}
	q.submit(t0, specs...)
	// Cancelled before any task ran, each ends at its submit: all at t0,
	// so they end in number order, whatever the order they are forgotten
	// in.
	for i := range 6 {
		q.apply(CancelJob(t0, jobID(uint64(i+1))))
	}
	q.apply(ForgetJobsToHistory(t0, []string{"j4", "j2", "j6"}))
	q.apply(ForgetJobsToHistory(t0, []string{"j1", "j5", "j3"}))
	if n := q.f.HistoryLen(); n != 6 {
		t.Fatalf("%d summaries, want 6", n)
	}
	if got := q.f.HistoryPrunable(t0.Add(-time.Nanosecond), -1, 10); len(got) != 0 {
		t.Errorf("prunable before the ends: %v, want none", got)
	}
	if got := q.f.HistoryPrunable(t0, -1, 4); !slices.Equal(got, []string{"j1", "j2", "j3", "j4"}) {
		t.Errorf("prunable at the ends, 4 at most: %v", got)
	}
	if got := q.f.HistoryPrunable(t0.Add(-time.Hour), 4, 10); !slices.Equal(got, []string{"j1", "j2"}) {
		t.Errorf("prunable beyond 4: %v, want [j1 j2]", got)
	}
	r, err := DecodePruneResult(q.apply(PruneHistory(t0, []string{"j2", "j1", "j2", "j9", "x"})))
	if err != nil || r != (PruneResult{Pruned: 2, Kept: 3}) {
		t.Fatalf("prune: %+v, %v", r, err)
	}
	got := q.f.Jobs(JobFilter{})
	var ids []string
	for _, j := range got {
		ids = append(ids, j.ID)
	}
	if !slices.Equal(ids, []string{"j3", "j4", "j5", "j6"}) {
		t.Errorf("listed after pruning: %v", ids)
	}
	g := New()
	if err := g.Load(q.s); err != nil {
		t.Fatal(err)
	}
	if a, b := q.f.dump(), g.dump(); a != b {
		t.Fatalf("loaded state differs:\nlive:\n%s\nloaded:\n%s", a, b)
	}
	many := make([]string, MaxForget+1)
	q.index++
	if _, writes, err := q.s.apply(q.f, q.index, PruneHistory(t0, many)); err == nil || writes != 0 {
		t.Errorf("prune of %d jobs: %v, %d writes; want refused, none written", len(many), err, writes)
	}
}

// TestHistoryListing lists live jobs and summaries together by number,
// with filters by state, queue and scope, a page at a time.
func TestHistoryListing(t *testing.T) {
	q := newSeq(t)
	t0 := time.Unix(1_800_000_000, 0).UTC()
	var specs []api.JobSpec
	for i := range 10 {
		specs = append(specs, historyJob("j", []string{"a", "b"}[i%2], 1))
	}
	q.submit(t0, specs...)
	for _, id := range []string{"j2", "j3", "j5", "j8", "j9"} { // cancelled, and forgotten but j9
		q.apply(CancelJob(t0, id))
	}
	q.apply(ForgetJobsToHistory(t0, []string{"j2", "j3", "j5", "j8"}))
	list := func(f JobFilter) (ids []string) {
		for _, j := range q.f.Jobs(f) {
			if j.History {
				ids = append(ids, j.ID+"h")
			} else {
				ids = append(ids, j.ID)
			}
		}
		return ids
	}
	for _, c := range []struct {
		f    JobFilter
		want []string
	}{
		{JobFilter{}, []string{"j1", "j2h", "j3h", "j4", "j5h", "j6", "j7", "j8h", "j9", "j10"}},
		{JobFilter{Limit: 3}, []string{"j1", "j2h", "j3h"}},
		{JobFilter{After: "j3", Limit: 3}, []string{"j4", "j5h", "j6"}},
		{JobFilter{After: "j7", Limit: 3}, []string{"j8h", "j9", "j10"}},
		{JobFilter{After: "j10"}, nil},
		{JobFilter{States: []JobState{JobCancelled}}, []string{"j2h", "j3h", "j5h", "j8h", "j9"}},
		{JobFilter{States: []JobState{JobCancelled}, Queue: "a"}, []string{"j3h", "j5h", "j9"}},
		{JobFilter{States: []JobState{JobPending}}, []string{"j1", "j4", "j6", "j7", "j10"}},
		{JobFilter{History: NoHistory, Limit: 2, After: "j1"}, []string{"j4", "j6"}},
		{JobFilter{History: OnlyHistory, After: "j2"}, []string{"j3h", "j5h", "j8h"}},
		{JobFilter{History: OnlyHistory, Queue: "b", Limit: 1}, []string{"j2h"}},
	} {
		if got := list(c.f); !slices.Equal(got, c.want) {
			t.Errorf("Jobs(%+v) = %v, want %v", c.f, got, c.want)
		}
	}
}

// TestHistoryLoadRefusesCorrupt: a summary record of a bad version, cut
// short, of a job that is not forgotten, or numbered beyond the jobs,
// fails Load with ErrCorrupt.
func TestHistoryLoadRefusesCorrupt(t *testing.T) {
	q := newSeq(t)
	t0 := time.Unix(1_800_000_000, 0).UTC()
	q.submit(t0, historyJob("x", "a", 1), historyJob("y", "a", 1))
	q.apply(CancelJob(t0, "j1"))
	q.apply(ForgetJobsToHistory(t0, []string{"j1"}))
	key := string(numKey(prefixHistory, 1))
	good := q.s.m[key]
	if good == nil {
		t.Fatal("no summary record of j1")
	}
	bad := append([]byte{9}, good[1:]...)
	q.s.loadRefuses(t, key, bad)
	q.s.loadRefuses(t, key, good[:len(good)-1])
	q.s.loadRefuses(t, string(numKey(prefixHistory, 2)), good)
	q.s.loadRefuses(t, string(numKey(prefixHistory, 3)), good)
	q.s.loadRefuses(t, prefixHistory+"x", good)
}

// TestSpecHead checks that the name, queue and labels a summary takes
// from an encoded spec are the decoded spec's, on random specs.
func TestSpecHead(t *testing.T) {
	g := specGen{seedtest.Rand(t)}
	for i := range 300 {
		s := g.job()
		s.SetDefaults()
		var e enc
		appendSpec(&e, &s)
		j := &job{specEnc: string(e.b)}
		name, queue, labels := specHead(j)
		var want enc
		appendStrMap(&want, s.Labels)
		if name != s.Name || queue != s.Queue || labels != string(want.b) {
			t.Fatalf("spec %d: head %q %q %x; want %q %q %x", i, name, queue, labels, s.Name, s.Queue, want.b)
		}
	}
}

// TestHistoryWatched: a job forgotten with a summary changes, for the
// watch, to its summary at the forgetting command's index (Summarized,
// AppendChangedJobs, AppendJobChanges); one forgotten without a summary,
// or whose summary is pruned, leaves (Forgotten, a zero ChangedJob); a
// load makes the loaded index the summaries' last change, as the jobs'.
func TestHistoryWatched(t *testing.T) {
	q := newSeq(t)
	var last Changes
	defer q.f.Subscribe(func(c *Changes) {
		if c.Kind == ChangeApplied {
			last = Changes{Index: c.Index, Forgotten: slices.Clone(c.Forgotten), Summarized: slices.Clone(c.Summarized)}
		}
	})()
	t0 := time.Unix(1_800_000_000, 0).UTC()
	q.submit(t0, historyJob("a", "", 1), historyJob("b", "", 1), historyJob("c", "", 1), historyJob("d", "", 1))
	for _, id := range []string{"j1", "j2", "j3"} {
		q.apply(CancelJob(t0, id))
	}
	q.apply(ForgetJobsToHistory(t0, []string{"j2", "j1"}))
	forgot := q.index
	if !slices.Equal(last.Forgotten, []uint64{1, 2}) || !slices.Equal(last.Summarized, []uint64{1, 2}) || last.Index != forgot {
		t.Fatalf("forget to history: change set %+v, want j1 and j2 forgotten and summarized at %d", last, forgot)
	}
	q.apply(ForgetJobs(t0, []string{"j3"}))
	if !slices.Equal(last.Forgotten, []uint64{3}) || len(last.Summarized) != 0 {
		t.Fatalf("forget without history: change set %+v, want j3 forgotten, none summarized", last)
	}
	got := q.f.AppendChangedJobs(nil, []uint64{1, 2, 3, 4})
	if got[0].Changed != forgot || !got[0].History || got[0].ID != "j1" || got[1].Changed != forgot || !got[1].History {
		t.Errorf("summaries as changed jobs: %+v, %+v; want history at %d", got[0], got[1], forgot)
	}
	if got[2].ID != "" || got[2].Changed != 0 || got[3].History || got[3].ID != "j4" {
		t.Errorf("j3 (no summary) %+v, j4 (live) %+v", got[2], got[3])
	}
	q.apply(PruneHistory(t0, []string{"j1"}))
	if !slices.Equal(last.Forgotten, []uint64{1}) || len(last.Summarized) != 0 {
		t.Fatalf("prune: change set %+v, want j1 forgotten", last)
	}
	if got := q.f.AppendChangedJobs(nil, []uint64{1}); got[0].ID != "" || got[0].Changed != 0 {
		t.Errorf("j1 pruned: %+v, want a zero ChangedJob", got[0])
	}
	changes, _ := q.f.AppendJobChanges(nil)
	if !slices.Contains(changes, JobChange{Job: 2, Index: forgot}) || slices.ContainsFunc(changes, func(c JobChange) bool { return c.Job == 1 || c.Job == 3 }) {
		t.Errorf("job changes %+v: want j2 at %d, neither j1 nor j3", changes, forgot)
	}
	g := New()
	if err := g.Load(q.s); err != nil {
		t.Fatal(err)
	}
	changes, _ = g.AppendJobChanges(nil)
	if !slices.Contains(changes, JobChange{Job: 2, Index: q.index}) {
		t.Errorf("loaded job changes %+v: want j2 at the loaded index %d", changes, q.index)
	}
}
