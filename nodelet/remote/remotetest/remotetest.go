package remotetest

import (
	"encoding/json"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/api"
)

// MaxWait caps the wait of a target long-poll.
const MaxWait = time.Minute

// Dispatcher is the stub. Its methods are safe for concurrent use.
type Dispatcher struct {
	// URL is the stub's base URL, http://127.0.0.1:port.
	URL string

	token   string
	ln      net.Listener
	srv     *fasthttp.Server
	closing chan struct{} // closed by Close: long-polls end
	done    chan struct{} // closed when Serve has returned
	once    sync.Once

	// mu guards the fields below.
	mu struct {
		sync.Mutex
		nodes   map[string]*node
		changed chan struct{} // closed and replaced at every change
		targets int           // target requests answered
		diffs   int           // of which answered with a difference
	}
}

type node struct {
	spec          api.NodeSpec
	registrations int
	gen           uint64
	pods          []api.TargetPod
	history       map[uint64][]api.TargetPod // every generation's pods, for differences
	reports       []api.TaskReport
	usages        []api.NodeUsage
}

// Start starts a stub on a loopback port; Close is registered as tb's
// cleanup. A non-empty token is required of every request as a bearer
// token.
func Start(tb testing.TB, token string) *Dispatcher {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("remotetest: listen: %v", err)
	}
	d := &Dispatcher{
		URL:     "http://" + ln.Addr().String(),
		token:   token,
		ln:      ln,
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	d.mu.nodes = map[string]*node{}
	d.mu.changed = make(chan struct{})
	d.srv = &fasthttp.Server{
		Handler:     d.handle,
		ReadTimeout: 10 * time.Second,
		IdleTimeout: 10 * time.Second,
		Logger:      quiet{},
	}
	go func() {
		defer close(d.done)
		_ = d.srv.Serve(ln)
	}()
	tb.Cleanup(d.Close)
	return d
}

// Close ends the long-polls and stops the server.
func (d *Dispatcher) Close() {
	d.once.Do(func() {
		close(d.closing)
		_ = d.srv.Shutdown()
		_ = d.ln.Close()
		<-d.done
	})
}

// changeLocked wakes long-polls and Await.
func (d *Dispatcher) changeLocked() {
	close(d.mu.changed)
	d.mu.changed = make(chan struct{})
}

// SetTarget replaces the pods of a registered node's target and bumps its
// generation, which it returns; ok is false for an unknown node.
func (d *Dispatcher) SetTarget(name string, pods ...api.TargetPod) (gen uint64, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.mu.nodes[name]
	if n == nil {
		return 0, false
	}
	n.gen++
	n.pods = slices.Clone(pods)
	if n.history == nil {
		n.history = map[uint64][]api.TargetPod{}
	}
	n.history[n.gen] = n.pods
	d.changeLocked()
	return n.gen, true
}

// Diffs returns how many target requests were answered with a difference
// (diff=1 and a generation the stub had).
func (d *Dispatcher) Diffs() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.diffs
}

// difference is the change from the pods of generation base to pods.
func difference(base, pods []api.TargetPod) (added []api.TargetPod, removed []string) {
	had := map[string]bool{}
	for _, p := range base {
		had[p.TaskID] = true
	}
	has := map[string]bool{}
	for _, p := range pods {
		has[p.TaskID] = true
		if !had[p.TaskID] {
			added = append(added, p)
		}
	}
	for _, p := range base {
		if !has[p.TaskID] {
			removed = append(removed, p.TaskID)
		}
	}
	return added, removed
}

// Forget drops a node, as a dispatcher with fresh state would not know
// it: its requests get 404 not_found until it registers again.
func (d *Dispatcher) Forget(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.mu.nodes, name)
	d.changeLocked()
}

// Node returns a registered node's spec and how many times it registered
// since it was last forgotten.
func (d *Dispatcher) Node(name string) (spec api.NodeSpec, registrations int, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.mu.nodes[name]
	if n == nil {
		return api.NodeSpec{}, 0, false
	}
	return n.spec, n.registrations, true
}

// Reports returns the reports a node sent, in order (repeats included).
func (d *Dispatcher) Reports(name string) []api.TaskReport {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n := d.mu.nodes[name]; n != nil {
		return slices.Clone(n.reports)
	}
	return nil
}

// Usages returns the usages a node sent in its heartbeats (report
// requests with usage), in order.
func (d *Dispatcher) Usages(name string) []api.NodeUsage {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n := d.mu.nodes[name]; n != nil {
		return slices.Clone(n.usages)
	}
	return nil
}

// Await waits until cond holds, checking it after every change the stub
// sees (and every 50ms), and fails tb after timeout.
func (d *Dispatcher) Await(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		d.mu.Lock()
		ch := d.mu.changed
		d.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-tick.C:
		case <-deadline.C:
			tb.Fatalf("remotetest: timed out after %v waiting for %s", timeout, what)
		}
	}
}

func (d *Dispatcher) handle(ctx *fasthttp.RequestCtx) {
	if d.token != "" && string(ctx.Request.Header.Peek("Authorization")) != "Bearer "+d.token {
		fail(ctx, fasthttp.StatusUnauthorized, api.CodeUnauthorized, "bad token")
		return
	}
	path := string(ctx.Path())
	switch {
	case path == api.PathNodes && ctx.IsPost():
		d.register(ctx)
	case strings.HasPrefix(path, api.PathNode):
		name, what, _ := strings.Cut(path[len(api.PathNode):], "/")
		switch {
		case what == "target" && ctx.IsGet():
			d.target(ctx, name)
		case what == "reports" && ctx.IsPost():
			d.reports(ctx, name)
		default:
			fail(ctx, fasthttp.StatusNotFound, api.CodeNotFound, "no route "+path)
		}
	default:
		fail(ctx, fasthttp.StatusNotFound, api.CodeNotFound, "no route "+path)
	}
}

func (d *Dispatcher) register(ctx *fasthttp.RequestCtx) {
	var spec api.NodeSpec
	if !decode(ctx, &spec) {
		return
	}
	if err := spec.Validate(); err != nil {
		fail(ctx, fasthttp.StatusBadRequest, api.CodeInvalid, err.Error())
		return
	}
	d.mu.Lock()
	n := d.mu.nodes[spec.Name]
	if n == nil {
		n = &node{}
		d.mu.nodes[spec.Name] = n
	}
	n.spec = spec
	n.registrations++
	d.changeLocked()
	d.mu.Unlock()
	reply(ctx, fasthttp.StatusOK, api.RegisterResponse{Name: spec.Name})
}

func (d *Dispatcher) target(ctx *fasthttp.RequestCtx, name string) {
	args := ctx.QueryArgs()
	known, err := strconv.ParseUint(string(args.Peek("generation")), 10, 64)
	if err != nil && len(args.Peek("generation")) > 0 {
		fail(ctx, fasthttp.StatusBadRequest, api.CodeInvalid, "generation: "+err.Error())
		return
	}
	var wait time.Duration
	if w := args.Peek("wait"); len(w) > 0 {
		if wait, err = time.ParseDuration(string(w)); err != nil || wait < 0 {
			fail(ctx, fasthttp.StatusBadRequest, api.CodeInvalid, "wait: bad duration")
			return
		}
	}
	timer := time.NewTimer(min(wait, MaxWait))
	defer timer.Stop()
	for {
		d.mu.Lock()
		n := d.mu.nodes[name]
		ch := d.mu.changed
		var t api.NodeTarget
		if n != nil {
			t = api.NodeTarget{Generation: n.gen, Pods: slices.Clone(n.pods)}
			if base, ok := n.history[known]; ok && string(args.Peek("diff")) == "1" && known != n.gen {
				t.Base = known
				t.Pods, t.Removed = difference(base, n.pods)
				d.mu.diffs++
			}
		}
		d.mu.Unlock()
		switch {
		case n == nil:
			fail(ctx, fasthttp.StatusNotFound, api.CodeNotFound, "unknown node "+name)
			return
		case t.Generation != known:
			if t.Pods == nil {
				t.Pods = []api.TargetPod{}
			}
			reply(ctx, fasthttp.StatusOK, t)
			return
		}
		select {
		case <-ch:
		case <-timer.C:
			ctx.SetStatusCode(fasthttp.StatusNotModified)
			return
		case <-d.closing:
			fail(ctx, fasthttp.StatusServiceUnavailable, api.CodeUnavailable, "stopping")
			return
		}
	}
}

func (d *Dispatcher) reports(ctx *fasthttp.RequestCtx, name string) {
	var req api.ReportRequest
	if !decode(ctx, &req) {
		return
	}
	if err := req.Validate(); err != nil {
		fail(ctx, fasthttp.StatusBadRequest, api.CodeInvalid, err.Error())
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.mu.nodes[name]
	if n == nil {
		fail(ctx, fasthttp.StatusNotFound, api.CodeNotFound, "unknown node "+name)
		return
	}
	n.reports = append(n.reports, req.Reports...)
	if req.Usage != nil {
		n.usages = append(n.usages, *req.Usage)
	}
	d.changeLocked()
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// decode decodes the (possibly compressed) JSON body into v, or answers
// 400 and returns false.
func decode(ctx *fasthttp.RequestCtx, v any) bool {
	body, err := ctx.Request.BodyUncompressed()
	if err == nil {
		err = json.Unmarshal(body, v)
	}
	if err != nil {
		fail(ctx, fasthttp.StatusBadRequest, api.CodeInvalid, "body: "+err.Error())
		return false
	}
	return true
}

func reply(ctx *fasthttp.RequestCtx, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		fail(ctx, fasthttp.StatusInternalServerError, api.CodeInternal, err.Error())
		return
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

func fail(ctx *fasthttp.RequestCtx, status int, code, msg string) {
	body, _ := json.Marshal(api.ErrorResponse{Code: code, Error: msg})
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}
