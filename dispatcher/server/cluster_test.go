package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/server"
)

// TestFollowerRedirects runs three replicas over loopback TCP: writes to a
// follower are redirected to the leader's HTTP address, and following the
// redirect works; reads are served locally.
func TestFollowerRedirects(t *testing.T) {
	c := openThree(t, nil)
	servers, peerHTTP := c.servers, c.peerHTTP
	leader := c.leader(t, 0)
	var follower *server.Server
	for _, s := range servers {
		if s != leader {
			follower = s
			break
		}
	}
	waitFor(t, 10*time.Second, "the follower to know the leader", func() bool {
		return follower.Raft().Status().Leader == leader.Raft().Status().ID
	})
	leaderURL := peerHTTP[leader.Raft().Status().ID]

	body := []byte(jobJSON("redirected", "", 1))
	r := do(t, req{method: "POST", url: follower.Addr() + api.PathJobs + "?x=1", body: body})
	e := errorReply(t, r, 307, api.CodeNotLeader, "leader")
	if !r.close {
		t.Error("the redirect of a submit keeps the connection open; want it closed")
	}
	if e.Leader != leaderURL || r.header.Get("Location") != leaderURL+api.PathJobs+"?x=1" {
		t.Fatalf("redirect: leader %q, location %q; want %q", e.Leader, r.header.Get("Location"), leaderURL)
	}
	// The leader rejects the unknown parameter x: follow without it.
	loc := strings.TrimSuffix(r.header.Get("Location"), "?x=1")
	res := decode[api.SubmitResponse](t, do(t, req{method: "POST", url: loc, body: body}), 200)
	if len(res.Jobs) != 1 {
		t.Fatalf("submit at the leader: %+v", res)
	}

	// Cancel and the nodelet's endpoints are redirected too.
	for _, q := range []req{
		{method: "DELETE", url: follower.Addr() + api.PathJob + res.Jobs[0]},
		{method: "POST", url: follower.Addr() + api.PathNodes, body: []byte(nodeJSON("n1", ""))},
		{method: "GET", url: follower.Addr() + api.PathNode + "n1/target?wait=1s"},
		{method: "POST", url: follower.Addr() + api.PathNode + "n1/reports", body: []byte(`{"reports":[]}`)},
		{method: "POST", url: follower.Addr() + api.PathNode + "n1/reports", body: []byte(`{"usage":{"total":{"cpu":1,"memory":1},"online":{"cpu":1,"memory":1},"offline":{"cpu":0,"memory":0}}}`)},
	} {
		r := do(t, q)
		errorReply(t, r, 307, api.CodeNotLeader, "")
		if !strings.HasPrefix(r.header.Get("Location"), leaderURL+"/v1/") {
			t.Errorf("%s %s: Location %q", q.method, q.url, r.header.Get("Location"))
		}
		if !r.close {
			t.Errorf("%s %s: the redirect keeps the connection open; want it closed (the client goes to the leader)", q.method, q.url)
		}
	}

	// A consistent read on the follower sees the job at once, on a
	// connection kept open.
	if r := do(t, req{method: "GET", url: follower.Addr() + api.PathJobs}); r.status != 200 || r.close {
		t.Errorf("a read on the follower: %s, closing %v; want 200 and the connection kept", r, r.close)
	}
	l := listJobs(t, follower.Addr(), "", "?consistent=1")
	if len(l.Jobs) != 1 || l.Jobs[0].ID != res.Jobs[0] {
		t.Fatalf("consistent read on the follower: %+v", l)
	}
	// Node usage lives in the leader's memory only: a follower's node
	// list has none.
	if r := do(t, req{method: "POST", url: leaderURL + api.PathNodes, body: []byte(nodeJSON("n1", ""))}); r.status != 200 {
		t.Fatalf("register at the leader: %s", r)
	}
	hb := []byte(`{"usage":{"total":{"cpu":250,"memory":1024},"online":{"cpu":0,"memory":0},"offline":{"cpu":250,"memory":1024}}}`)
	if r := do(t, req{method: "POST", url: leaderURL + api.PathNode + "n1/reports", body: hb}); r.status != 204 {
		t.Fatalf("heartbeat at the leader: %s", r)
	}
	for _, c := range []struct {
		url  string
		want bool
	}{{leaderURL, true}, {follower.Addr(), false}} {
		nl := decode[api.NodeList](t, do(t, req{method: "GET", url: c.url + api.PathNodes + "?consistent=1"}), 200)
		if len(nl.Nodes) != 1 || (nl.Nodes[0].Usage != nil) != c.want || nl.Nodes[0].LastHeartbeat.IsZero() == c.want {
			t.Errorf("nodes at %s: %+v; want usage: %v", c.url, nl.Nodes, c.want)
		}
	}

	// Every replica is ready.
	for _, s := range servers {
		if r := do(t, req{method: "GET", url: s.Addr() + api.PathReady}); r.status != 200 {
			t.Errorf("readyz of %s: %s", s.Addr(), r)
		}
	}
}

// TestClusterNodeTotals: GET /v1/cluster sums the nodes as GET /v1/nodes
// lists them: by state, what they may allocate and what their tasks hold,
// per tier, and the usage the leader holds from heartbeats.
func TestClusterNodeTotals(t *testing.T) {
	s := openOne(t, nil)
	base := s.Addr()
	empty := decode[api.ClusterStatus](t, do(t, req{url: base + api.PathCluster}), 200)
	if n := empty.Nodes; n.Total != 0 || len(n.States) != 0 || n.Usage != nil || n.UsageNodes != 0 || n.Allocatable != (api.Allocatable{}) {
		t.Fatalf("no nodes: totals %+v", n)
	}
	for _, name := range []string{"n1", "n2", "n3"} {
		if r := do(t, req{method: "POST", url: base + api.PathNodes, body: []byte(nodeJSON(name, ""))}); r.status != 200 {
			t.Fatalf("register %s: %s", name, r)
		}
	}
	if r := do(t, req{method: "POST", url: base + api.PathNode + "n3/drain"}); r.status != 200 {
		t.Fatalf("drain n3: %s", r)
	}
	submit(t, base, "", jobJSON("four", "", 4), nil)
	waitFor(t, 10*time.Second, "four tasks placed", func() bool {
		n := 0
		for _, ni := range s.FSM().Nodes() {
			n += ni.Tasks
		}
		return n == 4
	})
	if r := do(t, req{method: "POST", url: base + api.PathNode + "n1/reports",
		body: []byte(`{"usage":{"total":{"cpu":700,"memory":3000},"online":{"cpu":500,"memory":2000},"offline":{"cpu":200,"memory":1000}}}`)}); r.status != 204 {
		t.Fatalf("heartbeat of n1: %s", r)
	}
	c := decode[api.ClusterStatus](t, do(t, req{url: base + api.PathCluster}), 200)
	n := c.Nodes
	const cpu, mem = 8000, 8 << 30 // a node's, either tier (nodeJSON)
	if n.Total != 3 || n.States[api.NodeReady] != 2 || n.States[api.NodeDraining] != 1 || len(n.States) != 2 {
		t.Errorf("states: total %d, %v; want 3: 2 ready, 1 draining", n.Total, n.States)
	}
	want := api.Capacity{CPU: 3 * cpu, Memory: 3 * mem}
	if n.Allocatable.Online != want || n.Allocatable.Offline != want {
		t.Errorf("allocatable %+v, want %+v a tier", n.Allocatable, want)
	}
	if u := n.Used; u.Offline.CPU != 400 || u.Offline.Memory != 4<<20 || u.Online != (api.Capacity{}) {
		t.Errorf("used %+v, want the four offline tasks' 400 millicores and 4 MiB", u)
	}
	wantUsage := api.NodeUsage{Total: api.Usage{CPU: 700, Memory: 3000}, Online: api.Usage{CPU: 500, Memory: 2000}, Offline: api.Usage{CPU: 200, Memory: 1000}}
	if n.UsageNodes != 1 || n.Usage == nil || n.Usage.Total != wantUsage.Total || n.Usage.Online != wantUsage.Online || n.Usage.Offline != wantUsage.Offline {
		t.Errorf("usage of %d nodes %+v, want n1's %+v", n.UsageNodes, n.Usage, wantUsage)
	}
	// The totals are the list's sums.
	list := decode[api.NodeList](t, do(t, req{url: base + api.PathNodes}), 200)
	var sum api.Allocatable
	for _, ni := range list.Nodes {
		sum.Online = sum.Online.Plus(ni.Used.Online, 1)
		sum.Offline = sum.Offline.Plus(ni.Used.Offline, 1)
	}
	if sum != n.Used {
		t.Errorf("used %+v, the list sums to %+v", n.Used, sum)
	}
}

// TestNodesPaging: GET /v1/nodes lists the nodes by name, a page at a
// time (limit, after, next), filtered by state; without a limit, all of
// them; a bad state, limit or parameter is refused, naming it.
func TestNodesPaging(t *testing.T) {
	s := openOne(t, nil)
	base := s.Addr()
	for _, name := range []string{"n4", "n2", "n5", "n1", "n3"} {
		if r := do(t, req{method: "POST", url: base + api.PathNodes, body: []byte(nodeJSON(name, ""))}); r.status != 200 {
			t.Fatalf("register %s: %s", name, r)
		}
	}
	if r := do(t, req{method: "POST", url: base + api.PathNode + "n3/drain"}); r.status != 200 {
		t.Fatalf("drain n3: %s", r)
	}
	page := func(query string) string {
		t.Helper()
		l := decode[api.NodeList](t, do(t, req{url: base + api.PathNodes + query}), 200)
		var names []string
		for _, n := range l.Nodes {
			names = append(names, n.Spec.Name)
		}
		return strings.Join(names, ",") + " next=" + l.Next
	}
	for query, want := range map[string]string{
		"":                              "n1,n2,n3,n4,n5 next=",
		"?limit=2":                      "n1,n2 next=n2",
		"?limit=2&after=n2":             "n3,n4 next=n4",
		"?limit=2&after=n4":             "n5 next=",
		"?limit=1&after=n5":             " next=",
		"?after=n25":                    "n3,n4,n5 next=",
		"?state=draining":               "n3 next=",
		"?state=ready&limit=2&after=n2": "n4,n5 next=",
		"?state=down":                   " next=",
	} {
		if got := page(query); got != want {
			t.Errorf("GET /v1/nodes%s: %s, want %s", query, got, want)
		}
	}
	for query, param := range map[string]string{"?state=gone": "state", "?limit=0": "limit", "?limit=x": "limit", "?page=2": "page"} {
		errorReply(t, do(t, req{url: base + api.PathNodes + query}), 400, api.CodeInvalid, param)
	}
	// The client pages alike.
	cl, err := api.NewClient(api.ClientConfig{Addrs: []string{base}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	l, err := cl.NodesPage(context.Background(), api.NodeQuery{State: api.NodeReady, After: "n1", Limit: 2})
	if err != nil || len(l.Nodes) != 2 || l.Nodes[0].Spec.Name != "n2" || l.Nodes[1].Spec.Name != "n4" || l.Next != "n4" {
		t.Fatalf("NodesPage: %+v, %v; want n2, n4, next n4", l, err)
	}
}
