package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/dispatcher/server"
)

// TestJobHistory lists, pages and reads the summaries of forgotten jobs
// beside live jobs, as each role sees them: jobs in queues qa and qb, one
// of each cancelled and forgotten (the dispatcher's clock is manual), the
// others pending.
func TestJobHistory(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	s := openOneWith(t, func(c *server.Config) {
		c.Tokens = parseTokens(t, tokenFile)
		c.Dispatcher.Clock, c.Dispatcher.JobRetention = clk, time.Minute
	})
	base := s.Addr()
	var ids []string
	for _, j := range []struct{ name, queue string }{{"a1", "qa"}, {"b1", "qb"}, {"a2", "qa"}, {"b2", "qb"}} {
		ids = append(ids, submit(t, base, "adm", jobJSON(j.name, j.queue, 2), nil).Jobs[0])
	}
	for _, id := range ids[:2] {
		if r := do(t, req{method: "DELETE", url: base + api.PathJob + id, token: "adm"}); r.status != 200 {
			t.Fatalf("cancel %s: %s", id, r)
		}
	}
	// A watch open before sees the jobs change to their summaries; a
	// scoped one, only its queue's.
	watchAll := startWatch(t, base+api.PathWatch, "rd")
	watchA := startWatch(t, base+api.PathWatch+"?brief=1", "sub-a")
	clk.Advance(2 * time.Minute)
	waitFor(t, 10*time.Second, "the cancelled jobs forgotten into the history", func() bool {
		clk.Advance(time.Second) // a forget pass due every second
		return s.FSM().HistoryLen() == 2
	})
	for _, id := range ids[:2] {
		waitFor(t, 10*time.Second, "the watch to show "+id+" as history", func() bool {
			ev, ok := watchAll.latest(id)
			return ok && ev.Job.History
		})
		ev, _ := watchAll.latest(id)
		if j := ev.Job; j.State != api.JobCancelled || len(j.Groups) != 0 || j.Tasks.Total != 2 {
			t.Errorf("watched summary of %s: %+v, want cancelled, its counts and no groups", id, ev.Job)
		}
	}
	waitFor(t, 10*time.Second, "sub-a's watch to show "+ids[0]+" as history", func() bool {
		ev, ok := watchA.latest(ids[0])
		return ok && ev.Job.History
	})
	if _, ok := watchA.latest(ids[1]); ok {
		t.Error("sub-a's watch showed a job of queue qb")
	}
	list := func(token, query string) string {
		t.Helper()
		var out string
		for _, j := range listJobs(t, base, token, query).Jobs {
			out += j.ID
			if j.History {
				out += "h"
			}
			out += " "
		}
		return out
	}
	h := func(id string) string { return id + "h " }
	j := func(id string) string { return id + " " }
	for _, c := range []struct{ token, query, want string }{
		{"adm", "", h(ids[0]) + h(ids[1]) + j(ids[2]) + j(ids[3])},
		{"rd", "", h(ids[0]) + h(ids[1]) + j(ids[2]) + j(ids[3])},
		{"rd", "?state=cancelled", h(ids[0]) + h(ids[1])},
		{"rd", "?state=pending,cancelled&queue=qb", h(ids[1]) + j(ids[3])},
		{"rd", "?history=only", h(ids[0]) + h(ids[1])},
		{"rd", "?history=exclude", j(ids[2]) + j(ids[3])},
		{"rd", "?history=include&label=team=t-b1", h(ids[1])},
		{"sub-a", "", h(ids[0]) + j(ids[2])},
		{"sub-a", "?state=cancelled", h(ids[0])},
	} {
		if got := list(c.token, c.query); got != c.want {
			t.Errorf("%s lists %q: %q, want %q", c.token, c.query, got, c.want)
		}
	}
	// Pages of one cross from history to live jobs.
	var paged, after string
	for range 5 {
		l := listJobs(t, base, "rd", "?limit=1"+after)
		for _, x := range l.Jobs {
			paged += x.ID + " "
		}
		if l.Next == "" {
			break
		}
		after = "&after=" + l.Next
	}
	if want := fmt.Sprintf("%s %s %s %s ", ids[0], ids[1], ids[2], ids[3]); paged != want {
		t.Errorf("paged: %q, want %q", paged, want)
	}
	errorReply(t, do(t, req{method: "GET", url: base + api.PathJobs + "?history=maybe", token: "rd"}), 400, api.CodeInvalid, "history")

	// One summary: a reader and a submitter of its queue read it; a
	// submitter of another queue may not; its tasks and a cancel are
	// gone with the job.
	sum := decode[api.JobStatus](t, do(t, req{method: "GET", url: base + api.PathJob + ids[0], token: "rd"}), 200)
	if !sum.History || sum.State != api.JobCancelled || sum.Spec.Name != "a1" || sum.Spec.Queue != "qa" ||
		sum.Spec.Labels["team"] != "t-a1" || sum.Tasks != (api.TaskCounts{Total: 2, Killed: 2}) ||
		!sum.Submitted.Equal(sum.Ended) || !sum.Started.IsZero() || sum.FirstFailure != nil || len(sum.Groups) != 0 {
		t.Errorf("summary of %s: %+v", ids[0], sum)
	}
	if r := do(t, req{method: "GET", url: base + api.PathJob + ids[0], token: "sub-a"}); r.status != 200 {
		t.Errorf("sub-a reads the summary of %s: %s", ids[0], r)
	}
	errorReply(t, do(t, req{method: "GET", url: base + api.PathJob + ids[1], token: "sub-a"}), 403, api.CodeForbidden, "qb")
	errorReply(t, do(t, req{method: "GET", url: base + api.PathJob + ids[0] + "/tasks", token: "rd"}), 404, api.CodeNotFound, "summary")
	errorReply(t, do(t, req{method: "DELETE", url: base + api.PathJob + ids[0], token: "adm"}), 404, api.CodeNotFound, "summary")
	errorReply(t, do(t, req{method: "GET", url: base + api.PathJob + "j99", token: "rd"}), 404, api.CodeNotFound, "--history-retention")
}
