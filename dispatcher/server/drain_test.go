package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/server"
)

// TestNodeAdmin: drain, undrain and remove take the admin role alone (a
// reader's, a submitter's, a nodelet's, even for its own node, and a
// job's token are refused); an unknown node is a 404 naming it; a node
// not drained, or with tasks, is not removed (409); the node list shows
// the drain; a removed node registers afresh.
func TestNodeAdmin(t *testing.T) {
	keys := jobKeys(t, testJobKey)
	s := openOneWith(t, func(c *server.Config) { c.Tokens, c.JobKeys = parseTokens(t, tokenFile), keys })
	base := s.Addr()
	if r := do(t, req{method: "POST", url: base + api.PathNodes, token: "nl", body: []byte(nodeJSON("n1", ""))}); r.status != 200 {
		t.Fatalf("register as nodelet: %s", r)
	}
	j := submit(t, base, "adm", appmasterJSON("am"), nil).Jobs[0] // a job token is an appmaster's
	jobTok := keys.Token(j, mustFacts(t, s, j))
	waitFor(t, 10*time.Second, "the task placed", func() bool {
		st, _ := s.FSM().Job(j)
		return st.Groups[0].Active == 1
	})

	drain, undrain, node := api.PathNode+"n1/drain", api.PathNode+"n1/drain", api.PathNode+"n1"
	for _, e := range []struct{ method, path, body string }{
		{"POST", drain, `{"timeout":"1h"}`}, {"DELETE", undrain, ""}, {"DELETE", node, ""},
	} {
		for _, tok := range []string{"rd", "sub-any", "sub-a", "nl", jobTok} {
			errorReply(t, do(t, req{method: e.method, url: base + e.path, token: tok, body: []byte(e.body),
				header: map[string]string{"Content-Type": "application/json"}}), 403, api.CodeForbidden, "")
		}
		errorReply(t, do(t, req{method: e.method, url: base + e.path, body: []byte(e.body)}), 401, api.CodeUnauthorized, "")
		errorReply(t, do(t, req{method: e.method, url: base + api.PathNode + "nx" + e.path[len(api.PathNode)+2:], token: "adm",
			body: []byte(e.body), header: map[string]string{"Content-Type": "application/json"}}), 404, api.CodeNotFound, `node "nx"`)
	}
	if st := s.FSM().Nodes()[0]; st.State != api.NodeReady {
		t.Fatalf("n1 is %s after the refusals", st.State)
	}

	cl, err := api.NewClient(api.ClientConfig{Addrs: []string{base}, Token: "adm"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if err := cl.RemoveNode(ctx, "n1"); !api.IsConflict(err) {
		t.Fatalf("remove of a ready node: %v, want a conflict", err)
	}
	for _, bad := range []string{`{"timeout":"-1s"}`, `{"timeout":"1h","deadline":"2030-01-01T00:00:00Z"}`, `{"after":"1h"}`, `[]`,
		`{"timeout":"1000000h"}`, `{"deadline":"2300-01-01T00:00:00Z"}`} {
		errorReply(t, do(t, req{method: "POST", url: base + drain, token: "adm", body: []byte(bad),
			header: map[string]string{"Content-Type": "application/json"}}), 400, api.CodeInvalid, "")
	}
	before := time.Now()
	res, err := cl.DrainNode(ctx, "n1", api.DrainRequest{Timeout: api.Duration(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Name != "n1" || res.State != api.NodeDraining || !res.Drained || res.Tasks != 1 || res.DrainDeadline.Before(before.Add(time.Hour)) {
		t.Fatalf("drain: %+v", res)
	}
	list, err := cl.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := list.Nodes[0]; n.State != api.NodeDraining || !n.Drained || !n.DrainDeadline.Equal(res.DrainDeadline) {
		t.Fatalf("listed: %s drained=%v until %v", n.State, n.Drained, n.DrainDeadline)
	}
	if err := cl.RemoveNode(ctx, "n1"); !api.IsConflict(err) {
		t.Fatalf("remove of a node with a task: %v, want a conflict", err)
	}
	// An empty body drains without a deadline.
	r := decode[api.NodeDrainResponse](t, do(t, req{method: "POST", url: base + drain, token: "adm"}), 200)
	if !r.Drained || !r.DrainDeadline.IsZero() {
		t.Fatalf("drain without a body: %+v", r)
	}
	if res, err = cl.UndrainNode(ctx, "n1"); err != nil || res.State != api.NodeReady || res.Drained {
		t.Fatalf("undrain: %+v, %v", res, err)
	}
	// A deadline passed stops the task at once; then the node goes.
	if res, err = cl.DrainNode(ctx, "n1", api.DrainRequest{Deadline: time.Now().Add(-time.Second)}); err != nil || res.Stopped != 1 || res.Tasks != 0 {
		t.Fatalf("drain with a deadline passed: %+v, %v", res, err)
	}
	if err := cl.RemoveNode(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if err := cl.RemoveNode(ctx, "n1"); api.ErrorCode(err) != api.CodeNotFound {
		t.Fatalf("remove again: %v, want not found", err)
	}
	if l, _ := cl.Nodes(ctx); len(l.Nodes) != 0 {
		t.Fatalf("nodes after the remove: %+v", l.Nodes)
	}
	if r := do(t, req{method: "POST", url: base + api.PathNodes, token: "nl", body: []byte(nodeJSON("n1", ""))}); r.status != 200 {
		t.Fatalf("register again: %s", r)
	}
	if l, _ := cl.Nodes(ctx); len(l.Nodes) != 1 || l.Nodes[0].State != api.NodeReady || l.Nodes[0].Drained {
		t.Fatalf("nodes after registering again: %+v", l.Nodes)
	}
	waitFor(t, 10*time.Second, "the task placed again", func() bool {
		st, _ := s.FSM().Job(j)
		return st.Groups[0].Active == 1
	})
}
