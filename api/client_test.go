package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/api"
)

// serve starts a fasthttp server on loopback with h and returns its base
// URL. It stops at the end of the test.
func serve(t *testing.T, h fasthttp.RequestHandler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fasthttp.Server{Handler: h}
	go s.Serve(ln) //nolint:errcheck // ends with Shutdown
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.ShutdownWithContext(ctx) //nolint:errcheck // best effort
	})
	return "http://" + ln.Addr().String()
}

// closedAddr returns the base URL of a loopback port nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// newClient returns a client of addrs whose pauses between rounds over
// the replicas do not wait.
func newClient(t *testing.T, addrs ...string) *api.Client {
	t.Helper()
	c, err := api.NewClient(api.ClientConfig{Addrs: addrs, Token: "s3cret", Timeout: 5 * time.Second, JitterSeed: 1,
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, _ := json.Marshal(v)
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// rawPath is the request's path as sent, not unescaped.
func rawPath(ctx *fasthttp.RequestCtx) string { return string(ctx.URI().PathOriginal()) }

func TestNewClientValidates(t *testing.T) {
	for _, tc := range []struct {
		addrs []string
		want  string
	}{
		{nil, "no address"},
		{[]string{"127.0.0.1:8080"}, "scheme"},
		{[]string{"ftp://host"}, "scheme"},
		{[]string{"http://"}, "no host"},
		{[]string{"http://h:1?x=1"}, "scheme://host"},
	} {
		_, err := api.NewClient(api.ClientConfig{Addrs: tc.addrs})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewClient(%q) = %v, want an error with %q", tc.addrs, err, tc.want)
		}
	}
	// Every problem at once.
	_, err := api.NewClient(api.ClientConfig{Addrs: []string{"a", "ftp://b"}, Timeout: -1})
	if err == nil || strings.Count(err.Error(), "\n") != 2 {
		t.Errorf("want three problems, got %v", err)
	}
	if _, err := api.NewClient(api.ClientConfig{Addrs: []string{"https://h:8443/", "http://[::1]:80"}}); err != nil {
		t.Error(err)
	}
}

func TestClientDecodesReplies(t *testing.T) {
	submitted := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var mu sync.Mutex
	var seen []string
	url := serve(t, func(ctx *fasthttp.RequestCtx) {
		mu.Lock()
		seen = append(seen, string(ctx.Method())+" "+string(ctx.RequestURI()))
		mu.Unlock()
		if got := string(ctx.Request.Header.Peek("Authorization")); got != "Bearer s3cret" {
			writeJSON(ctx, 401, api.ErrorResponse{Code: api.CodeUnauthorized, Error: "token " + got})
			return
		}
		switch string(ctx.Method()) + " " + rawPath(ctx) {
		case "GET /v1/jobs":
			writeJSON(ctx, 200, api.JobList{Jobs: []api.JobStatus{{
				ID: "j1", State: api.JobRunning, Submitted: submitted,
				Spec:  api.JobSpec{Name: "train", Queue: "q"},
				Tasks: api.TaskCounts{Total: 3, Active: 1, Pending: 2},
			}}, Next: "j1"})
		case "GET /v1/jobs/j%2Fx":
			writeJSON(ctx, 200, api.JobStatus{ID: "j/x", State: api.JobPending,
				Pending: []api.PendingReason{{Group: "g0", Tasks: 2, Reason: "no fit"}}})
		case "DELETE /v1/jobs/j1":
			writeJSON(ctx, 200, api.CancelResponse{ID: "j1", Stopping: 1, Dropped: 2})
		case "GET /v1/jobs/j1/tasks":
			writeJSON(ctx, 200, api.TaskList{Tasks: []api.TaskStatus{{ID: "j1/0/0/1", State: api.TaskRunning, Node: "n1"}}})
		case "GET /v1/nodes":
			writeJSON(ctx, 200, api.NodeList{Nodes: []api.NodeInfo{{Spec: api.NodeSpec{Name: "n1"}, State: api.NodeReady, Tasks: 4}}})
		case "POST /v1/nodes":
			var spec api.NodeSpec
			if err := json.Unmarshal(ctx.PostBody(), &spec); err != nil || spec.Name != "n1" {
				writeJSON(ctx, 400, api.ErrorResponse{Code: api.CodeInvalid, Error: "bad spec"})
				return
			}
			writeJSON(ctx, 200, api.RegisterResponse{Name: spec.Name})
		case "POST /v1/nodes/n%201/reports":
			var rr api.ReportRequest
			if err := json.Unmarshal(ctx.PostBody(), &rr); err != nil || len(rr.Reports) != 1 {
				writeJSON(ctx, 400, api.ErrorResponse{Code: api.CodeInvalid, Error: "bad reports"})
				return
			}
			ctx.SetStatusCode(204)
		case "GET /readyz":
			ctx.SetStatusCode(200)
		default:
			writeJSON(ctx, 404, api.ErrorResponse{Code: api.CodeNotFound, Error: "no route " + rawPath(ctx)})
		}
	})
	c := newClient(t, url)
	ctx := context.Background()

	jl, err := c.Jobs(ctx, api.JobQuery{
		States: []api.JobState{api.JobPending, api.JobRunning}, Queue: "q",
		Labels: map[string]string{"team": "ml", "a": "b=c"}, After: "j0", Limit: 10, Consistent: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(jl.Jobs) != 1 || jl.Jobs[0].ID != "j1" || jl.Jobs[0].Spec.Name != "train" || !jl.Jobs[0].Submitted.Equal(submitted) ||
		jl.Jobs[0].Tasks.Pending != 2 || jl.Next != "j1" {
		t.Errorf("Jobs = %+v", jl)
	}
	js, err := c.Job(ctx, "j/x")
	if err != nil || js.ID != "j/x" || len(js.Pending) != 1 || js.Pending[0].Reason != "no fit" {
		t.Errorf("Job = %+v, %v", js, err)
	}
	cr, err := c.Cancel(ctx, "j1")
	if err != nil || cr != (api.CancelResponse{ID: "j1", Stopping: 1, Dropped: 2}) {
		t.Errorf("Cancel = %+v, %v", cr, err)
	}
	tl, err := c.Tasks(ctx, "j1", "j1/0/0", 5)
	if err != nil || len(tl.Tasks) != 1 || tl.Tasks[0].State != api.TaskRunning || tl.Tasks[0].ID != "j1/0/0/1" {
		t.Errorf("Tasks = %+v, %v", tl, err)
	}
	nl, err := c.Nodes(ctx)
	if err != nil || len(nl.Nodes) != 1 || nl.Nodes[0].Spec.Name != "n1" || nl.Nodes[0].Tasks != 4 {
		t.Errorf("Nodes = %+v, %v", nl, err)
	}
	if err := c.RegisterNode(ctx, api.NodeSpec{Name: "n1"}); err != nil {
		t.Errorf("RegisterNode: %v", err)
	}
	if err := c.Report(ctx, "n 1", []api.TaskReport{{TaskID: "j1/0/0/1", State: api.TaskRunning, Reason: api.ReasonStarted}}); err != nil {
		t.Errorf("Report: %v", err)
	}
	if err := c.Ready(ctx); err != nil {
		t.Errorf("Ready: %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	want := []string{
		"GET /v1/jobs?after=j0&consistent=1&label=a%3Db%3Dc&label=team%3Dml&limit=10&queue=q&state=pending&state=running",
		"GET /v1/jobs/j%2Fx",
		"DELETE /v1/jobs/j1",
		"GET /v1/jobs/j1/tasks?after=j1%2F0%2F0&limit=5",
		"GET /v1/nodes",
		"POST /v1/nodes",
		"POST /v1/nodes/n%201/reports",
		"GET /readyz",
	}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
}

func TestClientAPIErrors(t *testing.T) {
	url := serve(t, func(ctx *fasthttp.RequestCtx) {
		switch rawPath(ctx) {
		case "/v1/jobs":
			writeJSON(ctx, 400, api.ErrorResponse{Code: api.CodeInvalid, Error: "invalid request", Total: 5, Problems: []api.Problem{
				{Item: 0, Path: "jobs[0].name", Message: "required"},
				{Item: 1, Path: "jobs[1].tasks", Message: "at least one"},
				{Item: 2, Path: "jobs[2].priority", Message: "too high"},
				{Item: 3, Path: "jobs[3].qos", Message: "unknown"},
			}})
		case "/v1/jobs/gone":
			writeJSON(ctx, 404, api.ErrorResponse{Code: api.CodeNotFound, Error: "no job gone"})
		default:
			ctx.SetStatusCode(502)
			ctx.SetBodyString("upstream exploded\n")
		}
	})
	c := newClient(t, url)
	ctx := context.Background()

	_, err := c.SubmitBody(ctx, []byte(`{}`), "", api.SubmitOptions{})
	var ae *api.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != api.CodeInvalid || len(ae.Problems) != 4 || ae.Total != 5 {
		t.Fatalf("submit: %#v", err)
	}
	if !errors.Is(err, api.ErrInvalid) || errors.Is(err, api.ErrTooLarge) {
		t.Error("errors.Is(ErrInvalid) false or errors.Is(ErrTooLarge) true")
	}
	want := "api: 400 Bad Request: invalid request: jobs[0].name: required; jobs[1].tasks: at least one; jobs[2].priority: too high; and 2 more"
	if err.Error() != want {
		t.Errorf("Error() = %q\nwant      %q", err, want)
	}

	_, err = c.Job(ctx, "gone")
	if !api.IsNotFound(err) || api.IsConflict(err) || err.Error() != "api: 404 Not Found: no job gone" {
		t.Errorf("job: %v", err)
	}

	_, err = c.Nodes(ctx)
	if !errors.As(err, &ae) || ae.Status != 502 || ae.ErrorResponse.Error != "upstream exploded" || ae.Code != "" {
		t.Errorf("plain error: %#v", err)
	}
	if got := err.Error(); got != "api: 502 Bad Gateway: upstream exploded" {
		t.Errorf("plain Error() = %q", got)
	}
}

func TestClientFollowsRedirectsWithBody(t *testing.T) {
	var leaderHits, followerHits atomic.Int32
	leader := serve(t, func(ctx *fasthttp.RequestCtx) {
		leaderHits.Add(1)
		if string(ctx.PostBody()) != `[{"name":"a"}]` || string(ctx.Request.Header.Peek(api.HeaderIdempotencyKey)) != "k1" {
			writeJSON(ctx, 400, api.ErrorResponse{Code: api.CodeInvalid, Error: "body " + string(ctx.PostBody())})
			return
		}
		writeJSON(ctx, 200, api.SubmitResponse{Jobs: []string{"j7"}})
	})
	follower := serve(t, func(ctx *fasthttp.RequestCtx) {
		followerHits.Add(1)
		ctx.Response.Header.Set("Location", leader+string(ctx.RequestURI()))
		writeJSON(ctx, 307, api.ErrorResponse{Code: api.CodeNotLeader, Error: "not the leader", Leader: leader})
	})
	c := newClient(t, follower)
	for i := range 2 {
		resp, err := c.SubmitBody(context.Background(), []byte(`[{"name":"a"}]`), "application/json", api.SubmitOptions{IdempotencyKey: "k1"})
		if err != nil || len(resp.Jobs) != 1 || resp.Jobs[0] != "j7" {
			t.Fatalf("submit %d: %+v, %v", i, resp, err)
		}
	}
	// The second call went straight to the remembered leader.
	if f, l := followerHits.Load(), leaderHits.Load(); f != 1 || l != 2 {
		t.Errorf("follower got %d requests, leader %d; want 1 and 2", f, l)
	}
}

func TestClientRedirectLoopIsBounded(t *testing.T) {
	var hits atomic.Int32
	var self string
	self = serve(t, func(ctx *fasthttp.RequestCtx) {
		hits.Add(1)
		// A Location without a path: the request's path is kept.
		ctx.Response.Header.Set("Location", self)
		ctx.SetStatusCode(308)
	})
	c := newClient(t, self)
	_, err := c.Nodes(context.Background())
	if err == nil || !strings.Contains(err.Error(), "redirects") {
		t.Errorf("err = %v, want too many redirects", err)
	}
	if n := hits.Load(); n != 4 {
		t.Errorf("%d requests, want 4", n)
	}
}

func TestClientFailsOver(t *testing.T) {
	var hits atomic.Int32
	good := serve(t, func(ctx *fasthttp.RequestCtx) {
		hits.Add(1)
		writeJSON(ctx, 200, api.SubmitResponse{Jobs: []string{"j1"}})
	})
	dead := closedAddr(t)
	noLeader := serve(t, func(ctx *fasthttp.RequestCtx) {
		writeJSON(ctx, 503, api.ErrorResponse{Code: api.CodeNotLeader, Error: "no leader"})
	})
	c := newClient(t, dead, noLeader, good)
	// A POST goes on past a refused connection and a replica that knows
	// no leader.
	resp, err := c.SubmitBody(context.Background(), []byte(`{}`), "", api.SubmitOptions{})
	if err != nil || len(resp.Jobs) != 1 {
		t.Fatalf("submit: %+v, %v", resp, err)
	}
	// The address that answered is tried first from now on.
	if _, err := c.SubmitBody(context.Background(), []byte(`{}`), "", api.SubmitOptions{}); err != nil || hits.Load() != 2 {
		t.Fatalf("second submit: %v (%d hits)", err, hits.Load())
	}

	// Nobody listening: an UnreachableError naming every address. A port
	// freed by closedAddr may come back from the next call: take another
	// until the two differ.
	dead2 := closedAddr(t)
	for dead2 == dead {
		dead2 = closedAddr(t)
	}
	c2 := newClient(t, dead, dead2)
	_, err = c2.Nodes(context.Background())
	var ue *api.UnreachableError
	if !errors.As(err, &ue) || !api.IsUnreachable(err) || len(ue.Addrs) != 2 {
		t.Fatalf("err = %v, want an UnreachableError", err)
	}
	if !strings.Contains(err.Error(), dead) || !strings.Contains(err.Error(), dead2) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("message %q", err)
	}

	// 503 not_leader everywhere: that error, not Unreachable.
	c3 := newClient(t, noLeader, dead)
	_, err = c3.Nodes(context.Background())
	if !api.IsUnavailable(err) {
		t.Errorf("err = %v, want not_leader", err)
	}
}

func TestClientCompressesSubmits(t *testing.T) {
	body := []byte(strings.Repeat(`{"name":"a","tasks":[]}`+"\n", 100))
	var got sync.Map
	url := serve(t, func(ctx *fasthttp.RequestCtx) {
		enc := string(ctx.Request.Header.Peek("Content-Encoding"))
		var r io.Reader
		switch enc {
		case "gzip":
			zr, err := gzip.NewReader(bytes.NewReader(ctx.PostBody()))
			if err != nil {
				writeJSON(ctx, 415, api.ErrorResponse{Code: api.CodeUnsupportedMedia, Error: err.Error()})
				return
			}
			r = zr
		case "zstd":
			zr, err := zstd.NewReader(bytes.NewReader(ctx.PostBody()))
			if err != nil {
				writeJSON(ctx, 415, api.ErrorResponse{Code: api.CodeUnsupportedMedia, Error: err.Error()})
				return
			}
			defer zr.Close()
			r = zr
		default:
			r = bytes.NewReader(ctx.PostBody())
		}
		plain, err := io.ReadAll(r)
		if err != nil {
			writeJSON(ctx, 415, api.ErrorResponse{Code: api.CodeUnsupportedMedia, Error: err.Error()})
			return
		}
		got.Store(enc, string(plain)+"|"+string(ctx.Request.Header.ContentType()))
		writeJSON(ctx, 200, api.SubmitResponse{Jobs: []string{"j1"}})
	})
	c := newClient(t, url)
	for _, enc := range []string{"", "gzip", "zstd"} {
		if _, err := c.SubmitBody(context.Background(), body, "application/x-ndjson", api.SubmitOptions{Encoding: enc}); err != nil {
			t.Fatalf("%q: %v", enc, err)
		}
		v, _ := got.Load(enc)
		if v != string(body)+"|application/x-ndjson" {
			t.Errorf("%q: server got %.60q", enc, v)
		}
	}
	if _, err := c.SubmitBody(context.Background(), body, "", api.SubmitOptions{Encoding: "br"}); err == nil {
		t.Error("unknown encoding accepted")
	}
	// Submit encodes a JSON array.
	if _, err := c.Submit(context.Background(), []api.JobSpec{{Name: "x"}}, api.SubmitOptions{Encoding: "gzip"}); err != nil {
		t.Fatal(err)
	}
	v, _ := got.Load("gzip")
	if s, _ := v.(string); !strings.HasPrefix(s, `[{"name":"x"`) || !strings.HasSuffix(s, "|application/json") {
		t.Errorf("Submit sent %q", s)
	}
}

func TestClientTarget(t *testing.T) {
	url := serve(t, func(ctx *fasthttp.RequestCtx) {
		if rawPath(ctx) != "/v1/nodes/n%2F1/target" || string(ctx.QueryArgs().Peek("wait")) != "50ms" {
			writeJSON(ctx, 404, api.ErrorResponse{Code: api.CodeNotFound, Error: string(ctx.RequestURI())})
			return
		}
		if gen := string(ctx.QueryArgs().Peek("generation")); gen == "7" {
			ctx.SetStatusCode(304)
			return
		}
		writeJSON(ctx, 200, api.NodeTarget{Generation: 7, Pods: []api.TargetPod{{TaskID: "j1/0/0/1", Job: "j1"}}})
	})
	c := newClient(t, url)
	tg, changed, err := c.Target(context.Background(), "n/1", 6, 50*time.Millisecond)
	if err != nil || !changed || tg.Generation != 7 || len(tg.Pods) != 1 || tg.Pods[0].TaskID != "j1/0/0/1" {
		t.Errorf("Target(6) = %+v, %v, %v", tg, changed, err)
	}
	tg, changed, err = c.Target(context.Background(), "n/1", 7, 50*time.Millisecond)
	if err != nil || changed || tg.Generation != 0 {
		t.Errorf("Target(7) = %+v, %v, %v", tg, changed, err)
	}
}

func TestClientLongPollEndsWithContext(t *testing.T) {
	release := make(chan struct{})
	url := serve(t, func(ctx *fasthttp.RequestCtx) {
		<-release
		ctx.SetStatusCode(304)
	})
	t.Cleanup(func() { close(release) })
	c := newClient(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, _, err := c.Target(ctx, "n1", 0, 30*time.Second)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("returned after %v", d)
	}

	// A context deadline ends it too, as DeadlineExceeded.
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, _, err := c.Target(ctx, "n1", 0, 30*time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want context.DeadlineExceeded", err)
	}

	// The client's own timeout: ErrTimeout.
	c2, err := api.NewClient(api.ClientConfig{Addrs: []string{url}, Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Nodes(context.Background()); !errors.Is(err, api.ErrTimeout) {
		t.Errorf("err = %v, want ErrTimeout", err)
	}
}

func TestClientWatch(t *testing.T) {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	var follower string
	leader := serve(t, func(ctx *fasthttp.RequestCtx) {
		if rawPath(ctx) != api.PathWatch {
			ctx.SetStatusCode(404)
			return
		}
		from := ctx.QueryArgs().GetUintOrZero("from")
		forever := from >= 100 // idle after three events
		ctx.SetContentType("application/x-ndjson")
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			for i := from + 1; i <= from+3; i++ {
				// The spec's name echoes the query.
				b, _ := json.Marshal(api.WatchEvent{Index: uint64(i), Job: api.JobStatus{ID: fmt.Sprintf("j%d", i), State: api.JobRunning,
					Spec: api.JobSpec{Name: string(ctx.QueryArgs().QueryString())}}})
				w.Write(append(b, '\n')) //nolint:errcheck // Flush reports
				if w.Flush() != nil {
					return
				}
			}
			for forever {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				if w.WriteByte('\n') != nil || w.Flush() != nil {
					return
				}
			}
		})
	})
	follower = serve(t, func(ctx *fasthttp.RequestCtx) {
		ctx.Redirect(leader+string(ctx.RequestURI()), 307)
	})
	c := newClient(t, follower)

	var got []string
	err := c.Watch(context.Background(), 10, func(ev api.WatchEvent) error {
		got = append(got, fmt.Sprintf("%d:%s:%s", ev.Index, ev.Job.ID, ev.Job.State))
		return nil
	})
	if err != nil || strings.Join(got, " ") != "11:j11:running 12:j12:running 13:j13:running" {
		t.Errorf("Watch = %v, %v", got, err)
	}

	// The queries of Watch and WatchBrief.
	for _, tc := range []struct {
		brief bool
		from  uint64
		want  string
	}{{false, 10, "from=10"}, {false, 0, ""}, {true, 10, "from=10&brief=1"}, {true, 0, "brief=1"}} {
		watch := c.Watch
		if tc.brief {
			watch = c.WatchBrief
		}
		var query string
		err := watch(context.Background(), tc.from, func(ev api.WatchEvent) error {
			query = ev.Job.Spec.Name
			return nil
		})
		if err != nil || query != tc.want {
			t.Errorf("brief %v from %d: query %q (err %v), want %q", tc.brief, tc.from, query, err, tc.want)
		}
	}

	// fn's error ends it.
	errStop := errors.New("enough")
	n := 0
	err = c.Watch(context.Background(), 0, func(api.WatchEvent) error {
		if n++; n == 2 {
			return errStop
		}
		return nil
	})
	if err != errStop || n != 2 {
		t.Errorf("Watch = %v after %d events, want errStop after 2", err, n)
	}

	// So does the context, while the stream idles.
	c2 := newClient(t, leader)
	ctx, cancel := context.WithCancel(context.Background())
	n = 0
	start := time.Now()
	errc := make(chan error, 1)
	go func() {
		errc <- c2.Watch(ctx, 100, func(api.WatchEvent) error {
			if n++; n == 3 {
				time.AfterFunc(30*time.Millisecond, cancel)
			}
			return nil
		})
	}()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) || n != 3 {
			t.Errorf("Watch = %v after %d events", err, n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not end with its context")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestClientWatchLines: events longer than the read buffer, a last event
// without its newline, and a line that is not an event.
func TestClientWatchLines(t *testing.T) {
	long := api.WatchEvent{Index: 1, Job: api.JobStatus{ID: "j1", Spec: api.JobSpec{Name: strings.Repeat("n", 200<<10)}}}
	lb, err := json.Marshal(long)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, body string
		want       []uint64
		err        string
	}{
		{"long line", string(lb) + "\n\n" + `{"index":2,"job":{"id":"j2"}}` + "\n", []uint64{1, 2}, ""},
		{"no final newline", `{"index":3,"job":{"id":"j3"}}` + "\n" + `{"index":4,"job":{"id":"j4"}}`, []uint64{3, 4}, ""},
		{"not an event", `{"index":5,"job":{"id":"j5"}}` + "\n" + `{"index":"six"}` + "\n", []uint64{5}, "index"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := serve(t, func(ctx *fasthttp.RequestCtx) {
				ctx.SetContentType("application/x-ndjson")
				ctx.SetBodyString(tc.body)
			})
			var got []uint64
			err := newClient(t, url).Watch(context.Background(), 0, func(ev api.WatchEvent) error {
				got = append(got, ev.Index)
				if ev.Index == 1 && ev.Job.Spec.Name != long.Job.Spec.Name {
					t.Errorf("the long event's name has %d bytes, want %d", len(ev.Job.Spec.Name), len(long.Job.Spec.Name))
				}
				return nil
			})
			if !slices.Equal(got, tc.want) || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("Watch = %v, %v; want %v and an error saying %q", got, err, tc.want, tc.err)
			}
		})
	}
}

// TestClientLogs: a followed log streams: the server writes each line
// only once the client's writer has the one before, so the lines arrive
// whole only from a client that hands each on as it comes.
func TestClientLogs(t *testing.T) {
	got := make(chan struct{}, 3) // a value per line the client's writer took
	url := serve(t, func(ctx *fasthttp.RequestCtx) {
		if rawPath(ctx) != "/v1/tasks/j12%2F0%2F5%2F1/logs" {
			writeJSON(ctx, 404, api.ErrorResponse{Code: api.CodeNotFound, Error: "no task at " + rawPath(ctx)})
			return
		}
		q := ctx.QueryArgs()
		if string(q.Peek("container")) != "main" || string(q.Peek("follow")) != "1" || string(q.Peek("tail")) != "2" {
			ctx.SetStatusCode(400)
			ctx.SetBodyString("bad query " + q.String())
			return
		}
		ctx.SetContentType("text/plain")
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			for i := range 3 {
				fmt.Fprintf(w, "line %d\n", i)
				if w.Flush() != nil {
					return
				}
				select {
				case <-got:
				case <-time.After(10 * time.Second):
					fmt.Fprintf(w, "line %d not received\n", i)
					return
				}
			}
		})
	})
	c := newClient(t, url)
	var out bytes.Buffer
	if err := c.Logs(context.Background(), "j12/0/5/1", api.LogOptions{Container: "main", Follow: true, Tail: 2}, lineSignal{&out, got}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "line 0\nline 1\nline 2\n" {
		t.Errorf("logs %q", out.String())
	}
	err := c.Logs(context.Background(), "j12/0/5/2", api.LogOptions{}, &out)
	if !api.IsNotFound(err) || !strings.Contains(err.Error(), "j12%2F0%2F5%2F2") {
		t.Errorf("err = %v", err)
	}
	err = c.Logs(context.Background(), "j12/0/5/1", api.LogOptions{}, &out)
	var ae *api.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || !strings.HasPrefix(ae.ErrorResponse.Error, "bad query") {
		t.Errorf("err = %v", err)
	}
}

// TestClientDropsRedirectingReplica: once a redirect names the leader, the
// client closes its idle connection to the replica that redirected it
// instead of leaving it open (a descriptor on each side) for the idle
// timeout; with thousands of nodes, those held a dispatcher's descriptors.
func TestClientDropsRedirectingReplica(t *testing.T) {
	leader := serve(t, func(ctx *fasthttp.RequestCtx) { writeJSON(ctx, 200, api.NodeList{}) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{}, 4)
	follower := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.Response.Header.Set("Location", leader+string(ctx.RequestURI()))
			writeJSON(ctx, 307, api.ErrorResponse{Code: api.CodeNotLeader, Error: "not the leader", Leader: leader})
		},
		ConnState: func(_ net.Conn, st fasthttp.ConnState) {
			if st == fasthttp.StateClosed {
				closed <- struct{}{}
			}
		},
	}
	go follower.Serve(ln)     //nolint:errcheck // ends with Shutdown
	defer follower.Shutdown() //nolint:errcheck // best effort
	c := newClient(t, "http://"+ln.Addr().String())
	if _, err := c.Nodes(context.Background()); err != nil {
		t.Fatalf("Nodes: %v", err)
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the connection to the replica that redirected is still open 5 s later")
	}
}

// TestReportsConcurrently sends reports of distinct nodes from several
// goroutines at once: each request carries its own reports, whole, though
// the encoding buffers are shared through a pool.
func TestReportsConcurrently(t *testing.T) {
	const nodes, calls, perCall = 8, 50, 7
	var mu sync.Mutex
	got := map[string][]string{} // node → task IDs in arrival order
	url := serve(t, func(ctx *fasthttp.RequestCtx) {
		req, err := api.DecodeReportRequest(ctx.PostBody())
		if err != nil {
			writeJSON(ctx, 400, api.ErrorResponse{Code: api.CodeInvalid, Error: err.Error()})
			return
		}
		node := strings.TrimSuffix(strings.TrimPrefix(rawPath(ctx), api.PathNode), "/reports")
		mu.Lock()
		for _, r := range req.Reports {
			got[node] = append(got[node], r.TaskID)
		}
		mu.Unlock()
		ctx.SetStatusCode(fasthttp.StatusNoContent)
	})
	c := newClient(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// taskIDs are the tasks of node n's call i: a count of its own per
	// node.
	taskIDs := func(n, i int) []string {
		var ids []string
		for k := range perCall + n {
			ids = append(ids, fmt.Sprintf("n%d-j%d/0/%d/0", n, i, k))
		}
		return ids
	}
	now := time.Now()
	var wg sync.WaitGroup
	for n := range nodes {
		wg.Go(func() {
			node := fmt.Sprintf("n%d", n)
			for i := range calls {
				var rs []api.TaskReport
				for _, id := range taskIDs(n, i) {
					rs = append(rs, api.TaskReport{TaskID: id, State: api.TaskRunning, Reason: api.ReasonStarted, Time: now})
				}
				if err := c.Report(ctx, node, rs); err != nil {
					t.Errorf("report %s #%d: %v", node, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for n := range nodes {
		node := fmt.Sprintf("n%d", n)
		var want []string
		for i := range calls {
			want = append(want, taskIDs(n, i)...)
		}
		if !slices.Equal(got[node], want) {
			t.Errorf("%s: the server got %d reports, want %d in order (first difference near %v)", node, len(got[node]), len(want), firstDiff(got[node], want))
		}
	}
}

// firstDiff is the index where a and b first differ.
func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// lineSignal is a writer that sends on got for each line written to it.
type lineSignal struct {
	w   io.Writer
	got chan<- struct{}
}

func (l lineSignal) Write(p []byte) (int, error) {
	n, err := l.w.Write(p)
	for range bytes.Count(p[:n], []byte("\n")) {
		select {
		case l.got <- struct{}{}:
		default:
		}
	}
	return n, err
}
