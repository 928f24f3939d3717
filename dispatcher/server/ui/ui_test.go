package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher"
	"github.com/sluicehq/sluice/dispatcher/server"
	"github.com/sluicehq/sluice/internal/porttest"
)

var update = flag.Bool("update", false, "TestScreenshots: write a screenshot of every page to docs/ui")

// The test cluster's tokens: one per role, and one per node.
const tokenFile = `adm admin
rdr reader
sub submitter
subb submitter batch
nl1 nodelet n1
nl2 nodelet n2
`

// cluster is a single-replica dispatcher on loopback with nodes played
// by the test.
type cluster struct {
	t    testing.TB
	base string
	ctx  context.Context
	// clients by token.
	clients map[string]*api.Client
	// reported holds the tasks reported running, by ID.
	reported map[string]bool
}

// startCluster starts the cluster; jobRetention, when not 0, is how
// long its finished jobs are kept before their summaries replace them.
func startCluster(t testing.TB, jobRetention time.Duration) *cluster {
	t.Helper()
	tokens, err := server.ParseTokens(strings.NewReader(tokenFile))
	if err != nil {
		t.Fatal(err)
	}
	addr := porttest.Addrs(t, 1)[0]
	s, err := server.Open(server.Config{
		ID: 1, Peers: map[uint64]string{1: ""}, PeerHTTP: map[uint64]string{1: "http://" + addr},
		Dir: t.TempDir(), HTTPAddr: addr, Tokens: tokens, TickInterval: 20 * time.Millisecond,
		WatchKeepAlive: time.Second,
		// The test plays its nodes only when it calls run: a node must not
		// go down between calls however slow the host (the liveness
		// checks keep their default pace, for drain deadlines).
		Dispatcher: dispatcher.Config{MaxWait: 2 * time.Millisecond, Period: 100 * time.Millisecond, QueueWeights: map[string]int64{"batch": 3},
			JobRetention: jobRetention, NodeTTL: time.Hour, LivenessEvery: dispatcher.DefaultNodeTTL / 4},
	})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	c := &cluster{t: t, base: s.Addr(), ctx: ctx, clients: map[string]*api.Client{}, reported: map[string]bool{}}
	for _, tok := range []string{"adm", "rdr", "sub", "subb", "nl1", "nl2"} {
		cl, err := api.NewClient(api.ClientConfig{Addrs: []string{c.base}, Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		c.clients[tok] = cl
	}
	deadline := time.After(10 * time.Second)
	for {
		changed := s.Dispatcher().Changed() // before Leading, so that no change is missed
		if _, ok := s.Dispatcher().Leading(); ok {
			return c
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("the replica did not lead within 10s")
		}
	}
}

// waitFor tests cond every 10ms until it holds, and fails the test after
// 10s: for what the pages and the API show over HTTP, which nothing
// signals.
func (c *cluster) waitFor(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// addNode registers a node of 8 cores and 8 GiB in each tier, whose log
// server (on loopback) answers each task's log with one line.
func (c *cluster) addNode(name, token string) {
	c.t.Helper()
	logToken := api.NewLogToken()
	logs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != api.PathNodeletLogs || r.Header.Get("Authorization") != "Bearer "+logToken {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		fmt.Fprintf(w, "hello from %s on %s\n", r.URL.Query().Get("task"), name)
	}))
	c.t.Cleanup(logs.Close)
	tier := api.Capacity{CPU: 8000, Memory: 8 << 30}
	err := c.clients[token].RegisterNode(c.ctx, api.NodeSpec{Name: name, Address: logs.Listener.Addr().String(), LogToken: logToken,
		Labels: map[string]string{"rack": "r1"}, Capacity: api.Capacity{CPU: 16000, Memory: 16 << 30},
		Allocatable: api.Allocatable{Online: tier, Offline: tier}})
	if err != nil {
		c.t.Fatalf("register %s: %v", name, err)
	}
}

// run plays node name's nodelet once: every pod of its target not
// reported yet is reported running, and the node reports its usage, with
// its overcommit controller's quota for the offline tier.
func (c *cluster) run(name, token string) int {
	c.t.Helper()
	tg, _, err := c.clients[token].Target(c.ctx, name, 0, 0)
	if err != nil {
		c.t.Fatalf("target of %s: %v", name, err)
	}
	var reps []api.TaskReport
	usage := api.NodeUsage{Overcommit: &api.OvercommitStatus{CPUQuota: 6500, CPUMin: 400, CPUMax: 8000,
		MemoryLimit: 6 << 30, MemoryGuaranteed: 2 << 30, Decided: time.Now().UTC()}}
	for _, p := range tg.Pods {
		usage.Offline.CPU += 300
		usage.Offline.Memory += 200 << 20
		if !c.reported[p.TaskID] {
			c.reported[p.TaskID] = true
			reps = append(reps, api.TaskReport{TaskID: p.TaskID, State: api.TaskRunning, Reason: api.ReasonStarted, Time: time.Now()})
		}
	}
	usage.Total = usage.Offline
	if len(reps) > 0 {
		if err := c.clients[token].Report(c.ctx, name, reps); err != nil {
			c.t.Fatalf("report: %v", err)
		}
	}
	if err := c.clients[token].Heartbeat(c.ctx, name, usage); err != nil {
		c.t.Fatalf("heartbeat: %v", err)
	}
	return len(tg.Pods)
}

// job is a job of count sim tasks of cpu millicores each.
func job(name, queue string, count, cpu int64) api.JobSpec {
	return api.JobSpec{Name: name, Queue: queue, Labels: map[string]string{"team": "t-" + name}, Tasks: []api.TaskGroupSpec{{
		Name: "work", Count: count, Pod: api.PodSpec{Sim: &api.SimSpec{RunTime: api.Duration(time.Hour)}, Containers: []api.ContainerSpec{{
			Image: api.Image{Rootfs: "/r"}, Command: []string{"x"}, Resources: api.Resources{CPU: cpu, Memory: 64 << 20}}}},
	}}}
}

func (c *cluster) submit(token string, specs ...api.JobSpec) []string {
	c.t.Helper()
	r, err := c.clients[token].Submit(c.ctx, specs, api.SubmitOptions{})
	if err != nil {
		c.t.Fatalf("submit: %v", err)
	}
	return r.Jobs
}

// getJSON reads path with token.
func (c *cluster) getJSON(path, token string, v any) {
	c.t.Helper()
	hr, _ := http.NewRequest("GET", c.base+path, nil)
	hr.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		c.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		c.t.Fatalf("GET %s: %v", path, err)
	}
}

// pendingReason waits for job id's first pending reason.
func (c *cluster) pendingReason(id string) string {
	c.t.Helper()
	var reason string
	c.waitFor(id+"'s pending reason", func() bool {
		var j api.JobStatus
		c.getJSON(api.PathJob+id, "adm", &j)
		if len(j.Pending) > 0 {
			reason = j.Pending[0].Reason
		}
		return reason != ""
	})
	return reason
}

// chromium finds the browser: skipped where there is none, but under CI
// its absence fails.
func chromium(t testing.TB) string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium on the PATH: the browser tests need Debian's chromium (scripts/install-chromium.sh, as root)"
	if ci, err := strconv.ParseBool(os.Getenv("CI")); err == nil && ci {
		t.Fatal(msg + "; CI is set, so it must be there")
	}
	t.Skip(msg)
	return ""
}

// browser starts a headless chromium; its context ends with the test.
func browser(t testing.TB) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium(t)), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1440, 1000), chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	t.Cleanup(func() { cancel(); cancelBrowser(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", chromium(t), err)
	}
	return ctx
}

// js quotes s as a JavaScript string.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// waitJS waits for the JavaScript expression to be true.
func waitJS(t testing.TB, ctx context.Context, what, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		var state string
		state, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#main') ? document.querySelector('#main').innerText.slice(0, 2000) : ''`))
		t.Fatalf("waiting for %s (%s): %v\npage: %s", what, expr, err, state)
	}
}

// text is the expression that is true when the element of sel reads want.
func text(sel, want string) string {
	return fmt.Sprintf(`(() => { const e = document.querySelector(%s); return !!e && e.textContent.trim() === %s })()`, js(sel), js(want))
}

func eval[T any](t testing.TB, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func do(t testing.TB, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// signIn signs in on the page shown with token.
func signIn(t testing.TB, ctx context.Context, token string) {
	t.Helper()
	do(t, ctx, chromedp.WaitVisible(chromedp.CSS("#token")), chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS(`#login button[type=submit]`)))
}

// TestBrowser drives the UI in chromium against a real dispatcher: the
// overview shows the cluster's numbers, a job submitted through the API
// appears in the jobs page without a reload, a job that cannot fit shows
// why, and cancel is offered to a submitter, works, and is neither
// offered to nor allowed for a reader; the cancelled job, forgotten,
// is listed as history and shows its summary; drain and undrain are
// offered to an admin and work, and are neither offered to nor allowed
// for a reader; the queues page shows a queue's caps; a node's page shows
// its overcommit quota from its heartbeat, and "—" without one.
func TestBrowser(t *testing.T) {
	chromium(t)
	c := startCluster(t, 300*time.Millisecond)
	c.addNode("n1", "nl1")
	fits := c.submit("sub", job("fits", "", 2, 500))[0]
	c.waitFor("fits to be placed", func() bool { return c.run("n1", "nl1") == 2 })
	huge := c.submit("sub", job("huge", "batch", 1, 64000))[0]
	reason := c.pendingReason(huge)

	ctx := browser(t)
	base := c.base + api.PathUI

	// Without a token the page shows a sign-in form and no data; an
	// unknown token is refused.
	do(t, ctx, chromedp.Navigate(base))
	waitJS(t, ctx, "the sign-in form", `!document.querySelector('#login').hidden && document.querySelector('#main').hidden`)
	signIn(t, ctx, "nope")
	waitJS(t, ctx, "the refusal", `document.querySelector('#login-error').textContent !== ''`)
	signIn(t, ctx, "rdr")

	// The overview's numbers are the cluster's.
	var cs api.ClusterStatus
	c.getJSON(api.PathCluster, "rdr", &cs)
	if cs.Tasks.Total != 3 || cs.Tasks.Active != 2 || cs.Tasks.Pending != 1 {
		t.Fatalf("cluster tasks %+v: want 3 of which 2 active and 1 pending", cs.Tasks)
	}
	if cs.Nodes.Total != 1 || cs.Nodes.States[api.NodeReady] != 1 || cs.Nodes.Allocatable.Online.CPU != 8000 {
		t.Fatalf("cluster nodes %+v: want 1, ready, of 8 online cores", cs.Nodes)
	}
	for sel, want := range map[string]string{
		`[data-k=nodes-total]`: "1", `[data-k=nodes-ready]`: "1",
		`[data-k=tasks-total]`: fmt.Sprint(cs.Tasks.Total), `[data-k=tasks-active]`: fmt.Sprint(cs.Tasks.Active),
		`[data-k=tasks-pending]`: fmt.Sprint(cs.Tasks.Pending), `[data-k=jobs-running]`: "1", `[data-k=jobs-pending]`: "1",
		`[data-k=online-cpu]`: "8", `#who`: "signed in as reader",
	} {
		waitJS(t, ctx, sel+" = "+want, text(sel, want))
	}
	waitJS(t, ctx, "the placements chart", `Number(document.querySelector('#chart-rate').dataset.max) > 0 && !!document.querySelector('#chart-rate polyline')`)
	// The overview reads the cluster's totals, not every node: the list
	// is megabytes at ten thousand nodes.
	if eval[bool](t, ctx, `performance.getEntriesByType('resource').some((e) => new URL(e.name).pathname === '/v1/nodes')`) {
		t.Error("the overview read /v1/nodes")
	}

	// The jobs page follows the watch stream: a job submitted now shows
	// up in the page loaded before.
	do(t, ctx, chromedp.Navigate(base+"jobs"))
	waitJS(t, ctx, "the jobs listed", fmt.Sprintf(`!!document.querySelector('td[data-job=%s]') && !!document.querySelector('td[data-job=%s]')`, js(fits), js(huge)))
	eval[bool](t, ctx, `window.sameDocument = true`)
	late := c.submit("sub", job("late", "", 1, 100))[0]
	waitJS(t, ctx, "the new job in the list", fmt.Sprintf(`!!document.querySelector('td[data-job=%s]')`, js(late)))
	if !eval[bool](t, ctx, `window.sameDocument === true`) {
		t.Fatal("the jobs page reloaded to show the new job")
	}
	waitJS(t, ctx, "the live mark", text("#live", "● live"))

	// Pages of one job each.
	do(t, ctx, chromedp.Navigate(base+"jobs?limit=1"))
	onlyJob := func(id string) string {
		return fmt.Sprintf(`document.querySelectorAll('#jobs td[data-job]').length === 1 && !!document.querySelector('td[data-job=%s]')`, js(id))
	}
	waitJS(t, ctx, "the first page", onlyJob(fits))
	do(t, ctx, chromedp.Click(chromedp.CSS("#next")))
	waitJS(t, ctx, "the second page", onlyJob(huge)+` && location.search.includes('after=')`)
	do(t, ctx, chromedp.Click(chromedp.CSS("#prev")))
	waitJS(t, ctx, "the first page again", onlyJob(fits))

	// A filter by state.
	do(t, ctx, chromedp.SetValue(chromedp.CSS(`select[name=state]`), "running"), chromedp.Click(chromedp.CSS(`#filter button[type=submit]`)))
	waitJS(t, ctx, "the running jobs alone", fmt.Sprintf(`!!document.querySelector('td[data-job=%s]') && !document.querySelector('td[data-job=%s]')`, js(fits), js(huge)))

	// The job that cannot fit says why; a reader gets no cancel button,
	// and the server refuses a reader's cancel sent from the page.
	do(t, ctx, chromedp.Navigate(base+"jobs/"+huge))
	waitJS(t, ctx, "the pending reason", text(`[data-k=reason]`, reason))
	waitJS(t, ctx, "the job's state", text("#job-state", "pending"))
	if !eval[bool](t, ctx, `document.querySelector('#cancel').hidden`) {
		t.Error("a reader is offered cancel")
	}
	status := eval[int](t, ctx, fmt.Sprintf(`fetch(%s, {method: 'DELETE', headers: {Authorization: 'Bearer ' + sessionStorage.getItem('sluice.token')}}).then((r) => r.status)`,
		js(api.PathJob+huge)))
	if status != http.StatusForbidden {
		t.Errorf("a reader's cancel from the page: status %d, want 403", status)
	}

	// Signing out takes the data away; a submitter may cancel.
	do(t, ctx, chromedp.Click(chromedp.CSS("#logout")))
	waitJS(t, ctx, "the sign-in form", `!document.querySelector('#login').hidden && document.querySelector('#pending tbody').children.length === 0 && document.querySelector('#job-state').textContent === ''`)
	signIn(t, ctx, "sub")
	waitJS(t, ctx, "the cancel button", `!document.querySelector('#cancel').hidden`)
	do(t, ctx, chromedp.Click(chromedp.CSS("#cancel")), chromedp.Click(chromedp.CSS("#cancel")))
	waitJS(t, ctx, "the job cancelled", text("#job-state", "cancelled"))
	var j api.JobStatus
	c.getJSON(api.PathJob+huge, "adm", &j)
	if j.State != api.JobCancelled {
		t.Errorf("after cancel in the page, the job is %s", j.State)
	}
	waitJS(t, ctx, "no cancel for an ended job", `document.querySelector('#cancel').hidden`)

	// Forgotten after the cluster's job retention, the cancelled job is
	// listed as history (in the jobs page open before: forgetting a job
	// is a watch event), alone with the filter history=only, and its
	// page shows its summary without cancel or tasks.
	do(t, ctx, chromedp.Navigate(base+"jobs"))
	eval[bool](t, ctx, `window.sameDocument = true`)
	c.waitFor(huge+" forgotten", func() bool {
		var j api.JobStatus
		c.getJSON(api.PathJob+huge, "adm", &j)
		return j.History
	})
	histRow := fmt.Sprintf(`document.querySelector('td[data-job=%s]')?.parentElement.querySelector('[data-k=history]')?.textContent === '(history)'`, js(huge))
	waitJS(t, ctx, "the cancelled job as history", histRow+fmt.Sprintf(` && !document.querySelector('td[data-job=%s]').parentElement.querySelector('[data-k=history]')`, js(fits)))
	if !eval[bool](t, ctx, `window.sameDocument === true`) {
		t.Error("the jobs page was loaded again to show the job as history")
	}
	do(t, ctx, chromedp.SetValue(chromedp.CSS(`select[name=history]`), "only"), chromedp.Click(chromedp.CSS(`#filter button[type=submit]`)))
	waitJS(t, ctx, "history alone", onlyJob(huge)+` && location.search.includes('history=only')`)
	do(t, ctx, chromedp.SetValue(chromedp.CSS(`select[name=history]`), "exclude"), chromedp.Click(chromedp.CSS(`#filter button[type=submit]`)))
	waitJS(t, ctx, "no history", `!!document.querySelector('td[data-job=`+js(fits)+`]') && !document.querySelector('td[data-job=`+js(huge)+`]')`)
	do(t, ctx, chromedp.Navigate(base+"jobs/"+huge))
	waitJS(t, ctx, "the summary", `!document.querySelector('#job-history').hidden && document.querySelector('#job-live').hidden && `+
		text(`[data-k=tasks-killed]`, "1")+` && `+text(`[data-k=first-failure]`, "none")+` && `+text(`[data-k=started]`, "never placed"))
	if !eval[bool](t, ctx, `document.querySelector('#cancel').hidden && document.querySelector('#job-state').textContent === 'cancelled'`) {
		t.Error("a history job's page offers cancel or has the wrong state")
	}

	// A task's log, through its link on its job's page.
	do(t, ctx, chromedp.Navigate(base+"jobs/"+fits))
	waitJS(t, ctx, "the tasks' log links", `document.querySelectorAll('#tasks tbody a[href*="/logs/"]').length === 2`)
	do(t, ctx, chromedp.Navigate(eval[string](t, ctx, `document.querySelector('#tasks tbody a[href*="/logs/"]').href`)))
	waitJS(t, ctx, "the log", text("#log-text", "hello from "+fits+"/0/0/1 on n1"))

	// A submitter of queue batch alone reads nothing of fits, in the
	// default queue, and is offered no cancel there.
	do(t, ctx, chromedp.Navigate(base+"jobs/"+fits), chromedp.Click(chromedp.CSS("#logout")))
	signIn(t, ctx, "subb")
	waitJS(t, ctx, "the submitter of batch", text("#who", "signed in as submitter (batch)"))
	waitJS(t, ctx, "the refusal", `document.querySelector('#error').textContent.includes('may not use')`)
	if !eval[bool](t, ctx, `document.querySelector('#cancel').hidden && document.querySelector('#job-state').textContent === ''`) {
		t.Error("a submitter of another queue sees the job or is offered cancel")
	}

	// A node's page lists its pods: the two of fits and the one of late;
	// and the offline tier's quota from its heartbeat.
	do(t, ctx, chromedp.Navigate(base+"nodes/n1"))
	waitJS(t, ctx, "n1's pods", `document.querySelectorAll('#pods tbody tr').length === 3 && document.querySelector('#node-state').textContent === 'ready'`)
	waitJS(t, ctx, "n1's overcommit quota", text(`[data-k=oc-cpu]`, "6.50 cores (0.40–8)")+` && `+text(`[data-k=oc-memory-limit]`, "6.0 GiB")+
		` && `+text(`[data-k=oc-memory-guaranteed]`, "2.0 GiB")+` && document.querySelector('[data-k=oc-decided]').textContent.includes(' ago (')`)
	if !eval[bool](t, ctx, `document.querySelector('#drain-controls').hidden`) {
		t.Error("a submitter is offered drain")
	}

	// A reader is offered no drain, and the server refuses a reader's
	// drain and undrain sent from the page.
	do(t, ctx, chromedp.Click(chromedp.CSS("#logout")))
	signIn(t, ctx, "rdr")
	waitJS(t, ctx, "n1 for a reader", text(`[data-k=drain]`, "not drained"))
	if !eval[bool](t, ctx, `document.querySelector('#drain-controls').hidden`) {
		t.Error("a reader is offered drain")
	}
	for _, method := range []string{"POST", "DELETE"} {
		status := eval[int](t, ctx, fmt.Sprintf(`fetch(%s, {method: %s, headers: {Authorization: 'Bearer ' + sessionStorage.getItem('sluice.token')}}).then((r) => r.status)`,
			js(api.PathNode+"n1/drain"), js(method)))
		if status != http.StatusForbidden {
			t.Errorf("a reader's %s of n1's drain from the page: status %d, want 403", method, status)
		}
	}

	// An admin drains n1 with a deadline, on a second click: the API
	// and the nodes page show it draining; then undrains it.
	do(t, ctx, chromedp.Click(chromedp.CSS("#logout")))
	signIn(t, ctx, "adm")
	waitJS(t, ctx, "the drain button", `!document.querySelector('#drain-controls').hidden && document.querySelector('#undrain').hidden`)
	before := time.Now()
	do(t, ctx, chromedp.SetValue(chromedp.CSS("#drain-timeout"), "30m"), chromedp.Click(chromedp.CSS("#drain")))
	waitJS(t, ctx, "the drain to confirm", `document.querySelector('#drain').textContent === 'Confirm: drain n1, deadline in 30m'`)
	if nd, err := c.clients["rdr"].Node(c.ctx, "n1"); err != nil || nd.Drained {
		t.Fatalf("n1 drained on a first click: %+v %v", nd.NodeInfo, err)
	}
	do(t, ctx, chromedp.Click(chromedp.CSS("#drain")))
	waitJS(t, ctx, "n1 draining", text("#node-state", "draining")+` && document.querySelector('[data-k=drain]').textContent.startsWith('drained, deadline ') && !document.querySelector('#undrain').hidden`)
	nd, err := c.clients["rdr"].Node(c.ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi := before.Add(30*time.Minute), time.Now().Add(30*time.Minute); nd.State != api.NodeDraining || !nd.Drained ||
		nd.DrainDeadline.Before(lo.Add(-time.Second)) || nd.DrainDeadline.After(hi) {
		t.Errorf("after a drain from the page, n1 is %s, drained %v, deadline %v (want within 30m of now)", nd.State, nd.Drained, nd.DrainDeadline)
	}
	do(t, ctx, chromedp.Navigate(base+"nodes"))
	waitJS(t, ctx, "n1 draining in the list", `(document.querySelector('#nodes [data-k=drain]')?.textContent || '').startsWith('drained, deadline ')`)
	do(t, ctx, chromedp.Navigate(base+"nodes/n1"))
	waitJS(t, ctx, "the undrain button", `!document.querySelector('#undrain').hidden`)
	do(t, ctx, chromedp.Click(chromedp.CSS("#undrain")), chromedp.Click(chromedp.CSS("#undrain")))
	waitJS(t, ctx, "n1 ready", text("#node-state", "ready")+` && `+text(`[data-k=drain]`, "not drained")+` && document.querySelector('#undrain').hidden`)
	if nd, err := c.clients["rdr"].Node(c.ctx, "n1"); err != nil || nd.State != api.NodeReady || nd.Drained {
		t.Errorf("after an undrain from the page, n1: %+v %v", nd.NodeInfo, err)
	}

	// A cap set through the API shows on the queues page against use.
	if _, err := c.clients["adm"].SetQueue(c.ctx, "batch", api.QueueSettings{Caps: api.QueueCaps{CPU: 4000, Tasks: 10}}); err != nil {
		t.Fatal(err)
	}
	do(t, ctx, chromedp.Navigate(base+"queues"))
	queueCell := func(q, k string) string {
		return fmt.Sprintf(`document.querySelector('td[data-queue=%s]')?.parentElement.querySelector('[data-k=%s]')`, js(q), k)
	}
	waitJS(t, ctx, "batch's caps", fmt.Sprintf(`%s?.textContent === '0 / 4' && %s?.textContent === '0 / 10' && %s?.textContent === '0 B / —' && %s?.textContent === '1.10 / —'`,
		queueCell("batch", "cpu"), queueCell("batch", "tasks"), queueCell("batch", "memory"), queueCell("default", "cpu")))

	// A node that has sent no heartbeat shows no overcommit quota.
	c.addNode("n2", "nl2")
	do(t, ctx, chromedp.Navigate(base+"nodes/n2"))
	waitJS(t, ctx, "n2 without an overcommit quota", text(`[data-k=oc-cpu]`, "—")+` && `+text(`[data-k=oc-decided]`, "—"))

	// The nodes page reads a page of nodes at a time, filtered by state.
	do(t, ctx, chromedp.Navigate(base+"nodes?limit=1"))
	names := `[...document.querySelectorAll('#nodes tbody tr td:first-child')].map((td) => td.textContent).join(',')`
	waitJS(t, ctx, "the first page of one node", names+` === 'n1' && !document.querySelector('#next').disabled && document.querySelector('#prev').disabled`)
	do(t, ctx, chromedp.Click(chromedp.CSS(`#next`)))
	waitJS(t, ctx, "the second page", names+` === 'n2' && document.querySelector('#next').disabled && !document.querySelector('#prev').disabled && location.search.includes('after=n1')`)
	do(t, ctx, chromedp.Click(chromedp.CSS(`#prev`)))
	waitJS(t, ctx, "back to the first page", names+` === 'n1'`)
	do(t, ctx, chromedp.SetValue(chromedp.CSS(`select[name=state]`), "draining"), chromedp.Click(chromedp.CSS(`#filter button[type=submit]`)))
	waitJS(t, ctx, "no node draining", `document.querySelector('#nodes tbody').textContent.includes('No nodes match.') && location.search.includes('state=draining')`)
}

// TestPages checks what the server answers for the UI's paths and the
// endpoints the pages read, without a browser.
func TestPages(t *testing.T) {
	c := startCluster(t, 0)
	c.addNode("n1", "nl1")
	id := c.submit("sub", job("one", "", 1, 100))[0]
	c.waitFor("the task to be placed", func() bool { return c.run("n1", "nl1") == 1 })
	get := func(path, token string) (*http.Response, string) {
		hr, _ := http.NewRequest("GET", c.base+path, nil)
		if token != "" {
			hr.Header.Set("Authorization", "Bearer "+token)
		}
		cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := cl.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, tc := range []struct {
		path, ctype string
		status      int
		has         string
	}{
		{"/ui/", "text/html; charset=utf-8", 200, `data-page="overview"`},
		{"/ui/jobs", "text/html; charset=utf-8", 200, `data-page="jobs"`},
		{"/ui/jobs/" + id, "text/html; charset=utf-8", 200, `data-arg="` + id + `"`},
		{"/ui/nodes/n1", "text/html; charset=utf-8", 200, `data-page="node"`},
		{"/ui/capboxes/j9", "text/html; charset=utf-8", 200, `data-page="capboxes"`},
		{"/ui/queues", "text/html; charset=utf-8", 200, `data-page="queues"`},
		{"/ui/rounds", "text/html; charset=utf-8", 200, `data-page="rounds"`},
		{"/ui/logs/" + id + "/0/0/1", "text/html; charset=utf-8", 200, `data-arg="` + id + `/0/0/1"`},
		{"/ui/logs/" + id + "%2F0%2F0%2F1", "text/html; charset=utf-8", 200, `data-page="log"`},
		{"/ui/logs/", "text/html; charset=utf-8", 404, `Not found`},
		{"/ui/jobs/%3Cscript%3E", "text/html; charset=utf-8", 200, `data-arg="&lt;script&gt;"`},
		{"/ui/static/ui.js", "text/javascript; charset=utf-8", 200, `'use strict'`},
		{"/ui/static/ui.css", "text/css; charset=utf-8", 200, `body`},
		{"/ui/static/nope.js", "text/html; charset=utf-8", 404, `Not found`},
		{"/ui/nope", "text/html; charset=utf-8", 404, `Not found`},
	} {
		resp, body := get(tc.path, "")
		if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != tc.ctype || !strings.Contains(body, tc.has) {
			t.Errorf("GET %s: %d %s, want %d %s with %q", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), tc.status, tc.ctype, tc.has)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s: Content-Security-Policy %q", tc.path, csp)
		}
		// The shell holds no data of the cluster.
		if strings.Contains(body, `"one"`) || strings.Contains(body, "t-one") {
			t.Errorf("GET %s without a token shows a job's data", tc.path)
		}
	}
	if resp, _ := get("/ui", ""); resp.StatusCode != 301 || !strings.HasSuffix(resp.Header.Get("Location"), "/ui/") {
		t.Errorf("GET /ui: %d to %q, want a redirect to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	hr, _ := http.NewRequest("POST", c.base+"/ui/", bytes.NewReader([]byte("x")))
	if resp, err := http.DefaultClient.Do(hr); err != nil || resp.StatusCode != 405 {
		t.Errorf("POST /ui/: %v %v, want 405", resp, err)
	}

	// whoami: each role, and no token at all.
	for tok, want := range map[string]api.Whoami{
		"rdr": {Role: "reader", Auth: true}, "adm": {Role: "admin", Auth: true}, "nl1": {Role: "nodelet", Node: "n1", Auth: true},
	} {
		w, err := c.clients[tok].Whoami(c.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if w.Role != want.Role || w.Node != want.Node || !w.Auth {
			t.Errorf("whoami %s: %+v, want %+v", tok, w, want)
		}
	}
	if resp, _ := get(api.PathWhoami, ""); resp.StatusCode != 401 {
		t.Errorf("whoami without a token: %d", resp.StatusCode)
	}
	for _, p := range []string{api.PathCluster, api.PathNode + "n1"} {
		if resp, _ := get(p, "nl1"); resp.StatusCode != 403 {
			t.Errorf("GET %s as a nodelet: %d, want 403", p, resp.StatusCode)
		}
	}

	// The cluster's summary and a node's pods.
	cs, err := c.clients["rdr"].Cluster(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cs.Tasks.Total != 1 || cs.Tasks.Active != 1 || cs.Jobs[api.JobRunning] != 1 || !cs.IsLeader || cs.Replica != 1 {
		t.Errorf("cluster: %+v", cs)
	}
	if len(cs.Queues) != 2 || cs.Queues[0].Name != "batch" || cs.Queues[0].Weight != 3 || cs.Queues[1].Name != "default" || cs.Queues[1].Tasks.Active != 1 || cs.Queues[1].Used.CPU != 100 {
		t.Errorf("queues: %+v", cs.Queues)
	}
	if len(cs.Rounds) == 0 || cs.Rounds[len(cs.Rounds)-1].Placed != 1 || cs.Rounds[len(cs.Rounds)-1].FlowArcs == 0 || cs.RoundTotals.Placed != 1 {
		t.Errorf("rounds: %+v, totals %+v", cs.Rounds, cs.RoundTotals)
	}
	nd, err := c.clients["rdr"].Node(c.ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if nd.Spec.Name != "n1" || len(nd.Pods) != 1 || nd.Pods[0].Job != id || nd.Pods[0].State != api.TaskRunning ||
		nd.Pods[0].Resources.CPU != 100 || nd.Spec.LogToken != "" || nd.Usage == nil {
		t.Errorf("node: %+v", nd)
	}
	if resp, _ := get(api.PathNode+"zz", "rdr"); resp.StatusCode != 404 {
		t.Errorf("an unknown node: %d", resp.StatusCode)
	}
}

// TestScreenshots writes a screenshot of every page, of a small cluster
// at work, to docs/ui (with -update).
func TestScreenshots(t *testing.T) {
	if !*update {
		t.Skip("writes docs/ui/*.png with -update")
	}
	chromium(t)
	c := startCluster(t, 300*time.Millisecond)
	c.addNode("n1", "nl1")
	c.addNode("n2", "nl2")
	ids := c.submit("sub", job("etl-daily", "", 6, 500), job("render", "batch", 4, 1000), job("train", "batch", 2, 2000))
	am := api.JobSpec{Name: "spark-driver", Appmaster: true, Tasks: job("am", "", 1, 500).Tasks}
	amID := c.submit("adm", am)[0]
	c.waitFor("the jobs to be placed", func() bool { return c.run("n1", "nl1")+c.run("n2", "nl2") == 13 })
	if _, err := c.clients["adm"].CreateCapboxes(c.ctx, amID, []api.CapboxRequest{{Name: "executors", Count: 3,
		Resources: api.Resources{CPU: 1000, Memory: 1 << 30}}}); err != nil {
		t.Fatalf("capboxes: %v", err)
	}
	c.waitFor("the capboxes to be placed", func() bool { return c.run("n1", "nl1")+c.run("n2", "nl2") == 16 })
	// Waves of small jobs, some seconds apart, for the charts.
	tick := time.NewTicker(3 * time.Second)
	defer tick.Stop()
	placed := 16
	for i := range 4 {
		<-tick.C
		c.submit("sub", job(fmt.Sprintf("wave-%d", i), "batch", int64(4+2*i), 50))
		placed += 4 + 2*i
		c.waitFor("the wave to be placed", func() bool { return c.run("n1", "nl1")+c.run("n2", "nl2") == placed })
	}
	huge := c.submit("sub", job("huge", "batch", 2, 64000))[0]
	c.pendingReason(huge)
	// A job whose one task failed, forgotten into the history; caps on
	// both queues; n1 drained with a deadline.
	rj := job("nightly-report", "", 1, 50)
	rj.Retry.MaxAttempts = 1
	report := c.submit("sub", rj)[0]
	c.waitFor("the report to be placed", func() bool { return c.run("n1", "nl1")+c.run("n2", "nl2") == placed+1 })
	var tl api.TaskList
	c.getJSON(api.PathJob+report+"/tasks", "adm", &tl)
	if len(tl.Tasks) != 1 {
		t.Fatalf("the report's tasks: %+v", tl.Tasks)
	}
	rt := tl.Tasks[0]
	if err := c.clients[map[string]string{"n1": "nl1", "n2": "nl2"}[rt.Node]].Report(c.ctx, rt.Node, []api.TaskReport{{TaskID: rt.ID,
		State: api.TaskFailed, Reason: api.ReasonExited, ExitCode: 3, Time: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	c.waitFor("the report forgotten", func() bool {
		var j api.JobStatus
		c.getJSON(api.PathJob+report, "adm", &j)
		return j.History
	})
	for q, caps := range map[string]api.QueueCaps{"batch": {CPU: 16000, Memory: 8 << 30, Tasks: 40}, "default": {CPU: 8000, GPUs: 2}} {
		if _, err := c.clients["adm"].SetQueue(c.ctx, q, api.QueueSettings{Caps: caps}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.clients["adm"].DrainNode(c.ctx, "n1", api.DrainRequest{Timeout: api.Duration(time.Hour)}); err != nil {
		t.Fatal(err)
	}

	ctx := browser(t)
	base := c.base + api.PathUI
	do(t, ctx, chromedp.Navigate(base))
	signIn(t, ctx, "adm")
	dir := filepath.Join("..", "..", "..", "docs", "ui")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct{ name, path, ready string }{
		{"overview", "", `document.querySelector('[data-k=nodes-total]')?.textContent === '2' && !!document.querySelector('#chart-rate polyline')`},
		{"jobs", "jobs", `document.querySelectorAll('#jobs tbody td[data-job]').length === 10 && !!document.querySelector('[data-k=history]')`},
		{"job", "jobs/" + huge, `!!document.querySelector('[data-k=reason]')`},
		{"job-history", "jobs/" + report, `!!document.querySelector('[data-k=first-failure]')`},
		{"job-running", "jobs/" + ids[0], `document.querySelectorAll('#tasks tbody tr').length === 6`},
		{"nodes", "nodes", `document.querySelectorAll('#nodes tbody tr').length === 2`},
		{"node", "nodes/n1", `document.querySelectorAll('#pods tbody tr').length > 2 && !document.querySelector('#undrain').hidden`},
		{"capboxes", "capboxes/" + amID, `document.querySelectorAll('#capboxes tbody tr').length === 3`},
		{"queues", "queues", `document.querySelectorAll('#queues tbody tr').length === 2 && !!document.querySelector('td.full, [data-k=cpu]')`},
		{"rounds", "rounds", `document.querySelectorAll('#rounds tbody tr').length > 0`},
		{"log", "logs/" + ids[0] + "/0/0/1", `document.querySelector('#log-text').textContent.startsWith('hello')`},
	} {
		do(t, ctx, chromedp.Navigate(base+p.path))
		waitJS(t, ctx, p.name, p.ready)
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p.name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
