package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/api"
)

func TestJobsListTableAndJSON(t *testing.T) {
	submitted := time.Now().Add(-3 * time.Minute)
	pages := map[string]api.JobList{
		"": {Jobs: []api.JobStatus{{ID: "j1", State: api.JobRunning, Submitted: submitted,
			Spec:  api.JobSpec{Name: "train", Queue: "ml"},
			Tasks: api.TaskCounts{Total: 10, Pending: 2, Active: 5, Succeeded: 3}}}, Next: "j1"},
		"j1": {Jobs: []api.JobStatus{{ID: "j2", State: api.JobFailed, Submitted: submitted,
			Spec:  api.JobSpec{Name: "eval", Queue: "default"},
			Tasks: api.TaskCounts{Total: 1, Failed: 1}}}},
	}
	s := startStub(t, func(ctx *fasthttp.RequestCtx, r stubReq) {
		if r.path != api.PathJobs {
			reply(ctx, 404, api.ErrorResponse{Code: api.CodeNotFound, Error: "no route"})
			return
		}
		reply(ctx, 200, pages[string(ctx.QueryArgs().Peek("after"))])
	})
	out, errOut, code, err := runCmd(t, "jobs", "--addr", s.url, "--state", "running,failed", "--label", "team=ml", "--limit", "1")
	if code != exitOK {
		t.Fatalf("exit %d: %v", code, err)
	}
	want := "ID  NAME   QUEUE  STATE    TASKS  PENDING  ACTIVE  SUCCEEDED  FAILED  KILLED  AGE\n" +
		"j1  train  ml     running  10     2        5       3          0       0       3m\n"
	if out != want {
		t.Errorf("stdout\n%s\nwant\n%s", out, want)
	}
	if errOut != "more jobs: --after j1, or --all\n" {
		t.Errorf("stderr %q", errOut)
	}
	if q := s.requests()[0].query; q != "label=team%3Dml&limit=1&state=running&state=failed" {
		t.Errorf("query %q", q)
	}

	out, _, code, err = runCmd(t, "jobs", "--addr", s.url, "--all", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %v", code, err)
	}
	var list api.JobList
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Jobs) != 2 || list.Jobs[1].ID != "j2" || list.Next != "" {
		t.Errorf("json %s: %v", out, err)
	}
	if !strings.Contains(out, "\n  \"jobs\": [") {
		t.Errorf("json not indented: %s", out)
	}
}

// TestJobsHistory lists a forgotten job's summary among live jobs, marked,
// passes --history on, refuses a bad one, and shows a summary.
func TestJobsHistory(t *testing.T) {
	ended := time.Now().Add(-time.Minute)
	sum := api.JobStatus{ID: "j1", State: api.JobFailed, History: true, Submitted: ended.Add(-time.Hour),
		Started: ended.Add(-50 * time.Minute), Ended: ended,
		Spec:         api.JobSpec{Name: "etl", Queue: "batch", Labels: map[string]string{"team": "data"}},
		Tasks:        api.TaskCounts{Total: 4, Succeeded: 3, Failed: 1},
		FirstFailure: &api.TaskFailure{Task: "j1/0/2/1", State: api.TaskFailed, Reason: api.ReasonExited, ExitCode: 3, At: ended.Add(-2 * time.Minute)}}
	live := api.JobStatus{ID: "j2", State: api.JobRunning, Submitted: ended, Spec: api.JobSpec{Name: "train", Queue: "ml"},
		Tasks: api.TaskCounts{Total: 1, Active: 1}, Groups: []api.GroupStatus{{Name: "g0", TaskCounts: api.TaskCounts{Total: 1, Active: 1}}}}
	s := startStub(t, func(ctx *fasthttp.RequestCtx, r stubReq) {
		switch r.path {
		case api.PathJobs:
			reply(ctx, 200, api.JobList{Jobs: []api.JobStatus{sum, live}})
		case api.PathJob + "j1":
			reply(ctx, 200, sum)
		default:
			reply(ctx, 404, api.ErrorResponse{Code: api.CodeNotFound, Error: "no route " + r.path})
		}
	})
	out, _, code, err := runCmd(t, "jobs", "--addr", s.url, "--all")
	if code != exitOK {
		t.Fatalf("exit %d: %v", code, err)
	}
	want := "ID  NAME   QUEUE  STATE             TASKS  PENDING  ACTIVE  SUCCEEDED  FAILED  KILLED  AGE\n" +
		"j1  etl    batch  failed (history)  4      0        0       3          1       0       1h\n" +
		"j2  train  ml     running           1      0        1       0          0       0       1m\n"
	if out != want {
		t.Errorf("stdout\n%s\nwant\n%s", out, want)
	}
	if q := s.requests()[0].query; q != "" {
		t.Errorf("query %q, want none (the server includes history by default)", q)
	}
	for _, h := range []string{"only", "exclude"} {
		if _, _, code, err := runCmd(t, "jobs", "--addr", s.url, "--history", h); code != exitOK {
			t.Fatalf("--history %s: exit %d: %v", h, code, err)
		}
		reqs := s.requests()
		if q := reqs[len(reqs)-1].query; q != "history="+h {
			t.Errorf("--history %s: query %q", h, q)
		}
	}
	if _, _, code, err := runCmd(t, "jobs", "--addr", s.url, "--history", "maybe"); code != exitUsage || !strings.Contains(err.Error(), "--history") {
		t.Errorf("--history maybe: exit %d, %v; want a usage error", code, err)
	}
	out, _, code, err = runCmd(t, "jobs", "j1", "--addr", s.url)
	if code != exitOK {
		t.Fatalf("exit %d: %v", code, err)
	}
	for _, want := range []string{"State:          failed (history)\n", "Labels:         team=data\n", "Ended:          ", "(1m ago)\n",
		"First failure:  j1/0/2/1 failed, exited 3 (3m ago)\n", "Tasks:          4 total, 0 pending, 0 active, 3 succeeded, 1 failed, 0 killed\n",
		"History:        the job was forgotten"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Priority:") || strings.Contains(out, "GROUP") {
		t.Errorf("a summary shows a priority or groups it does not keep:\n%s", out)
	}
}

func TestJobsShowOne(t *testing.T) {
	job := api.JobStatus{ID: "j/7", State: api.JobRunning, Submitted: time.Now().Add(-time.Hour),
		Spec:    api.JobSpec{Name: "train", Queue: "ml", QoS: api.QoSOffline, Labels: map[string]string{"team": "ml"}},
		Tasks:   api.TaskCounts{Total: 3, Pending: 1, Retrying: 1, Active: 1, Succeeded: 1},
		Groups:  []api.GroupStatus{{Name: "g0", TaskCounts: api.TaskCounts{Total: 3, Pending: 1, Active: 1, Succeeded: 1}}},
		Pending: []api.PendingReason{{Group: "g0", Tasks: 1, Reason: "no node has 64 GPUs free"}},
	}
	tasks := []api.TaskStatus{
		{ID: "j/7/g0/0/1", Group: "g0", Index: 0, Attempt: 1, State: api.TaskSucceeded, Node: "n1", Reason: api.ReasonExited, Updated: time.Now()},
		{ID: "j/7/g0/1/1", Group: "g0", Index: 1, Attempt: 1, State: api.TaskRunning, Node: "n2", Reason: api.ReasonStarted, Updated: time.Now(),
			Host: "10.0.0.2", Ports: []api.Port{{Name: "http", Port: 20000, Protocol: "tcp"}, {Name: "dns", Port: 53, Protocol: "udp"}}},
	}
	s := startStub(t, func(ctx *fasthttp.RequestCtx, r stubReq) {
		switch r.path {
		case "/v1/jobs/j%2F7":
			reply(ctx, 200, job)
		case "/v1/jobs/j%2F7/tasks":
			if string(ctx.QueryArgs().Peek("after")) == "" {
				reply(ctx, 200, api.TaskList{Tasks: tasks[:1], Next: "x"})
			} else {
				reply(ctx, 200, api.TaskList{Tasks: tasks[1:]})
			}
		default:
			reply(ctx, 404, api.ErrorResponse{Code: api.CodeNotFound, Error: "no route " + r.path})
		}
	})
	out, _, code, err := runCmd(t, "jobs", "j/7", "--tasks", "--addr", s.url)
	if code != exitOK {
		t.Fatalf("exit %d: %v", code, err)
	}
	for _, want := range []string{
		"ID:         j/7\n", "Labels:     team=ml\n",
		"Tasks:      3 total, 1 pending (1 retrying), 1 active, 1 succeeded, 0 failed, 0 killed\n",
		"GROUP  TASKS  PENDING", "g0     3      1",
		"Not placed:\n  g0: 1 tasks: no node has 64 GPUs free\n",
		"TASK        GROUP  INDEX  ATTEMPT  STATE      NODE  HOST      PORTS                      REASON   EXIT  UPDATED\n",
		"j/7/g0/0/1  g0     0      1        succeeded  n1    -         -                          exited   0     0s\n",
		"j/7/g0/1/1  g0     1      1        running    n2    10.0.0.2  http=20000/tcp,dns=53/udp  started  -     0s\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	out, _, code, err = runCmd(t, "jobs", "j/7", "--tasks", "--addr", s.url, "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %v", code, err)
	}
	var got struct {
		Job   api.JobStatus    `json:"job"`
		Tasks []api.TaskStatus `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Job.ID != "j/7" || len(got.Tasks) != 2 || got.Tasks[1].State != api.TaskRunning ||
		got.Tasks[1].Host != "10.0.0.2" || len(got.Tasks[1].Ports) != 2 || got.Tasks[1].Ports[1].Port != 53 {
		t.Errorf("json %s: %v", out, err)
	}
}
