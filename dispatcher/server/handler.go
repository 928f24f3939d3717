package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher"
	"github.com/sluicehq/sluice/dispatcher/fsm"
	"github.com/sluicehq/sluice/dispatcher/metrics"
	"github.com/sluicehq/sluice/dispatcher/server/ui"
	"github.com/sluicehq/sluice/raftkv"
	"github.com/valyala/fasthttp"
)

// Defaults of HandlerConfig and the query parameters.
const (
	DefaultLimit          = 100
	MaxLimit              = 10_000
	DefaultTargetWait     = 30 * time.Second
	MaxTargetWait         = 5 * time.Minute
	DefaultWatchKeepAlive = 15 * time.Second
	DefaultLogDialTimeout = 5 * time.Second
)

// HandlerConfig configures a Handler.
type HandlerConfig struct {
	// Dispatcher, FSM and Raft are the replica the handler serves.
	// Required.
	Dispatcher *dispatcher.Dispatcher
	FSM        *fsm.FSM
	Raft       *raftkv.Node
	// PeerHTTP maps each replica's raft ID to its HTTP base URL, such as
	// "http://10.0.0.1:8001": writes that reach a follower are redirected
	// to the leader's. The URL a replica was added with (POST
	// /v1/members), replicated with the membership, wins over it. Default
	// none: followers answer 503 not_leader for a leader without either.
	PeerHTTP map[uint64]string
	// Tokens authenticates requests. Nil: no authentication, every request
	// acts as admin (but one with a job token, see JobKeys).
	Tokens *Tokens
	// JobKeys make and check job tokens: the pods of an appmaster job's
	// own task groups get their job's in their node's target (identity=1),
	// and a request with one acts for that job alone (RoleJob), with or
	// without Tokens. Nil: no job tokens; such pods get none, and a job
	// token is refused (401) as any unknown token is.
	JobKeys *JobKeys
	// BaseContext bounds every long-poll, watch stream and log stream: when
	// it ends they end. Default context.Background().
	BaseContext context.Context
	// WatchKeepAlive is how long a watch stream may stay silent before a
	// blank line is sent, so that a client gone away is noticed. Default
	// 15s.
	WatchKeepAlive time.Duration
	// LogClient fetches task logs from nodelets; NewHandler makes it
	// follow no redirect, whatever it was given, so that a request goes to
	// the node's address alone. Default: an http.Client that gives up
	// connecting after 5s.
	LogClient *http.Client
	// Logger receives the handler's logs (every 5xx at warn). Default:
	// discard.
	Logger *slog.Logger
	// BodyMemory bounds the bytes of request bodies the handler holds at
	// once, as read and decompressed, across all connections; a request
	// whose body would go over it is answered 503 unavailable with
	// Retry-After. At least MinBodyMemory. Default DefaultBodyMemory.
	BodyMemory int64
	// Metrics, when set, counts every request (by its route, RouteNames)
	// and is served at api.PathMetrics to readers. Its Routes must be
	// RouteNames (NewMetrics makes such). Default nil: nothing is
	// counted, and api.PathMetrics is not found (404).
	Metrics *metrics.Metrics
}

// Handler serves the dispatcher's HTTP API on fasthttp. Its methods are
// safe for concurrent use.
type Handler struct {
	cfg  HandlerConfig
	id   uint64
	log  *slog.Logger
	base context.Context
	// streams counts the goroutines writing stream bodies (watch, logs).
	streams sync.WaitGroup
	// nodeRefusals and foreignReports count the requests refused because
	// a nodelet acted for a node not its own, or reported a task placed on
	// another node (Refusals).
	nodeRefusals, foreignReports atomic.Int64
	// mem counts the bytes of the request bodies held now.
	mem *bodyMemory
	// metrics is HandlerConfig.Metrics.
	metrics *metrics.Metrics
	// ui serves the web UI's pages under api.PathUI.
	ui *ui.Handler
}

// Refusals counts the requests refused to nodelet credentials since the
// handler started.
type Refusals struct {
	// OtherNode: a nodelet's request for a node not its own (register,
	// target, reports).
	OtherNode int64
	// ForeignReports: report requests naming a task placed on another
	// node.
	ForeignReports int64
}

// Refusals returns the counts of requests refused to nodelet credentials.
func (h *Handler) Refusals() Refusals {
	return Refusals{OtherNode: h.nodeRefusals.Load(), ForeignReports: h.foreignReports.Load()}
}

// NewHandler checks cfg and returns its Handler. Serve it as
// NewHTTPServer does: fasthttp.Server{Handler: h.ServeFastHTTP,
// ErrorHandler: h.ServeError, HeaderReceived: h.HeaderReceived,
// StreamRequestBody: true}. Without them it serves as well, but fasthttp
// reads each body whole, into its own buffers, before the handler has
// authenticated the request.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	var probs []string
	if cfg.Dispatcher == nil {
		probs = append(probs, "Dispatcher is required")
	}
	if cfg.FSM == nil {
		probs = append(probs, "FSM is required")
	}
	if cfg.Raft == nil {
		probs = append(probs, "Raft is required")
	}
	if cfg.WatchKeepAlive < 0 {
		probs = append(probs, fmt.Sprintf("WatchKeepAlive %v must not be negative", cfg.WatchKeepAlive))
	}
	if cfg.BodyMemory != 0 && cfg.BodyMemory < MinBodyMemory {
		probs = append(probs, fmt.Sprintf("BodyMemory %d must be 0 (default) or at least %d", cfg.BodyMemory, MinBodyMemory))
	}
	probs = append(probs, checkPeerHTTP(cfg.PeerHTTP)...)
	if len(probs) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrConfig, strings.Join(probs, "; "))
	}
	if cfg.BodyMemory == 0 {
		cfg.BodyMemory = DefaultBodyMemory
	}
	if cfg.BaseContext == nil {
		cfg.BaseContext = context.Background()
	}
	if cfg.WatchKeepAlive == 0 {
		cfg.WatchKeepAlive = DefaultWatchKeepAlive
	}
	if cfg.LogClient == nil {
		cfg.LogClient = &http.Client{Transport: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: DefaultLogDialTimeout}).DialContext,
			ResponseHeaderTimeout: 30 * time.Second,
			MaxIdleConnsPerHost:   4,
		}}
	}
	lc := *cfg.LogClient
	lc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	cfg.LogClient = &lc
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	pages, err := ui.New()
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return &Handler{cfg: cfg, id: cfg.Raft.Status().ID, log: cfg.Logger, base: cfg.BaseContext,
		mem: &bodyMemory{limit: cfg.BodyMemory}, metrics: cfg.Metrics, ui: pages}, nil
}

// BodyBytes returns the bytes of request bodies the handler holds now,
// counted against HandlerConfig.BodyMemory.
func (h *Handler) BodyBytes() int64 { return h.mem.used.Load() }

// Wait waits for the goroutines that write streamed bodies (watch and log
// streams) to end; they end when BaseContext does or their client goes
// away.
func (h *Handler) Wait() { h.streams.Wait() }

// checkPeerHTTP reports the base URLs that are not http(s)://host[:port].
func checkPeerHTTP(m map[uint64]string) []string {
	var probs []string
	for id, u := range m {
		rest, ok := strings.CutPrefix(u, "http://")
		if !ok {
			rest, ok = strings.CutPrefix(u, "https://")
		}
		rest = strings.TrimSuffix(rest, "/")
		if !ok || rest == "" || strings.ContainsAny(rest, "/?# ") {
			probs = append(probs, fmt.Sprintf("PeerHTTP[%d] %q must be http(s)://host:port", id, u))
		}
	}
	return probs
}

// httpError is an error reply.
type httpError struct {
	status int
	resp   api.ErrorResponse
	// location is the redirect target of a 307.
	location string
	// retryAfter, in seconds, is sent with 503s worth retrying soon.
	retryAfter int
}

func errorf(status int, code, format string, args ...any) *httpError {
	return &httpError{status: status, resp: api.ErrorResponse{Code: code, Error: fmt.Sprintf(format, args...)}}
}

func invalid(probs []api.Problem, format string, args ...any) *httpError {
	e := errorf(fasthttp.StatusBadRequest, api.CodeInvalid, format, args...)
	e.resp.Problems, e.resp.Total = probs, len(probs)
	return e
}

// badParam is a 400 about a query parameter.
func badParam(name, format string, args ...any) *httpError {
	msg := fmt.Sprintf(format, args...)
	return invalid([]api.Problem{{Item: -1, Path: name, Message: msg}}, "query parameter %s: %s", name, msg)
}

// ServeFastHTTP routes and serves one request. It never panics: a panic
// of a handler is logged and answered with a 500. The memory of the
// request's body is given back when it returns, whatever happened.
func (h *Handler) ServeFastHTTP(ctx *fasthttp.RequestCtx) {
	defer releaseBody(ctx)
	rt := routeOther
	if h.metrics != nil {
		// ctx.Time is when fasthttp read the request's header: the clock
		// is read once more, not twice.
		defer func() {
			h.metrics.Request(rt, ctx.Response.StatusCode(), time.Since(ctx.Time()), int64(ctx.Request.Header.ContentLength()))
		}()
	}
	defer func() {
		if v := recover(); v != nil {
			h.log.Error("server: panic serving a request", "path", string(ctx.Path()), "panic", v, "stack", string(debug.Stack()))
			ctx.Response.Reset()
			h.writeError(ctx, errorf(fasthttp.StatusInternalServerError, api.CodeInternal, "internal error"))
		}
		// Requests cut short because the server is closing, readiness
		// probes and requests during an election are answered as
		// expected, not failures.
		if st := ctx.Response.StatusCode(); st >= 500 && (h.base == nil || h.base.Err() == nil) &&
			string(ctx.Path()) != api.PathReady && !bytes.Contains(h.errorText(ctx), []byte(`"code":"`+api.CodeNotLeader+`"`)) {
			h.log.Warn("server: request failed", "method", string(ctx.Method()), "path", string(ctx.Path()),
				"status", st, "error", string(h.errorText(ctx)))
		}
	}()
	if e := h.stopped(ctx); e != nil {
		h.writeError(ctx, e)
		return
	}
	var e *httpError
	if rt, e = h.route(ctx, true); e != nil {
		h.writeError(ctx, e)
	}
	if n := ctx.Request.Header.ContentLength(); n > 0 || n == -1 {
		if _, read := ctx.UserValue(heldBodyKey{}).(*heldBody); !read {
			// Answered without its body, which may be on its way yet: the
			// connection closes rather than wait for it to drain.
			ctx.SetConnectionClose()
		}
	}
}

// headerCtxs hold the scratch contexts HeaderReceived routes headers in.
var headerCtxs = sync.Pool{New: func() any { return new(fasthttp.RequestCtx) }}

// HeaderReceived is the fasthttp.Server's HeaderReceived: it routes a
// request that declares a body by its header alone, before any of the
// body is read (route with serve false: the endpoint, the token and its
// role, the declared length against the route's limit). A request
// refused for its path, method, token or role has its Content-Length
// made 0, its Expect dropped and Connection: close set, so that fasthttp
// reads none of its body: the handler answers it 401, 403, 404 or 405
// as route does, and the connection closes with the body unread. One
// whose declared length is over its route's limit has fasthttp read at
// most one byte before the handler answers 413.
func (h *Handler) HeaderReceived(hdr *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if hdr.ContentLength() <= 0 {
		return fasthttp.RequestConfig{} // no body, or a chunked one, which fasthttp does not read ahead
	}
	sc := headerCtxs.Get().(*fasthttp.RequestCtx)
	hdr.CopyTo(&sc.Request.Header)
	_, e := h.route(sc, false)
	sc.Request.Reset()
	sc.Response.Reset()
	headerCtxs.Put(sc)
	switch {
	case e == nil:
		return fasthttp.RequestConfig{}
	case e.status == fasthttp.StatusRequestEntityTooLarge:
		return fasthttp.RequestConfig{MaxRequestBodySize: 1}
	}
	hdr.SetContentLength(0)
	hdr.Del(fasthttp.HeaderExpect)
	hdr.SetConnectionClose()
	return fasthttp.RequestConfig{}
}

// errorText returns the body of an error reply for the log (not streams).
func (h *Handler) errorText(ctx *fasthttp.RequestCtx) []byte {
	if ctx.Response.IsBodyStream() {
		return nil
	}
	return ctx.Response.Body()
}

// ServeError answers a request fasthttp could not read (fasthttp.Server's
// ErrorHandler): a body over the limit gets a 413, anything else a 400,
// both with an api.ErrorResponse.
func (h *Handler) ServeError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		h.writeError(ctx, errorf(fasthttp.StatusRequestEntityTooLarge, api.CodeTooLarge,
			"the body is more than the limit of %d bytes", api.MaxBodyBytes))
	case errors.As(err, &small):
		h.writeError(ctx, errorf(fasthttp.StatusRequestHeaderFieldsTooLarge, api.CodeTooLarge, "the request's header is too large"))
	case errors.As(err, &ne) && ne.Timeout():
		h.writeError(ctx, errorf(fasthttp.StatusRequestTimeout, api.CodeInvalid, "timed out reading the request"))
	default:
		h.writeError(ctx, errorf(fasthttp.StatusBadRequest, api.CodeInvalid, "malformed HTTP request: %s", clip(err.Error(), 200)))
	}
}

// endpoint is one method of one path: the roles that may call it (nil:
// no authentication) and its function.
type endpoint struct {
	roles []Role
	fn    func(h *Handler, ctx *fasthttp.RequestCtx, p Principal, args []string) *httpError
}

var (
	readers   = []Role{RoleReader, RoleSubmitter, RoleAdmin}
	submitter = []Role{RoleSubmitter, RoleAdmin}
	nodelets  = []Role{RoleNodelet, RoleAdmin}
	admins    = []Role{RoleAdmin}
	anyone    []Role
	// jobReaders and jobWriters are readers and submitter with job
	// tokens, on the endpoints of one job (its ID the path's), which a
	// job token may call for its own job alone, and the watch stream.
	jobReaders = []Role{RoleReader, RoleSubmitter, RoleAdmin, RoleJob}
	jobWriters = []Role{RoleSubmitter, RoleAdmin, RoleJob}
	allRoles   = []Role{RoleReader, RoleSubmitter, RoleNodelet, RoleAdmin, RoleJob}
)

// The endpoints of each path, by method.
var (
	epHealth = map[string]endpoint{"GET": {anyone, (*Handler).health}}
	epReady  = map[string]endpoint{"GET": {anyone, (*Handler).ready}}
	epJobs   = map[string]endpoint{"GET": {readers, (*Handler).listJobs}, "POST": {submitter, (*Handler).submit}}
	epTasks  = map[string]endpoint{"GET": {jobReaders, (*Handler).listTasks}}
	epCapbox = map[string]endpoint{"GET": {jobReaders, (*Handler).listCapboxes}, "POST": {jobWriters, (*Handler).createCapboxes},
		"DELETE": {jobWriters, (*Handler).releaseCapboxes}}
	epCapTasks = map[string]endpoint{"POST": {jobWriters, (*Handler).startCapTasks}, "DELETE": {jobWriters, (*Handler).stopCapTasks}}
	epJob      = map[string]endpoint{"GET": {jobReaders, (*Handler).getJob}, "DELETE": {jobWriters, (*Handler).cancelJob}}
	epNodes    = map[string]endpoint{"GET": {readers, (*Handler).listNodes}, "POST": {nodelets, (*Handler).register}}
	epTarget   = map[string]endpoint{"GET": {nodelets, (*Handler).target}}
	epReports  = map[string]endpoint{"POST": {nodelets, (*Handler).reports}}
	epNode     = map[string]endpoint{"GET": {readers, (*Handler).getNode}, "DELETE": {admins, (*Handler).removeNode}}
	epDrain    = map[string]endpoint{"POST": {admins, (*Handler).drainNode}, "DELETE": {admins, (*Handler).undrainNode}}
	epLogs     = map[string]endpoint{"GET": {readers, (*Handler).logs}}
	epWatch    = map[string]endpoint{"GET": {jobReaders, (*Handler).watch}}
	epMetrics  = map[string]endpoint{"GET": {readers, (*Handler).serveMetrics}}
	epCluster  = map[string]endpoint{"GET": {readers, (*Handler).cluster}}
	epWhoami   = map[string]endpoint{"GET": {allRoles, (*Handler).whoami}}
	epUI       = map[string]endpoint{"GET": {anyone, (*Handler).serveUI}}
	epQueues   = map[string]endpoint{"GET": {readers, (*Handler).listQueues}}
	epQueue    = map[string]endpoint{"POST": {admins, (*Handler).setQueue}}
)

// Routes of the request metrics: the indexes of RouteNames.
const (
	routeHealth = iota
	routeReady
	routeJobs
	routeJob
	routeJobTasks
	routeCapboxes
	routeCapTasks
	routeNodes
	routeTarget
	routeReports
	routeLogs
	routeWatch
	routeNode
	routeDrain
	routeMembers
	routeMember
	routeQueues
	routeQueue
	routeCluster
	routeWhoami
	routeUI
	routeMetrics
	routeOther // no route: a 404
)

// routeNames are the route label's values, by route index.
var routeNames = [...]string{"healthz", "readyz", "jobs", "job", "job_tasks", "capboxes", "captasks", "nodes",
	"node_target", "node_reports", "task_logs", "watch", "node", "node_drain", "members", "member",
	"queues", "queue", "cluster", "whoami", "ui", "metrics", "other"}

// A name for each route, and none more: this fails to compile otherwise.
var _ = [1]struct{}{}[len(routeNames)-1-routeOther]

// RouteNames are the values of the route label of the request metrics,
// one for each route of the API, "other" last for requests that match
// none.
var RouteNames = routeNames[:]

// NewMetrics returns metrics for HandlerConfig.Metrics (Routes:
// RouteNames); process adds the Go runtime's and the process's.
func NewMetrics(process bool) (*metrics.Metrics, error) {
	return metrics.New(metrics.Config{Routes: RouteNames, Process: process})
}

// route finds the endpoint of the request and serves it; with serve
// false, it only checks what the request's header decides (HeaderReceived).
// It returns the route's index in RouteNames (routeOther when none
// matched) and the error to answer, if any.
func (h *Handler) route(ctx *fasthttp.RequestCtx, serve bool) (int, *httpError) {
	path := string(ctx.Path())
	var eps map[string]endpoint
	var args []string
	rt := routeOther
	// nodeOp, when set, says what the call does to the node args[0]
	// names, which a nodelet may do only to its own.
	var nodeOp string
	switch {
	case path == api.PathHealth:
		eps, rt = epHealth, routeHealth
	case path == api.PathReady:
		eps, rt = epReady, routeReady
	case path == api.PathJobs:
		eps, rt = epJobs, routeJobs
	case strings.HasPrefix(path, api.PathJob):
		rest := path[len(api.PathJob):]
		if id, ok := strings.CutSuffix(rest, "/tasks"); ok && validSegment(id) {
			eps, args, rt = epTasks, []string{id}, routeJobTasks
		} else if id, ok := strings.CutSuffix(rest, "/capboxes"); ok && validSegment(id) {
			eps, args, rt = epCapbox, []string{id}, routeCapboxes
		} else if id, ok := strings.CutSuffix(rest, "/captasks"); ok && validSegment(id) {
			eps, args, rt = epCapTasks, []string{id}, routeCapTasks
		} else if validSegment(rest) {
			eps, args, rt = epJob, []string{rest}, routeJob
		}
	case path == api.PathNodes:
		eps, rt = epNodes, routeNodes
	case strings.HasPrefix(path, api.PathNode):
		rest := path[len(api.PathNode):]
		if name, ok := strings.CutSuffix(rest, "/target"); ok && validSegment(name) {
			eps, args, nodeOp, rt = epTarget, []string{name}, "read the target of", routeTarget
		} else if name, ok := strings.CutSuffix(rest, "/reports"); ok && validSegment(name) {
			eps, args, nodeOp, rt = epReports, []string{name}, "report for", routeReports
		} else if name, ok := strings.CutSuffix(rest, "/drain"); ok && validSegment(name) {
			eps, args, rt = epDrain, []string{name}, routeDrain
		} else if validSegment(rest) {
			eps, args, rt = epNode, []string{rest}, routeNode
		}
	case strings.HasPrefix(path, api.PathTasks):
		if id, ok := strings.CutSuffix(path[len(api.PathTasks):], "/logs"); ok && id != "" {
			eps, args, rt = epLogs, []string{id}, routeLogs
		}
	case path == api.PathWatch:
		eps, rt = epWatch, routeWatch
	case path == api.PathMembers:
		eps, rt = epMembers, routeMembers
	case strings.HasPrefix(path, api.PathMember):
		if id := path[len(api.PathMember):]; validSegment(id) {
			eps, args, rt = epMember, []string{id}, routeMember
		}
	case path == api.PathQueues:
		eps, rt = epQueues, routeQueues
	case strings.HasPrefix(path, api.PathQueue):
		if name := path[len(api.PathQueue):]; validSegment(name) {
			eps, args, rt = epQueue, []string{name}, routeQueue
		}
	case path == api.PathCluster:
		eps, rt = epCluster, routeCluster
	case path == api.PathWhoami:
		eps, rt = epWhoami, routeWhoami
	case path+"/" == api.PathUI || strings.HasPrefix(path, api.PathUI):
		eps, rt = epUI, routeUI
	case path == api.PathMetrics && h.metrics != nil:
		eps, rt = epMetrics, routeMetrics
	}
	if eps == nil {
		return rt, errorf(fasthttp.StatusNotFound, api.CodeNotFound, "no such path: %s", clip(path, 200))
	}
	e := h.serveRoute(ctx, serve, path, eps, args, nodeOp)
	return rt, e
}

// serveRoute is route's part past finding the endpoints of path, eps.
func (h *Handler) serveRoute(ctx *fasthttp.RequestCtx, serve bool, path string, eps map[string]endpoint, args []string, nodeOp string) *httpError {
	method := string(ctx.Method())
	ep, ok := eps[method]
	if !ok {
		allow := make([]string, 0, len(eps))
		for _, m := range []string{"GET", "POST", "DELETE"} {
			if _, ok := eps[m]; ok {
				allow = append(allow, m)
			}
		}
		ctx.Response.Header.Set("Allow", strings.Join(allow, ", "))
		return errorf(fasthttp.StatusMethodNotAllowed, "method_not_allowed", "%s does not take %s; it takes %s",
			path, clip(method, 20), strings.Join(allow, ", "))
	}
	p := Principal{Role: RoleAdmin}
	if ep.roles != nil && (h.cfg.Tokens != nil || h.cfg.JobKeys != nil) {
		var e *httpError
		if p, e = h.authenticate(ctx); e != nil {
			return e
		}
		if e := jobScope(p, ep.roles, method, path, args); e != nil {
			return e
		}
		if !containsRole(ep.roles, p.Role) {
			return errorf(fasthttp.StatusForbidden, api.CodeForbidden, "a %s token may not %s %s", p.Role, method, path)
		}
	}
	if nodeOp != "" && !p.mayNode(args[0]) {
		if !serve {
			return nodeForbidden(p, nodeOp, args[0]) // counted when served
		}
		return h.notYourNode(p, nodeOp, args[0])
	}
	if e := checkDeclaredLength(ctx, method, path); e != nil || !serve {
		return e
	}
	return ep.fn(h, ctx, p, args)
}

func containsRole(rs []Role, r Role) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

// validSegment reports whether s is one non-empty path segment.
func validSegment(s string) bool { return s != "" && !strings.Contains(s, "/") }

// jobScope refuses (403) what a job token may not do: any endpoint but
// its job's own, the watch stream (which shows it its job alone) and
// whoami.
func jobScope(p Principal, roles []Role, method, path string, args []string) *httpError {
	if p.Role != RoleJob {
		return nil
	}
	if !containsRole(roles, RoleJob) {
		return errorf(fasthttp.StatusForbidden, api.CodeForbidden,
			"the job token of %s may only read that job and lease, release and run tasks in its capboxes; it may not %s %s",
			p.Job, method, clip(path, 200))
	}
	if path == api.PathWatch || path == api.PathWhoami {
		return nil
	}
	if len(args) == 0 || args[0] != p.Job {
		other := ""
		if len(args) > 0 {
			other = args[0]
		}
		return errorf(fasthttp.StatusForbidden, api.CodeForbidden,
			"the job token of %s acts for that job alone, not for %q", p.Job, clip(other, 80))
	}
	return nil
}

// authenticate finds who the request's bearer token is: a job token when
// it has the shape of one and JobKeys are set, else a token of Tokens.
// Without Tokens, a request with no token or another one acts as admin.
func (h *Handler) authenticate(ctx *fasthttp.RequestCtx) (Principal, *httpError) {
	auth := string(ctx.Request.Header.Peek("Authorization"))
	tok, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		if strings.HasPrefix(strings.ToLower(auth), "bearer ") {
			tok, ok = auth[len("bearer "):], true
		}
	}
	tok = strings.TrimSpace(tok)
	if h.cfg.JobKeys != nil && strings.HasPrefix(tok, JobTokenPrefix) {
		return h.authenticateJob(ctx, tok)
	}
	if h.cfg.Tokens == nil {
		return Principal{Role: RoleAdmin}, nil
	}
	if !ok || tok == "" {
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="sluice"`)
		return Principal{}, errorf(fasthttp.StatusUnauthorized, api.CodeUnauthorized, "missing bearer token (Authorization: Bearer TOKEN)")
	}
	p, found := h.cfg.Tokens.Lookup(tok)
	if !found {
		return Principal{}, invalidToken(ctx, "unknown token")
	}
	return p, nil
}

// invalidToken is the 401 for a bearer token that does not check.
func invalidToken(ctx *fasthttp.RequestCtx, format string, args ...any) *httpError {
	ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="sluice", error="invalid_token"`)
	return errorf(fasthttp.StatusUnauthorized, api.CodeUnauthorized, format, args...)
}

// authenticateJob checks a job token: its MAC under the key it names, for
// the submit time of the job it names, which must be an appmaster that
// has not ended (401 otherwise, as for an unknown token).
func (h *Handler) authenticateJob(ctx *fasthttp.RequestCtx, tok string) (Principal, *httpError) {
	keyID, job, mac, ok := parseJobToken(tok)
	if !ok {
		return Principal{}, invalidToken(ctx, "unknown token")
	}
	facts, found := h.cfg.FSM.JobFacts(job)
	if !found || !facts.Appmaster || !h.cfg.JobKeys.check(keyID, job, mac, facts.Submitted) {
		// The same answer whatever failed: it says nothing of which jobs
		// exist.
		return Principal{}, invalidToken(ctx, "unknown token")
	}
	if facts.Ended {
		return Principal{}, invalidToken(ctx, "the job token of %s expired: the job has ended", job)
	}
	return Principal{Role: RoleJob, Job: job}, nil
}

// errEncoding is the reply to a request whose answer could not be encoded.
const errEncoding = `{"code":"internal","error":"internal error: encoding the reply"}`

// writeJSON answers status with v as JSON.
func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = fasthttp.StatusInternalServerError
		b = []byte(errEncoding)
	}
	writeJSONBody(ctx, status, b)
}

// writeJSONBody replies with the JSON in b, and a newline. The reply keeps
// b: it must not change afterwards.
func writeJSONBody(ctx *fasthttp.RequestCtx, status int, b []byte) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.Response.SetBodyRaw(append(b, '\n'))
}

// writeEncoded replies with the JSON that enc appends to the buffer it is
// given, and a newline; or, when enc fails, with an internal error, as
// writeJSON does. The buffer comes from bodyBuffers and goes back there
// once fasthttp has copied it: targets and submit replies built in fresh
// memory each time were a tenth of what a busy dispatcher allocated.
func writeEncoded(ctx *fasthttp.RequestCtx, status int, enc func([]byte) ([]byte, error)) {
	bp := bodyBuffers.Get().(*[]byte)
	defer putBuffer(bp)
	b, err := enc((*bp)[:0])
	if err != nil {
		writeJSONBody(ctx, fasthttp.StatusInternalServerError, []byte(errEncoding))
		return
	}
	b = append(b, '\n')
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.Response.SetBody(b)
	*bp = b
}

func (h *Handler) writeError(ctx *fasthttp.RequestCtx, e *httpError) {
	if e.location != "" {
		ctx.Response.Header.Set("Location", e.location)
	}
	if e.retryAfter > 0 {
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	writeJSON(ctx, e.status, e.resp)
}

// leaderError answers a request this replica cannot serve because it does
// not lead: a 307 to the leader's base URL, or a 503 when the leader (or
// its URL) is unknown. A 307 closes the connection: the client writes to
// the leader from now on, and after an election every node would
// otherwise keep an idle connection here, a descriptor on each side.
func (h *Handler) leaderError(ctx *fasthttp.RequestCtx, leader uint64) *httpError {
	if leader == 0 || leader == h.id {
		e := errorf(fasthttp.StatusServiceUnavailable, api.CodeNotLeader, "no leader is known yet (election in progress); retry")
		e.retryAfter = 1
		return e
	}
	base, ok := h.peerURL(leader)
	if !ok {
		e := errorf(fasthttp.StatusServiceUnavailable, api.CodeNotLeader, "not the leader; the leader is replica %d, whose HTTP address is not configured", leader)
		e.retryAfter = 1
		return e
	}
	base = strings.TrimSuffix(base, "/")
	loc := base + string(ctx.URI().PathOriginal())
	if q := ctx.URI().QueryString(); len(q) > 0 {
		loc += "?" + string(q)
	}
	e := errorf(fasthttp.StatusTemporaryRedirect, api.CodeNotLeader, "not the leader; the leader is replica %d at %s", leader, base)
	e.resp.Leader, e.location = base, loc
	ctx.SetConnectionClose()
	return e
}

// stopped answers every request but the health and readiness probes of a
// replica whose raft replica stopped on an error (its disk failed): it
// serves nothing again, and its state may be stale. The answer is a 503
// not_leader, which tells every client that the request did nothing and
// that another replica serves it, and it closes the connection, so that
// the client connects elsewhere. Nil while the replica runs.
func (h *Handler) stopped(ctx *fasthttp.RequestCtx) *httpError {
	select {
	case <-h.cfg.Raft.Failed(): // closed with Err set: no lock a request
	default:
		return nil
	}
	if p := string(ctx.Path()); p == api.PathHealth || p == api.PathReady || p == api.PathMetrics {
		return nil
	}
	return stoppedError(ctx)
}

// stoppedError is the answer of a stopped replica; see stopped.
func stoppedError(ctx *fasthttp.RequestCtx) *httpError {
	e := errorf(fasthttp.StatusServiceUnavailable, api.CodeNotLeader, "this replica has stopped (its store failed); another replica serves")
	e.retryAfter = 1
	ctx.SetConnectionClose()
	return e
}

// requireLeader redirects a write that reached a follower.
func (h *Handler) requireLeader(ctx *fasthttp.RequestCtx) *httpError {
	st := h.cfg.Raft.Status()
	if st.Err != nil {
		return stoppedError(ctx)
	}
	if !st.IsLeader {
		return h.leaderError(ctx, st.Leader)
	}
	return nil
}

// consistent serves ?consistent=1: a raft ReadIndex before a local read.
func (h *Handler) consistent(ctx *fasthttp.RequestCtx) *httpError {
	v := ctx.QueryArgs().Peek("consistent")
	if v == nil {
		return nil
	}
	on, err := parseBool(string(v))
	if err != nil {
		return badParam("consistent", "want 1 or 0, got %q", clip(string(v), 40))
	}
	if !on {
		return nil
	}
	rctx, cancel := context.WithTimeout(h.base, dispatcher.DefaultProposeTimeout)
	defer cancel()
	if err := h.cfg.Raft.ReadIndex(rctx); err != nil {
		return h.fromError(ctx, "consistent read", err)
	}
	return nil
}

func parseBool(s string) (bool, error) {
	switch s {
	case "1", "true", "yes", "":
		return true, nil
	case "0", "false", "no":
		return false, nil
	}
	return false, errors.New("not a boolean")
}

// fromError maps an error of the dispatcher or the replica to a reply.
func (h *Handler) fromError(ctx *fasthttp.RequestCtx, op string, err error) *httpError {
	var nl *raftkv.NotLeaderError
	var ve *api.ValidationError
	switch {
	case errors.As(err, &nl):
		return h.leaderError(ctx, nl.LeaderID)
	case errors.As(err, &ve):
		return invalid(ve.Problems, "%s: %s", op, clip(ve.Error(), 500))
	case errors.Is(err, api.ErrTooLarge):
		return errorf(fasthttp.StatusRequestEntityTooLarge, api.CodeTooLarge, "%s: %s", op, clip(err.Error(), 300))
	case errors.Is(err, raftkv.ErrTooLarge):
		return errorf(fasthttp.StatusRequestEntityTooLarge, api.CodeTooLarge, "%s: the request makes a raft command over the size limit", op)
	case errors.Is(err, fsm.ErrNotFound):
		return errorf(fasthttp.StatusNotFound, api.CodeNotFound, "%s: %s", op, clip(trimFSM(err), 300))
	case errors.Is(err, dispatcher.ErrUnknownNode):
		return errorf(fasthttp.StatusNotFound, api.CodeNotFound, "%s: not found", op)
	case errors.Is(err, fsm.ErrNotAppmaster), errors.Is(err, fsm.ErrAppmasterDone), errors.Is(err, fsm.ErrNotCapbox),
		errors.Is(err, fsm.ErrCapboxNotRunning), errors.Is(err, fsm.ErrNoRoom), errors.Is(err, fsm.ErrNodeBusy):
		return errorf(fasthttp.StatusConflict, api.CodeConflict, "%s: %s", op, clip(trimFSM(err), 300))
	case errors.Is(err, raftkv.ErrOutcomeUnknown):
		return unavailable("%s: the outcome is unknown (leadership changed); check the state before retrying", op)
	case errors.Is(err, raftkv.ErrStopped), errors.Is(err, raftkv.ErrStorage), errors.Is(err, dispatcher.ErrClosed):
		return unavailable("%s: the replica is stopping", op)
	case errors.Is(err, raftkv.ErrProposalDropped):
		return unavailable("%s: the proposal was dropped and not applied; retry", op)
	case errors.Is(err, raftkv.ErrTimeout), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return unavailable("%s: timed out (no quorum, or the server is stopping); the outcome may be unknown", op)
	}
	h.log.Warn("server: internal error", "op", op, "path", string(ctx.Path()), "err", err)
	return errorf(fasthttp.StatusInternalServerError, api.CodeInternal, "%s: internal error", op)
}

// trimFSM is err's message without the fsm package's prefixes.
func trimFSM(err error) string { return strings.ReplaceAll(err.Error(), "fsm: ", "") }

func unavailable(format string, args ...any) *httpError {
	e := errorf(fasthttp.StatusServiceUnavailable, api.CodeUnavailable, format, args...)
	e.retryAfter = 1
	return e
}

// serveMetrics answers the replica's metrics in Prometheus' text format.
func (h *Handler) serveMetrics(ctx *fasthttp.RequestCtx, _ Principal, _ []string) *httpError {
	bp := bodyBuffers.Get().(*[]byte)
	defer putBuffer(bp)
	buf := bytes.NewBuffer((*bp)[:0])
	if err := h.metrics.Write(buf); err != nil {
		h.log.Warn("server: metrics", "err", err)
		return errorf(fasthttp.StatusInternalServerError, api.CodeInternal, "gathering metrics: %s", clip(err.Error(), 300))
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType(metrics.ContentType)
	ctx.Response.SetBody(buf.Bytes())
	*bp = buf.Bytes()
	return nil
}

// serveUI serves the web UI's pages and files: public, as they hold no
// data (their scripts read the API with the user's token).
func (h *Handler) serveUI(ctx *fasthttp.RequestCtx, _ Principal, _ []string) *httpError {
	h.ui.Serve(ctx)
	return nil
}

func (h *Handler) health(ctx *fasthttp.RequestCtx, _ Principal, _ []string) *httpError {
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetBodyString("ok\n")
	return nil
}

func (h *Handler) ready(ctx *fasthttp.RequestCtx, _ Principal, _ []string) *httpError {
	st := h.cfg.Raft.Status()
	switch {
	case st.Err != nil:
		return unavailable("the replica has stopped")
	case h.base.Err() != nil:
		return unavailable("the server is closing")
	case st.Leader == 0:
		return unavailable("no leader is known")
	}
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetBodyString("ready\n")
	return nil
}
