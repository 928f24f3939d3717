package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/server"
)

// TestQueues sets a queue's caps and weight through the API as an admin
// (the other roles are refused, bad settings are 400s), lists them (a
// weight set winning over the configured one), and follows a job
// of the queue: the cap holds its tasks back with the quota reason, and
// clearing the cap lets them run.
func TestQueues(t *testing.T) {
	s := openOneWith(t, func(c *server.Config) {
		c.Tokens = parseTokens(t, tokenFile)
		c.Dispatcher.QueueWeights = map[string]int64{"qa": 7, "qb": 5}
	})
	base := s.Addr()
	if r := do(t, req{method: "POST", url: base + api.PathNodes, token: "nl", body: []byte(nodeJSON("n1", ""))}); r.status != 200 {
		t.Fatalf("register: %s", r)
	}
	set := func(tok, name, body string) reply {
		t.Helper()
		return do(t, req{method: "POST", url: base + api.PathQueue + name, token: tok, body: []byte(body),
			header: map[string]string{"Content-Type": "application/json"}})
	}
	for _, tok := range []string{"rd", "sub-a", "sub-any", "nl"} {
		errorReply(t, set(tok, "qa", `{"caps":{"tasks":2}}`), 403, api.CodeForbidden, "")
	}
	for _, bad := range []struct{ name, body, want string }{
		{"qa", `{"caps":{"cpu":-1}}`, "caps.cpu"},
		{"qa", `{"caps":{"tasks":-3},"weight":1001}`, "weight"},
		{"qa", `{"caps":{"disk":1}}`, "unknown field"},
		{"qa", `{"caps":{"cpu":"2"}}`, "want int64"},
		{"-qa", `{}`, "name"},
	} {
		errorReply(t, set("adm", bad.name, bad.body), 400, api.CodeInvalid, bad.want)
	}
	st := decode[api.QueueStatus](t, set("adm", "qa", `{"weight":3,"caps":{"tasks":2,"memory":1073741824}}`), 200)
	if st.Name != "qa" || st.Weight != 3 || st.EffectiveWeight != 3 || st.Caps != (api.QueueCaps{Tasks: 2, Memory: 1 << 30}) {
		t.Fatalf("set qa: %+v", st)
	}
	// The weight set wins over the configured one; a queue only
	// configured is listed with its configured weight.
	for _, tok := range []string{"adm", "rd", "sub-a"} {
		l := decode[api.QueueList](t, do(t, req{method: "GET", url: base + api.PathQueues, token: tok}), 200)
		if len(l.Queues) != 2 || l.Queues[0].Name != "qa" || l.Queues[0].Caps.Tasks != 2 || l.Queues[0].EffectiveWeight != 3 ||
			l.Queues[1].Name != "qb" || l.Queues[1].EffectiveWeight != 5 || l.Queues[1].Caps.Capped() {
			t.Fatalf("queues as %s: %+v", tok, l)
		}
	}
	errorReply(t, do(t, req{method: "GET", url: base + api.PathQueues, token: "nl"}), 403, api.CodeForbidden, "")

	id := submit(t, base, "adm", jobJSON("capped", "qa", 5), nil).Jobs[0]
	waitFor(t, 10*time.Second, "the quota's pending reason", func() bool {
		j := decode[api.JobStatus](t, do(t, req{method: "GET", url: base + api.PathJob + id, token: "rd"}), 200)
		return j.Tasks.Pending == 3 && len(j.Pending) == 1 && j.Pending[0].Tasks == 3 &&
			strings.Contains(j.Pending[0].Reason, "queue qa over its tasks quota")
	})
	l := decode[api.QueueList](t, do(t, req{method: "GET", url: base + api.PathQueues, token: "rd"}), 200)
	if q := l.Queues[0]; q.Tasks != 2 || q.Pending != 3 || q.Running.CPU != 200 {
		t.Fatalf("qa under its cap: %+v", q)
	}
	// Clearing the caps (the weight stays) lets the rest run.
	decode[api.QueueStatus](t, set("adm", "qa", `{"weight":3}`), 200)
	waitFor(t, 10*time.Second, "the rest placed", func() bool {
		j := decode[api.JobStatus](t, do(t, req{method: "GET", url: base + api.PathJob + id, token: "rd"}), 200)
		return j.Tasks.Pending == 0
	})
}
