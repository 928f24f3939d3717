package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/sluicehq/sluice/api"
)

func gzipped(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func zstded(t testing.TB, b []byte) []byte {
	w, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	return w.EncodeAll(b, nil)
}

// watcher reads a watch stream into events.
type watcher struct {
	mu     sync.Mutex
	events []api.WatchEvent
	resp   *http.Response
	done   chan struct{}
}

func startWatch(t *testing.T, url, token string) *watcher {
	t.Helper()
	hr, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		hr.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("watch: status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	w := &watcher{resp: resp, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if len(bytes.TrimSpace(sc.Bytes())) == 0 {
				continue // keep-alive
			}
			var ev api.WatchEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Errorf("watch line %q: %v", sc.Bytes(), err)
				return
			}
			w.mu.Lock()
			w.events = append(w.events, ev)
			w.mu.Unlock()
		}
	}()
	t.Cleanup(w.stop)
	return w
}

func (w *watcher) stop() {
	w.resp.Body.Close()
	<-w.done
}

// latest returns the last event about job id.
func (w *watcher) latest(id string) (api.WatchEvent, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.events) - 1; i >= 0; i-- {
		if w.events[i].Job.ID == id {
			return w.events[i], true
		}
	}
	return api.WatchEvent{}, false
}

func (w *watcher) all() []api.WatchEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.events)
}

func TestEndToEnd(t *testing.T) {
	s := openOne(t, nil)
	base := s.Addr()
	if r := do(t, req{method: "GET", url: base + api.PathHealth}); r.status != 200 {
		t.Fatalf("healthz: %s", r)
	}
	waitFor(t, 5*time.Second, "readyz", func() bool { return do(t, req{method: "GET", url: base + api.PathReady}).status == 200 })

	w := startWatch(t, base+api.PathWatch, "")
	brief := startWatch(t, base+api.PathWatch+"?brief=1", "")

	// Submit one job, an array gzipped, NDJSON zstd-compressed, and an
	// NDJSON body without a content type.
	post := func(body []byte, header map[string]string) []string {
		t.Helper()
		return decode[api.SubmitResponse](t, do(t, req{method: "POST", url: base + api.PathJobs, body: body, header: header}), 200).Jobs
	}
	var ids []string
	plain := strings.Replace(jobJSON("plain", "", 2), `"tasks":`, `"max_run_time":"90s","tasks":`, 1)
	ids = append(ids, post([]byte(plain), map[string]string{"Content-Type": "application/json"})...)
	ids = append(ids, post(gzipped(t, []byte("["+jobJSON("gz1", "q1", 1)+","+jobJSON("gz2", "q2", 1)+"]")),
		map[string]string{"Content-Type": "application/json; charset=utf-8", "Content-Encoding": "gzip"})...)
	ids = append(ids, post(zstded(t, []byte(jobJSON("zs1", "q1", 1)+"\n"+jobJSON("zs2", "q1", 3)+"\n")),
		map[string]string{"Content-Type": "application/x-ndjson", "Content-Encoding": "zstd"})...)
	ids = append(ids, post([]byte(jobJSON("nd1", "q2", 1)+"\n"+jobJSON("nd2", "q2", 1)), nil)...)
	if want := []string{"j1", "j2", "j3", "j4", "j5", "j6", "j7"}; !slices.Equal(ids, want) {
		t.Fatalf("submitted IDs %v, want %v", ids, want)
	}

	// List with filters and paging.
	names := func(l api.JobList) string {
		var ns []string
		for _, j := range l.Jobs {
			ns = append(ns, j.Spec.Name)
		}
		return strings.Join(ns, ",")
	}
	if l := listJobs(t, base, "", ""); names(l) != "plain,gz1,gz2,zs1,zs2,nd1,nd2" || l.Next != "" {
		t.Fatalf("all jobs: %s next %q", names(l), l.Next)
	}
	if l := listJobs(t, base, "", "?queue=q1"); names(l) != "gz1,zs1,zs2" {
		t.Fatalf("queue q1: %s", names(l))
	}
	if l := listJobs(t, base, "", "?label=team=t-zs2&state=pending,running"); names(l) != "zs2" {
		t.Fatalf("label team=t-zs2: %s", names(l))
	}
	if l := listJobs(t, base, "", "?state=succeeded&state=failed"); names(l) != "" {
		t.Fatalf("done jobs: %s", names(l))
	}
	var paged []string
	for after := ""; ; {
		l := listJobs(t, base, "", "?limit=3&consistent=1&after="+after)
		paged = append(paged, names(l))
		if l.Next == "" {
			break
		}
		after = l.Next
	}
	if got := strings.Join(paged, "|"); got != "plain,gz1,gz2|zs1,zs2,nd1|nd2" {
		t.Fatalf("pages: %s", got)
	}

	// Get one, with counts.
	j := decode[api.JobStatus](t, do(t, req{method: "GET", url: base + api.PathJob + "j5"}), 200)
	if j.Spec.Name != "zs2" || j.Spec.Queue != "q1" || j.Tasks.Total != 3 || len(j.Groups) != 1 || j.Groups[0].Total != 3 {
		t.Fatalf("job j5: %+v", j)
	}
	errorReply(t, do(t, req{method: "GET", url: base + api.PathJob + "j99"}), 404, api.CodeNotFound, "j99")

	// With no node, every task stays pending and the job says why.
	waitFor(t, 10*time.Second, "a pending diagnosis", func() bool {
		j := decode[api.JobStatus](t, do(t, req{method: "GET", url: base + api.PathJob + "j1"}), 200)
		return len(j.Pending) > 0 && j.Pending[0].Reason != "" && j.Pending[0].Tasks == 2
	})

	// Cancel one; cancelling again drops nothing more; an unknown job is 404.
	c := decode[api.CancelResponse](t, do(t, req{method: "DELETE", url: base + api.PathJob + "j4"}), 200)
	if c.ID != "j4" || c.Dropped != 1 {
		t.Fatalf("cancel j4: %+v", c)
	}
	if c := decode[api.CancelResponse](t, do(t, req{method: "DELETE", url: base + api.PathJob + "j4"}), 200); c.Dropped != 0 {
		t.Fatalf("cancel j4 again: %+v", c)
	}
	errorReply(t, do(t, req{method: "DELETE", url: base + api.PathJob + "j99"}), 404, api.CodeNotFound, "j99")
	if l := listJobs(t, base, "", "?state=cancelled"); names(l) != "zs1" {
		t.Fatalf("cancelled: %s", names(l))
	}

	// A fake nodelet that serves logs.
	logs := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != api.PathNodeletLogs {
			http.NotFound(rw, r)
			return
		}
		fmt.Fprintf(rw, "logs of %s tail=%s\n", r.URL.Query().Get("task"), r.URL.Query().Get("tail"))
	}))
	defer logs.Close()

	// Play the nodelet: register, long-poll the target, report.
	reg := decode[api.RegisterResponse](t, do(t, req{method: "POST", url: base + api.PathNodes,
		body: []byte(nodeJSON("n1", strings.TrimPrefix(logs.URL, "http://")))}), 200)
	if reg.Name != "n1" {
		t.Fatalf("register: %+v", reg)
	}
	nodes := decode[api.NodeList](t, do(t, req{method: "GET", url: base + api.PathNodes}), 200)
	if len(nodes.Nodes) != 1 || nodes.Nodes[0].Spec.Name != "n1" || nodes.Nodes[0].State != api.NodeReady {
		t.Fatalf("nodes: %+v", nodes)
	}
	errorReply(t, do(t, req{method: "GET", url: base + api.PathNode + "nope/target?wait=1ms"}), 404, api.CodeNotFound, "")

	wantTasks := 2 + 1 + 1 + 3 + 1 + 1 // every job but the cancelled one
	var gen uint64
	pods := map[string]api.TargetPod{}
	waitFor(t, 20*time.Second, "every task in the target", func() bool {
		r := do(t, req{method: "GET", url: fmt.Sprintf("%s%sn1/target?generation=%d&wait=2s", base, api.PathNode, gen)})
		if r.status == 304 {
			return false
		}
		tg := decode[api.NodeTarget](t, r, 200)
		gen = tg.Generation
		clear(pods)
		for _, p := range tg.Pods {
			pods[p.TaskID] = p
		}
		return len(pods) == wantTasks
	})
	if p := pods["j1/0/0/1"]; p.MaxRunTime != api.Duration(90*time.Second) || pods["j2/0/0/1"].MaxRunTime != 0 {
		t.Fatalf("target pods' run-time limits: j1 %v, j2 %v; want the jobs' 90s and none", p.MaxRunTime, pods["j2/0/0/1"].MaxRunTime)
	}
	// A poll without identity=1 (a nodelet of the release before) gets
	// no job names or counts; one with it gets them.
	for _, p := range pods {
		if p.JobName != "" || p.Count != 0 {
			t.Fatalf("pod %s of a poll without identity: job name %q, count %d", p.TaskID, p.JobName, p.Count)
		}
	}
	withIdentity := decode[api.NodeTarget](t, do(t, req{method: "GET", url: fmt.Sprintf("%s%sn1/target?wait=0s&identity=1", base, api.PathNode)}), 200)
	for _, p := range withIdentity.Pods {
		if p.JobName == "" || p.Count < 1 {
			t.Fatalf("pod %s of a poll with identity: job name %q, count %d", p.TaskID, p.JobName, p.Count)
		}
	}
	// Nothing changes now: a short long-poll ends with 304.
	if r := do(t, req{method: "GET", url: fmt.Sprintf("%s%sn1/target?generation=%d&wait=50ms", base, api.PathNode, gen)}); r.status != 304 {
		t.Fatalf("unchanged target: %s", r)
	}

	// A poll that asks for differences from generation 0 gets the whole
	// target, which the next such poll starts from.
	diffPoll := func(known uint64) api.NodeTarget {
		t.Helper()
		return decode[api.NodeTarget](t, do(t, req{method: "GET", url: fmt.Sprintf("%s%sn1/target?generation=%d&wait=5s&diff=1", base, api.PathNode, known)}), 200)
	}
	if whole := diffPoll(0); whole.Base != 0 || whole.Generation != gen || len(whole.Pods) != wantTasks || whole.Removed != nil {
		t.Fatalf("first diff poll: base %d, generation %d (want %d), %d pods, removed %v", whole.Base, whole.Generation, gen, len(whole.Pods), whole.Removed)
	}

	// Tasks of j1.
	tl := decode[api.TaskList](t, do(t, req{method: "GET", url: base + api.PathJob + "j1/tasks?limit=1"}), 200)
	if len(tl.Tasks) != 1 || tl.Tasks[0].ID != "j1/0/0/1" || tl.Next != "j1/0/0/1" || tl.Tasks[0].Node != "n1" {
		t.Fatalf("tasks page 1: %+v", tl)
	}
	tl = decode[api.TaskList](t, do(t, req{method: "GET", url: base + api.PathJob + "j1/tasks?limit=1&after=" + tl.Next}), 200)
	if len(tl.Tasks) != 1 || tl.Tasks[0].ID != "j1/0/1/1" || tl.Next != "" {
		t.Fatalf("tasks page 2: %+v", tl)
	}

	// Drive j1 to succeeded.
	now := time.Now()
	var reports []api.TaskReport
	for _, id := range []string{"j1/0/0/1", "j1/0/1/1"} {
		reports = append(reports,
			api.TaskReport{TaskID: id, State: api.TaskRunning, Reason: api.ReasonStarted, Time: now},
			api.TaskReport{TaskID: id, State: api.TaskSucceeded, Reason: api.ReasonExited, Time: now})
	}
	body, _ := json.Marshal(api.ReportRequest{Reports: reports})
	if r := do(t, req{method: "POST", url: base + api.PathNode + "n1/reports", body: body}); r.status != 204 {
		t.Fatalf("reports: %s", r)
	}
	j = decode[api.JobStatus](t, do(t, req{method: "GET", url: base + api.PathJob + "j1"}), 200)
	if j.State != api.JobSucceeded || j.Tasks.Succeeded != 2 {
		t.Fatalf("j1 after its reports: %+v", j)
	}
	tl = decode[api.TaskList](t, do(t, req{method: "GET", url: base + api.PathJob + "j1/tasks?state=succeeded"}), 200)
	if len(tl.Tasks) != 2 {
		t.Fatalf("succeeded tasks: %+v", tl)
	}
	// The node reported j1's pods ended itself: that moves no generation
	// and wakes no poll, though a whole target leaves them out.
	if r := do(t, req{method: "GET", url: fmt.Sprintf("%s%sn1/target?generation=%d&wait=50ms&diff=1", base, api.PathNode, gen)}); r.status != 304 {
		t.Fatalf("diff poll after j1 ended: %s", r)
	}
	if whole := diffPoll(0); whole.Generation != gen || len(whole.Pods) != wantTasks-2 {
		t.Fatalf("whole target after j1 ended: generation %d (want %d), %d pods (want %d)", whole.Generation, gen, len(whole.Pods), wantTasks-2)
	}
	// Cancelling j3 moves it: the next diff poll gets j1's pods leaving
	// with j3's, and so does another from the same generation (the FSM
	// keeps the node's changes); one from a generation the node cannot
	// hold gets the whole target.
	if r := do(t, req{method: "DELETE", url: base + api.PathJob + "j3"}); r.status != 200 {
		t.Fatalf("cancel j3: %s", r)
	}
	for range 2 {
		change := diffPoll(gen)
		slices.Sort(change.Removed)
		if change.Base != gen || change.Generation <= gen || len(change.Pods) != 0 || !slices.Equal(change.Removed, []string{"j1/0/0/1", "j1/0/1/1", "j3/0/0/1"}) {
			t.Fatalf("diff poll after j1 ended and j3 was cancelled: %+v", change)
		}
	}
	if whole := diffPoll(gen + 1000); whole.Base != 0 || len(whole.Pods) != wantTasks-3 {
		t.Fatalf("diff poll from a generation never served: base %d, %d pods, want the whole %d", whole.Base, len(whole.Pods), wantTasks-3)
	}

	// Logs are proxied from the node's address.
	lr := do(t, req{method: "GET", url: base + api.PathTasks + "j1/0/1/1/logs?tail=5"})
	if lr.status != 200 || string(lr.body) != "logs of j1/0/1/1 tail=5\n" {
		t.Fatalf("logs: %s", lr)
	}
	errorReply(t, do(t, req{method: "GET", url: base + api.PathTasks + "j1/0/7/1/logs"}), 404, api.CodeNotFound, "")

	// The watch saw every job, j1 succeeded last.
	waitFor(t, 10*time.Second, "the watch to see j1 succeed", func() bool {
		ev, ok := w.latest("j1")
		return ok && ev.Job.State == api.JobSucceeded
	})
	for _, id := range ids {
		if _, ok := w.latest(id); !ok {
			t.Errorf("the watch never mentioned %s", id)
		}
	}
	ev, _ := w.latest("j1")
	// Resuming after the index of j1's success sees only later changes;
	// resuming from before it sees j1 again.
	w2 := startWatch(t, fmt.Sprintf("%s%s?from=%d", base, api.PathWatch, ev.Index), "")
	w3 := startWatch(t, fmt.Sprintf("%s%s?from=%d", base, api.PathWatch, ev.Index-1), "")
	waitFor(t, 10*time.Second, "the resumed watch", func() bool {
		e, ok := w3.latest("j1")
		return ok && e.Job.State == api.JobSucceeded
	})
	if r := do(t, req{method: "DELETE", url: base + api.PathJob + "j2"}); r.status != 200 {
		t.Fatalf("cancel j2: %s", r)
	}
	waitFor(t, 10*time.Second, "the resumed watch to see j2 cancelled", func() bool {
		e, ok := w2.latest("j2")
		return ok && e.Job.State == api.JobCancelled
	})
	for _, e := range w2.all() {
		if e.Index <= ev.Index || e.Job.ID == "j1" {
			t.Errorf("watch from %d sent %d (%s)", ev.Index, e.Index, e.Job.ID)
		}
	}

	// The brief watch saw the same jobs, without their task groups: an
	// event of the same index and job is the full one's but for them.
	waitFor(t, 10*time.Second, "the brief watch to see j2 cancelled", func() bool {
		e, ok := brief.latest("j2")
		return ok && e.Job.State == api.JobCancelled
	})
	full := map[string]api.WatchEvent{}
	for _, e := range w.all() {
		if len(e.Job.Spec.Tasks) == 0 {
			t.Errorf("the full watch sent %s at %d without its task groups", e.Job.ID, e.Index)
		}
		full[fmt.Sprint(e.Index, e.Job.ID)] = e
	}
	matched := 0
	for _, e := range brief.all() {
		if e.Job.Spec.Tasks != nil {
			t.Errorf("the brief watch sent %s at %d with task groups %+v", e.Job.ID, e.Index, e.Job.Spec.Tasks)
		}
		f, ok := full[fmt.Sprint(e.Index, e.Job.ID)]
		if !ok {
			continue
		}
		matched++
		f.Job.Spec.Tasks = nil
		if !reflect.DeepEqual(e, f) {
			t.Errorf("brief event %+v\nfull event  %+v", e, f)
		}
	}
	for _, id := range ids {
		if _, ok := brief.latest(id); !ok {
			t.Errorf("the brief watch never mentioned %s", id)
		}
	}
	if matched == 0 {
		t.Error("no event of the brief watch was in the full one")
	}
}
