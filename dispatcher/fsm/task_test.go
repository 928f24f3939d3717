package fsm

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
)

// TestTask finds a task by the ID of any of its attempts and answers with
// the current attempt.
func TestTask(t *testing.T) {
	q := newSeq(t)
	f, apply := q.f, q.apply
	now := time.Unix(1_800_000_000, 0)
	q.node(now, api.Capacity{CPU: 4000, Memory: 4 << 30, Ports: 10})
	spec := api.JobSpec{Name: "j", Retry: api.RetryPolicy{MaxAttempts: 3, Backoff: api.Duration(time.Second)},
		Tasks: []api.TaskGroupSpec{{Name: "work", Count: 2, Pod: api.PodSpec{Containers: []api.ContainerSpec{{
			Image: api.Image{Rootfs: "/r"}, Command: []string{"x"}, Resources: api.Resources{CPU: 100, Memory: 1 << 20}}}}}}}
	spec.SetDefaults()
	cmd, err := SubmitJobs(now, []api.JobSpec{spec})
	if err != nil {
		t.Fatal(err)
	}
	apply(cmd)
	if _, ok := f.Task("j1/0/0/1"); ok {
		t.Fatal("a task never placed was found")
	}
	plan := func(at time.Time, count int64) {
		apply(CommitPlan(&Plan{Term: 1, Index: q.index, Now: at, Assignments: []Assignment{
			{Group: GroupKey{Job: "j1", Group: "work"}, Node: "n1", Count: count}}}))
	}
	plan(now, 2)
	got, ok := f.Task("j1/0/1/1")
	if !ok || got.ID != "j1/0/1/1" || got.Group != "work" || got.Index != 1 || got.Attempt != 1 ||
		got.State != api.TaskAssigned || got.Node != "n1" {
		t.Fatalf("Task(j1/0/1/1) = %+v, %v", got, ok)
	}
	apply(UpdateTasks(now, []Report{
		{Node: "n1", TaskReport: &api.TaskReport{TaskID: "j1/0/0/1", State: api.TaskRunning, Reason: api.ReasonStarted, Time: now}},
		{Node: "n1", TaskReport: &api.TaskReport{TaskID: "j1/0/0/1", State: api.TaskFailed, Reason: api.ReasonExited, ExitCode: 3, Time: now}},
	}))
	got, ok = f.Task("j1/0/0/1")
	if !ok || got.State != api.TaskFailed || got.ExitCode != 3 || got.Attempt != 1 {
		t.Fatalf("after the failure: Task(j1/0/0/1) = %+v, %v", got, ok)
	}
	plan(now.Add(time.Minute), 1) // the retry, after its backoff
	for _, id := range []string{"j1/0/0/1", "j1/0/0/2", "j1/0/0/7"} {
		got, ok = f.Task(id)
		if !ok || got.ID != "j1/0/0/2" || got.Attempt != 2 || got.State != api.TaskAssigned {
			t.Fatalf("after the retry: Task(%s) = %+v, %v", id, got, ok)
		}
	}
	for _, id := range []string{"", "j1", "j1/0/0", "j2/0/0/1", "j1/1/0/1", "j1/0/5/1", "x/0/0/1", "j1/0/0/1/2", "j01/0/0/1"} {
		if got, ok := f.Task(id); ok {
			t.Errorf("Task(%q) = %+v, want not found", id, got)
		}
	}
}

// TestJobTasksPaging pages through a job of three groups (the middle one
// never placed) in key order, from any task ID, whole or cut by a limit.
func TestJobTasksPaging(t *testing.T) {
	q := newSeq(t)
	f, apply := q.f, q.apply
	now := time.Unix(1_800_000_000, 0)
	q.node(now, api.Capacity{CPU: 8000, Memory: 8 << 30, Ports: 10})
	group := func(name string, count int64) api.TaskGroupSpec {
		return api.TaskGroupSpec{Name: name, Count: count, Pod: api.PodSpec{Containers: []api.ContainerSpec{{
			Image: api.Image{Rootfs: "/r"}, Command: []string{"x"}, Resources: api.Resources{CPU: 100, Memory: 1 << 20}}}}}
	}
	spec := api.JobSpec{Name: "j", Tasks: []api.TaskGroupSpec{group("a", 3), group("b", 2), group("c", 2)}}
	spec.SetDefaults()
	cmd, err := SubmitJobs(now, []api.JobSpec{spec})
	if err != nil {
		t.Fatal(err)
	}
	apply(cmd)
	apply(CommitPlan(&Plan{Term: 1, Index: q.index, Now: now, Assignments: []Assignment{
		{Group: GroupKey{Job: "j1", Group: "c"}, Node: "n1", Count: 2},
		{Group: GroupKey{Job: "j1", Group: "a"}, Node: "n1", Count: 3},
	}}))
	all := []string{"j1/0/0/1", "j1/0/1/1", "j1/0/2/1", "j1/2/0/1", "j1/2/1/1"}
	for _, tc := range []struct {
		after string
		limit int
		want  []string
	}{
		{"", 0, all},
		{"", 2, all[:2]},
		{"", 3, all[:3]},
		{"", 4, all[:4]},
		{"j1/0/1/1", 0, all[2:]},
		{"j1/0/2/1", 0, all[3:]},
		{"j1/0/2/1", 1, all[3:4]},
		{"j1/0/9/1", 0, all[3:]},
		{"j1/1/0/1", 0, all[3:]},
		{"j1/2/0/5", 0, all[4:]},
		{"j1/2/1/1", 0, nil},
		{"j1/7/0/1", 0, nil},
		{"j1/0/4294967295/1", 0, all[3:]},
		{"j2/0/1/1", 0, all},
		{"junk", 0, all},
	} {
		ts, ok := f.JobTasks("j1", tc.after, tc.limit)
		var got []string
		for _, ti := range ts {
			got = append(got, ti.ID)
		}
		if !ok || !slices.Equal(got, tc.want) {
			t.Errorf("JobTasks(j1, after %q, limit %d) = %v, %v; want %v", tc.after, tc.limit, got, ok, tc.want)
		}
	}
}

// TestReportErrorOwnsItsTaskID checks that a refused report's error still
// names its task once the command's bytes are reused: an update reads its
// reports' task IDs in place, so the error must keep a copy.
func TestReportErrorOwnsItsTaskID(t *testing.T) {
	f := New()
	now := time.Unix(1_800_000_000, 0)
	cmd := UpdateTasks(now, []Report{{Node: "n1", TaskReport: &api.TaskReport{TaskID: "j9/0/0/1", State: api.TaskRunning, Time: now}}})
	_, err := f.apply(&discard{}, 1, cmd)
	var re *ReportError
	if !errors.As(err, &re) || !errors.Is(err, ErrBadReport) {
		t.Fatalf("apply of a report of no task: %v, want a *ReportError wrapping ErrBadReport", err)
	}
	clear(cmd)
	if re.TaskID != "j9/0/0/1" || !strings.Contains(err.Error(), "j9/0/0/1") {
		t.Errorf("after the command's bytes changed, the error names task %q: %v", re.TaskID, err)
	}
}
