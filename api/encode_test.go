package api_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/internal/seedtest"
)

// TestAppendNodeTarget compares AppendNodeTarget with encoding/json byte
// for byte, on random targets that set every field and on ones that leave
// fields empty.
func TestAppendNodeTarget(t *testing.T) {
	g := gen{seedtest.Rand(t)}
	targets := []api.NodeTarget{
		{},
		{Generation: 1, Pods: []api.TargetPod{}},
		{Generation: 2, Pods: []api.TargetPod{{}, {Pod: api.PodSpec{Containers: []api.ContainerSpec{{}}, Sim: &api.SimSpec{}}}}},
		{Generation: 3, Pods: []api.TargetPod{{Pod: api.PodSpec{Containers: []api.ContainerSpec{{Command: []string{}, Args: []string{}, Env: map[string]string{},
			Resources: api.Resources{Ports: []api.Port{{}}}}}, Sim: &api.SimSpec{ExitCode: 3}}}}},
	}
	for range 300 {
		targets = append(targets, g.target())
	}
	for i := range targets {
		want, err := json.Marshal(targets[i])
		if err != nil {
			t.Fatal(err)
		}
		if got := api.AppendNodeTarget([]byte("x"), &targets[i]); !bytes.Equal(got[1:], want) || got[0] != 'x' {
			t.Fatalf("target %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// TestAppendNodeTargetBare: the bare encoding is the full one of the
// target without its pods' JobName, Count, Token and Ports, and reads back as
// that.
func TestAppendNodeTargetBare(t *testing.T) {
	g := gen{seedtest.Rand(t)}
	for i := range 100 {
		full := g.target()
		bare := full
		bare.Pods = slices.Clone(full.Pods)
		for j := range bare.Pods {
			bare.Pods[j].JobName, bare.Pods[j].Count, bare.Pods[j].Token, bare.Pods[j].Ports = "", 0, "", nil
		}
		got := api.AppendNodeTargetBare(nil, &full)
		if want := api.AppendNodeTarget(nil, &bare); !bytes.Equal(got, want) {
			t.Fatalf("target %d:\n got %s\nwant %s", i, got, want)
		}
		if bytes.Contains(got, []byte(`"job_name":`)) || bytes.Contains(got, []byte(`"count":`)) || bytes.Contains(got, []byte(`"token":`)) ||
			bytes.Contains(got, []byte(`},"ports":`)) {
			t.Fatalf("target %d: bare encoding has identity members: %s", i, got)
		}
		if back, err := api.DecodeNodeTarget(got); err != nil || !reflect.DeepEqual(back, bare) {
			t.Fatalf("target %d: read back %+v, %v\nwant %+v", i, back, err, bare)
		}
	}
}

// TestAppendReportRequest does the same for report requests, and checks
// that what encoding/json refuses, it refuses.
func TestAppendReportRequest(t *testing.T) {
	g := gen{seedtest.Rand(t)}
	reqs := []api.ReportRequest{
		{},
		{Reports: []api.TaskReport{}, Usage: &api.NodeUsage{}},
		{Reports: []api.TaskReport{{State: api.TaskRunning}}, Usage: &api.NodeUsage{Tasks: []api.TaskUsage{{}}}},
		{Usage: &api.NodeUsage{Overcommit: &api.OvercommitStatus{}}},
		{Usage: &api.NodeUsage{Overcommit: &api.OvercommitStatus{CPUQuota: 1500, CPUMin: 100, CPUMax: 2000, MemoryLimit: 3 << 30,
			MemoryGuaranteed: 1 << 30, Decided: time.Date(2030, 1, 2, 3, 4, 5, 600, time.FixedZone("x", 3600))}}},
	}
	for range 300 {
		reqs = append(reqs, g.reportRequest())
	}
	for i := range reqs {
		want, err := json.Marshal(reqs[i])
		if err != nil {
			t.Fatal(err)
		}
		got, err := api.AppendReportRequest(nil, &reqs[i])
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("request %d: %v\n got %s\nwant %s", i, err, got, want)
		}
	}
	for _, bad := range []api.TaskReport{
		{State: api.TaskState(200), Time: time.Unix(0, 0)},
		{State: api.TaskRunning, Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		r := api.ReportRequest{Reports: []api.TaskReport{bad}}
		if _, jerr := json.Marshal(r); jerr == nil {
			t.Fatalf("encoding/json accepts %+v", bad)
		}
		if got, err := api.AppendReportRequest(nil, &r); err == nil || !strings.Contains(err.Error(), "reports[0]") {
			t.Errorf("AppendReportRequest(%+v) = %s, %v; want an error naming reports[0]", bad, got, err)
		}
	}
	r := api.ReportRequest{Usage: &api.NodeUsage{Overcommit: &api.OvercommitStatus{Decided: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}}
	if _, jerr := json.Marshal(r); jerr == nil {
		t.Fatal("encoding/json accepts an overcommit status decided in the year 10000")
	}
	if got, err := api.AppendReportRequest(nil, &r); err == nil || !strings.Contains(err.Error(), "usage.overcommit.decided") {
		t.Errorf("AppendReportRequest of a status decided in the year 10000 = %s, %v; want an error naming usage.overcommit.decided", got, err)
	}
}

// TestAppendJSONString: strings are escaped as encoding/json escapes them,
// through a container's name.
func TestAppendJSONString(t *testing.T) {
	var all strings.Builder
	for b := range 128 {
		all.WriteByte(byte(b))
	}
	for _, s := range []string{"", "plain", all.String(), "<a href='x'>&amp;</a>", "\u2028\u2029\u2027\u202a", "é世界🙂",
		"bad \xff utf8 \xc3", "\xed\xa0\x80 surrogate", "trailing \xe2\x80"} {
		tg := api.NodeTarget{Pods: []api.TargetPod{{TaskID: s, Pod: api.PodSpec{Containers: []api.ContainerSpec{{Name: s, Env: map[string]string{s: s}}}}}}}
		want, err := json.Marshal(tg)
		if err != nil {
			t.Fatal(err)
		}
		if got := api.AppendNodeTarget(nil, &tg); !bytes.Equal(got, want) {
			t.Errorf("%q:\n got %s\nwant %s", s, got, want)
		}
	}
}

// TestAppendWatchEvent compares AppendWatchEvent with encoding/json byte
// for byte, on random events that set every field (the job's spec too)
// and on ones that leave fields empty; a time RFC 3339 cannot write is
// refused, as encoding/json refuses it.
func TestAppendWatchEvent(t *testing.T) {
	g := gen{seedtest.Rand(t)}
	events := []api.WatchEvent{
		{},
		{Index: 1, Job: api.JobStatus{Groups: []api.GroupStatus{}, Pending: []api.PendingReason{},
			Spec: api.JobSpec{Tasks: []api.TaskGroupSpec{{}}, Policy: &api.Policy{}, Retry: api.RetryPolicy{Backoff: 5}}}},
		{Index: 2, Job: api.JobStatus{Spec: api.JobSpec{Policy: &api.Policy{Scorers: []api.ScorerRef{{}}}, Retry: api.RetryPolicy{MaxBackoff: 7},
			Constraints: []api.Constraint{{}}, Labels: map[string]string{}}}},
	}
	for range 300 {
		events = append(events, g.watchEvent())
	}
	for i := range events {
		want, err := json.Marshal(events[i])
		if err != nil {
			t.Fatal(err)
		}
		got, err := api.AppendWatchEvent(nil, &events[i])
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("event %d: %v\n got %s\nwant %s", i, err, got, want)
		}
	}
	bad := api.WatchEvent{Job: api.JobStatus{ID: "j1", Submitted: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}}
	if _, jerr := json.Marshal(bad); jerr == nil {
		t.Fatal("encoding/json accepts a year before 0")
	}
	if got, err := api.AppendWatchEvent(nil, &bad); err == nil || !strings.Contains(err.Error(), "j1") {
		t.Errorf("AppendWatchEvent of a year before 0 = %s, %v; want an error naming the job", got, err)
	}
}

// TestAppendSubmitResponse compares AppendSubmitResponse with
// encoding/json byte for byte, on random replies and on empty ones.
func TestAppendSubmitResponse(t *testing.T) {
	g := gen{seedtest.Rand(t)}
	replies := []api.SubmitResponse{{}, {Jobs: []string{}}, {Jobs: []string{"j1"}, Existing: []int{}}, {Existing: []int{0}}}
	for range 100 {
		replies = append(replies, g.submitResponse())
	}
	for i := range replies {
		want, err := json.Marshal(replies[i])
		if err != nil {
			t.Fatal(err)
		}
		if got := api.AppendSubmitResponse([]byte("x"), &replies[i]); !bytes.Equal(got[1:], want) || got[0] != 'x' {
			t.Fatalf("reply %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// TestAppendTaskList compares AppendTaskList with encoding/json byte for
// byte, on random pages and on empty ones; a state without a name and a
// time RFC 3339 cannot write are refused, as encoding/json refuses them,
// naming the task.
func TestAppendTaskList(t *testing.T) {
	g := gen{seedtest.Rand(t)}
	lists := []api.TaskList{{}, {Tasks: []api.TaskStatus{}}, {Tasks: []api.TaskStatus{{}}, Next: "x"}}
	for range 200 {
		lists = append(lists, g.taskList())
	}
	for i := range lists {
		want, err := json.Marshal(lists[i])
		if err != nil {
			t.Fatal(err)
		}
		got, err := api.AppendTaskList([]byte("x"), &lists[i])
		if err != nil || !bytes.Equal(got[1:], want) || got[0] != 'x' {
			t.Fatalf("list %d: %v\n got %s\nwant %s", i, err, got, want)
		}
	}
	for _, bad := range []api.TaskStatus{
		{ID: "j1/0/0/1", State: api.TaskLost + 1},
		{ID: "j1/0/0/1", Updated: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		l := api.TaskList{Tasks: []api.TaskStatus{{ID: "j1/0/0/0"}, bad}}
		if _, jerr := json.Marshal(l); jerr == nil {
			t.Fatalf("encoding/json accepts %+v", bad)
		}
		if got, err := api.AppendTaskList(nil, &l); err == nil || !strings.Contains(err.Error(), "j1/0/0/1") {
			t.Errorf("AppendTaskList(%+v) = %s, %v; want an error naming the task", bad, got, err)
		}
	}
}
