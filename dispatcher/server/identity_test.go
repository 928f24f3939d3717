package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/server"
)

const identityTokens = `
adm admin
rd reader
nl1 nodelet n1
nl2 nodelet n2
`

// TestParseNodeTokens checks the node binding of nodelet tokens: each
// names one node, and no node has two.
func TestParseNodeTokens(t *testing.T) {
	tk, err := server.ParseTokens(strings.NewReader(identityTokens))
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := tk.Lookup("nl2"); !ok || p.Role != server.RoleNodelet || p.Node != "n2" {
		t.Errorf("Lookup(nl2) = %+v, %v", p, ok)
	}
	for _, bad := range []struct{ text, want string }{
		{"t1 nodelet\n", "line 1: a nodelet token names its node"},
		{"t1 nodelet n1\nt2 nodelet n1\n", "line 2: node n1 already has line 1's token"},
		{"t1 nodelet bad/name\n", `node name "bad/name"`},
		{"t1 admin n1\n", "only a submitter has queues and a nodelet a node"},
	} {
		if _, err := server.ParseTokens(strings.NewReader(bad.text)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ParseTokens(%q) = %v, want an error with %q", bad.text, err, bad.want)
		}
	}
}

// nodeBody is nodeJSON with a log token.
func nodeBody(name, addr, logToken string) []byte {
	return []byte(strings.Replace(nodeJSON(name, addr), `"name":`, fmt.Sprintf(`"log_token":%q,"name":`, logToken), 1))
}

func reportBody(t *testing.T, id string, st api.TaskState) []byte {
	t.Helper()
	reason := api.ReasonStarted
	if st.Done() {
		reason = api.ReasonExited
	}
	b, err := json.Marshal(api.ReportRequest{Reports: []api.TaskReport{{TaskID: id, State: st, Reason: reason, Time: time.Now()}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestNodeIdentity checks that a nodelet token acts for its node alone:
// it registers, reads the target of and reports for no other node, and
// reports no task placed on another node; each refusal is a 403, counted,
// and changes nothing. The dispatcher reads a node's logs with the node's
// own log token, which no node list shows.
func TestNodeIdentity(t *testing.T) {
	s := openOne(t, parseTokens(t, identityTokens))
	base := s.Addr()
	logToken := api.NewLogToken()
	var logAuth atomic.Value
	logs := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		logAuth.Store(r.Header.Get("Authorization"))
		fmt.Fprintf(rw, "logs of %s\n", r.URL.Query().Get("task"))
	}))
	defer logs.Close()

	// n1 alone, so that the job lands there.
	if r := do(t, req{method: "POST", url: base + api.PathNodes, token: "nl1", body: nodeBody("n1", strings.TrimPrefix(logs.URL, "http://"), logToken)}); r.status != 200 {
		t.Fatalf("n1 registers itself: %s", r)
	}
	id := submit(t, base, "adm", jobJSON("a", "", 1), nil).Jobs[0]
	task := id + "/0/0/1"
	waitFor(t, 10*time.Second, "the task placed on n1", func() bool {
		tl := decode[api.TaskList](t, do(t, req{method: "GET", url: base + api.PathJob + id + "/tasks", token: "rd"}), 200)
		return len(tl.Tasks) == 1 && tl.Tasks[0].Node == "n1"
	})
	if r := do(t, req{method: "POST", url: base + api.PathNodes, token: "nl2", body: nodeBody("n2", "", api.NewLogToken())}); r.status != 200 {
		t.Fatalf("n2 registers itself: %s", r)
	}

	// A node's token, for another node or one that does not exist.
	for _, c := range []struct {
		name string
		q    req
	}{
		{"register another node", req{method: "POST", url: api.PathNodes, token: "nl1", body: []byte(nodeJSON("n2", "127.0.0.1:1"))}},
		{"register a node of no token", req{method: "POST", url: api.PathNodes, token: "nl1", body: []byte(nodeJSON("n3", ""))}},
		{"another node's target", req{method: "GET", url: api.PathNode + "n1/target?wait=0s", token: "nl2"}},
		{"another node's diff", req{method: "GET", url: api.PathNode + "n1/target?wait=0s&diff=1", token: "nl2"}},
		{"report for another node", req{method: "POST", url: api.PathNode + "n1/reports", token: "nl2", body: reportBody(t, task, api.TaskSucceeded)}},
	} {
		c.q.url = base + c.q.url
		errorReply(t, do(t, c.q), 403, api.CodeForbidden, "may not")
	}
	if got := s.Handler().Refusals(); got.OtherNode != 5 || got.ForeignReports != 0 {
		t.Errorf("refusals %+v, want 5 for other nodes", got)
	}
	nodes := decode[api.NodeList](t, do(t, req{method: "GET", url: base + api.PathNodes, token: "adm"}), 200)
	if len(nodes.Nodes) != 2 || nodes.Nodes[1].Spec.Address != "" {
		t.Fatalf("nodes after refused registrations: %+v", nodes.Nodes)
	}

	// n2 reports n1's task, in its own name: refused whole, nothing
	// applied, even beside a report of its own.
	foreign := reportBody(t, task, api.TaskSucceeded)
	e := errorReply(t, do(t, req{method: "POST", url: base + api.PathNode + "n2/reports", token: "nl2", body: foreign}), 403, api.CodeForbidden, "placed on another node")
	if len(e.Problems) != 1 || e.Problems[0].Path != "reports[0].task_id" {
		t.Errorf("problems %+v", e.Problems)
	}
	if got := s.Handler().Refusals(); got.ForeignReports != 1 {
		t.Errorf("refusals %+v, want 1 foreign report", got)
	}
	tl := decode[api.TaskList](t, do(t, req{method: "GET", url: base + api.PathJob + id + "/tasks", token: "rd"}), 200)
	if tl.Tasks[0].State != api.TaskAssigned {
		t.Fatalf("task after a foreign report: %+v", tl.Tasks[0])
	}
	// Its owner reports it; an admin may relay reports for any node.
	if r := do(t, req{method: "POST", url: base + api.PathNode + "n1/reports", token: "nl1", body: reportBody(t, task, api.TaskRunning)}); r.status != 204 {
		t.Fatalf("n1 reports its task: %s", r)
	}
	if r := do(t, req{method: "GET", url: base + api.PathNode + "n1/target?wait=0s", token: "nl1"}); r.status != 200 {
		t.Fatalf("n1 reads its target: %s", r)
	}
	// An earlier attempt's report is stale, not foreign: n2 may have run
	// it. Here it names no attempt that ran anywhere, and is not applied.
	if r := do(t, req{method: "POST", url: base + api.PathNode + "n2/reports", token: "nl2", body: reportBody(t, id+"/0/0/7", api.TaskRunning)}); r.status == 403 {
		t.Fatalf("a report of another attempt: %s", r)
	}

	// The log token is the dispatcher's to use, and no reader's to see.
	for _, tok := range []string{"rd", "adm"} {
		r := do(t, req{method: "GET", url: base + api.PathNodes, token: tok})
		if r.status != 200 || bytes.Contains(r.body, []byte(logToken)) || bytes.Contains(r.body, []byte("log_token")) {
			t.Fatalf("node list as %s shows the log token: %s", tok, r)
		}
	}
	lr := do(t, req{method: "GET", url: base + api.PathTasks + task + "/logs", token: "rd"})
	if lr.status != 200 || string(lr.body) != "logs of "+task+"\n" {
		t.Fatalf("logs: %s", lr)
	}
	if got := logAuth.Load(); got != "Bearer "+logToken {
		t.Fatalf("the log request carried Authorization %q, want the node's log token", got)
	}
}

// TestHostileNodeAddresses registers addresses that would carry a path,
// query, user or other host into the log URL: each is refused naming the
// address, and a node's redirect is not followed.
func TestHostileNodeAddresses(t *testing.T) {
	s := openOne(t, nil)
	base := s.Addr()
	for _, addr := range []string{
		"127.0.0.1:80/any/path#", "127.0.0.1:80?x=", "user@127.0.0.1:80", "127.0.0.1:80#", "http://127.0.0.1:80",
		"127.0.0.1", "127.0.0.1:0", "[::1%lo]:80", "evil host:80", "127.0.0.1:80\r\nHost: x",
	} {
		e := errorReply(t, do(t, req{method: "POST", url: base + api.PathNodes, body: []byte(nodeJSON("n1", addr))}), 400, api.CodeInvalid, "address")
		if len(e.Problems) == 0 || e.Problems[0].Path != "address" {
			t.Errorf("address %q: problems %+v", addr, e.Problems)
		}
	}
	if l := decode[api.NodeList](t, do(t, req{method: "GET", url: base + api.PathNodes}), 200); len(l.Nodes) != 0 {
		t.Fatalf("nodes registered: %+v", l.Nodes)
	}

	// A node that answers its logs with a redirect elsewhere.
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		fmt.Fprintln(rw, "secret")
	}))
	defer other.Close()
	redirecting := httptest.NewServer(http.RedirectHandler(other.URL+"/internal", http.StatusFound))
	defer redirecting.Close()
	if r := do(t, req{method: "POST", url: base + api.PathNodes, body: []byte(nodeJSON("n1", strings.TrimPrefix(redirecting.URL, "http://")))}); r.status != 200 {
		t.Fatalf("register: %s", r)
	}
	id := submit(t, base, "", jobJSON("a", "", 1), nil).Jobs[0]
	waitFor(t, 10*time.Second, "the task placed", func() bool {
		tl := decode[api.TaskList](t, do(t, req{method: "GET", url: base + api.PathJob + id + "/tasks"}), 200)
		return len(tl.Tasks) == 1
	})
	errorReply(t, do(t, req{method: "GET", url: base + api.PathTasks + id + "/0/0/1/logs"}), 502, "bad_gateway", "302")
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("the redirect was followed %d times", n)
	}
}
