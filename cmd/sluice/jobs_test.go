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
