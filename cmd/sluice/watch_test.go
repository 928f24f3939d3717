package main

import (
	"bufio"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/api"
)

func TestWatch(t *testing.T) {
	events := []api.WatchEvent{
		{Index: 41, Job: api.JobStatus{ID: "j1", State: api.JobRunning, Tasks: api.TaskCounts{Total: 3, Pending: 1, Active: 2}}},
		{Index: 42, Job: api.JobStatus{ID: "j1", State: api.JobSucceeded, Tasks: api.TaskCounts{Total: 3, Succeeded: 3}}},
	}
	// The lines print no spec: they ask for the brief stream; JSON asks
	// for the whole events.
	var wantQuery atomic.Value
	wantQuery.Store("from=40&brief=1")
	s := startStub(t, func(ctx *fasthttp.RequestCtx, r stubReq) {
		if want := wantQuery.Load().(string); r.path != api.PathWatch || r.query != want {
			reply(ctx, 400, api.ErrorResponse{Code: api.CodeInvalid, Error: "want " + want + ", got " + r.query})
			return
		}
		ctx.SetContentType("application/x-ndjson")
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			for _, ev := range events {
				b, _ := json.Marshal(ev)
				w.Write(append(b, '\n')) //nolint:errcheck // Flush reports
				if w.Flush() != nil {
					return
				}
			}
		})
	})
	out, _, code, err := runCmd(t, "watch", "--from", "40", "--addr", s.url)
	if code != exitOK {
		t.Fatalf("exit %d: %v", code, err)
	}
	want := "41         j1               running    3 tasks: 1 pending, 2 active, 0 succeeded, 0 failed, 0 killed\n" +
		"42         j1               succeeded  3 tasks: 0 pending, 0 active, 3 succeeded, 0 failed, 0 killed\n"
	if out != want {
		t.Errorf("stdout\n%q\nwant\n%q", out, want)
	}

	wantQuery.Store("from=40")
	out, _, code, err = runCmd(t, "watch", "--from", "40", "--addr", s.url, "-o", "json")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != exitOK || len(lines) != 2 {
		t.Fatalf("exit %d (%v), stdout %q", code, err, out)
	}
	for i, l := range lines {
		var ev api.WatchEvent
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.Index != events[i].Index || ev.Job.State != events[i].Job.State {
			t.Errorf("line %d %q: %v", i, l, err)
		}
	}

	_, _, code, err = runCmd(t, "watch", "--addr", s.url)
	if code != exitError || err == nil || !strings.HasPrefix(err.Error(), "want from=40") {
		t.Errorf("exit %d, err %v", code, err)
	}
}
