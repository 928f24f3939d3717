package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/server"
)

const tokenFile = `
# test tokens
adm admin
rd reader
sub-a submitter qa
sub-any submitter
nl nodelet n1
`

func TestParseTokens(t *testing.T) {
	tk, err := server.ParseTokens(strings.NewReader(tokenFile + "sub-ab submitter qa,qb,qa\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tk.Len() != 6 {
		t.Fatalf("%d tokens", tk.Len())
	}
	for tok, want := range map[string]server.Role{"adm": server.RoleAdmin, "rd": server.RoleReader, "sub-a": server.RoleSubmitter, "nl": server.RoleNodelet} {
		if p, ok := tk.Lookup(tok); !ok || p.Role != want {
			t.Errorf("Lookup(%q) = %+v, %v", tok, p, ok)
		}
	}
	if p, _ := tk.Lookup("sub-ab"); strings.Join(p.Queues, ",") != "qa,qb" {
		t.Errorf("sub-ab queues %v", p.Queues)
	}
	for _, tok := range []string{"", "ad", "adm ", "admx"} {
		if _, ok := tk.Lookup(tok); ok {
			t.Errorf("Lookup(%q) found a token", tok)
		}
	}
	for _, bad := range []struct{ text, want string }{
		{"x\n", "line 1"},
		{"# c\n\nt1 root\n", "line 3: unknown role"},
		{"t1 reader qa\n", "only a submitter"},
		{"t1 submitter qa,,qb\n", "empty queue"},
		{"t1 admin\nt1 reader\n", "line 2: token repeats line 1"},
		{"t1 submitter qa extra\n", "line 1"},
	} {
		if _, err := server.ParseTokens(strings.NewReader(bad.text)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ParseTokens(%q) = %v, want an error with %q", bad.text, err, bad.want)
		}
	}
	if _, err := server.LoadTokens(tempFile(t, "tokens", tokenFile)); err != nil {
		t.Errorf("LoadTokens: %v", err)
	}
	if _, err := server.LoadTokens("/nonexistent/tokens"); err == nil {
		t.Error("LoadTokens of a missing file succeeded")
	}
}

// TestAuth checks every endpoint without a token, with an unknown one and
// with roles that may not use it, and a submitter's queue scope.
func TestAuth(t *testing.T) {
	s := openOne(t, parseTokens(t, tokenFile))
	base := s.Addr()
	ja := submit(t, base, "sub-a", jobJSON("a", "qa", 1), nil).Jobs[0]
	jb := submit(t, base, "adm", jobJSON("b", "qb", 1), nil).Jobs[0]
	if r := do(t, req{method: "POST", url: base + api.PathNodes, token: "nl", body: []byte(nodeJSON("n1", ""))}); r.status != 200 {
		t.Fatalf("register as nodelet: %s", r)
	}

	type ep struct {
		method, path string
		body         string
		allowed      []string // tokens that may call it
	}
	eps := []ep{
		{"GET", api.PathJobs, "", []string{"adm", "rd", "sub-a", "sub-any"}},
		{"POST", api.PathJobs, jobJSON("x", "", 1), []string{"adm", "sub-any"}},
		{"GET", api.PathJob + ja, "", []string{"adm", "rd", "sub-a", "sub-any"}},
		{"GET", api.PathJob + ja + "/tasks", "", []string{"adm", "rd", "sub-a", "sub-any"}},
		{"DELETE", api.PathJob + "j99", "", []string{"adm", "sub-a", "sub-any"}},
		{"GET", api.PathNodes, "", []string{"adm", "rd", "sub-a", "sub-any"}},
		{"POST", api.PathNodes, nodeJSON("n1", ""), []string{"adm", "nl"}},
		{"GET", api.PathNode + "n1/target?wait=0s", "", []string{"adm", "nl"}},
		{"POST", api.PathNode + "n1/reports", `{"reports":[]}`, []string{"adm", "nl"}},
		{"GET", api.PathTasks + ja + "/0/0/1/logs", "", []string{"adm", "rd", "sub-a", "sub-any"}},
		{"GET", api.PathWatch, "", []string{"adm", "rd", "sub-a", "sub-any"}},
		{"GET", api.PathQueues, "", []string{"adm", "rd", "sub-a", "sub-any"}},
		{"POST", api.PathQueue + "qa", `{"caps":{"tasks":9}}`, []string{"adm"}},
	}
	all := []string{"adm", "rd", "sub-a", "sub-any", "nl"}
	for _, e := range eps {
		for _, tok := range []string{"", "wrong"} {
			r := do(t, req{method: e.method, url: base + e.path, token: tok, body: []byte(e.body)})
			errorReply(t, r, 401, api.CodeUnauthorized, "")
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s %s: WWW-Authenticate %q", e.method, e.path, r.header.Get("WWW-Authenticate"))
			}
		}
		for _, tok := range all {
			if e.path == api.PathWatch {
				continue // a stream; checked below
			}
			r := do(t, req{method: e.method, url: base + e.path, token: tok, body: []byte(e.body)})
			allowed := false
			for _, a := range e.allowed {
				allowed = allowed || a == tok
			}
			if allowed && (r.status == 401 || r.status == 403) {
				t.Errorf("%s %s as %s: %s", e.method, e.path, tok, r)
			}
			if !allowed {
				errorReply(t, r, 403, api.CodeForbidden, "")
			}
		}
	}
	for _, tok := range []string{"nl"} {
		errorReply(t, do(t, req{method: "GET", url: base + api.PathWatch, token: tok}), 403, api.CodeForbidden, "")
	}

	// A submitter of qa: not qb's jobs.
	errorReply(t, do(t, req{method: "GET", url: base + api.PathJob + jb, token: "sub-a"}), 403, api.CodeForbidden, "qb")
	errorReply(t, do(t, req{method: "GET", url: base + api.PathJob + jb + "/tasks", token: "sub-a"}), 403, api.CodeForbidden, "qb")
	errorReply(t, do(t, req{method: "DELETE", url: base + api.PathJob + jb, token: "sub-a"}), 403, api.CodeForbidden, "qb")
	errorReply(t, do(t, req{method: "GET", url: base + api.PathJobs + "?queue=qb", token: "sub-a"}), 403, api.CodeForbidden, "qb")
	errorReply(t, do(t, req{method: "POST", url: base + api.PathJobs, token: "sub-a",
		body: []byte("[" + jobJSON("ok", "qa", 1) + "," + jobJSON("no", "qb", 1) + "]")}), 403, api.CodeForbidden, "jobs[1]")
	if l := listJobs(t, base, "sub-a", ""); len(l.Jobs) != 1 || l.Jobs[0].ID != ja {
		t.Fatalf("sub-a's list: %+v", l.Jobs)
	}
	if l := listJobs(t, base, "sub-any", ""); len(l.Jobs) < 2 {
		t.Fatalf("sub-any's list: %d jobs", len(l.Jobs))
	}
	w := startWatch(t, base+api.PathWatch, "sub-a")
	waitFor(t, 10*time.Second, "sub-a's watch", func() bool { _, ok := w.latest(ja); return ok })
	if _, ok := w.latest(jb); ok {
		t.Fatal("sub-a's watch showed a job of queue qb")
	}
	if r := do(t, req{method: "DELETE", url: base + api.PathJob + ja, token: "sub-a"}); r.status != 200 {
		t.Fatalf("sub-a cancels its job: %s", r)
	}

	// healthz and readyz need no token.
	for _, p := range []string{api.PathHealth, api.PathReady} {
		if r := do(t, req{method: "GET", url: base + p}); r.status != 200 {
			t.Errorf("%s: %s", p, r)
		}
	}
}
