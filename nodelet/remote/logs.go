package remote

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet/runtime"
)

// LogServerConfig configures a LogServer. Zero values mean the documented
// defaults.
type LogServerConfig struct {
	// Runtime whose pods' logs are served. Required.
	Runtime runtime.Runtime
	// Listener is where to serve. Default: a listener on Addr.
	Listener net.Listener
	// Addr is the TCP address to listen on when Listener is nil. Default
	// "127.0.0.1:0".
	Addr string
	// Token, when set, is required of every request as
	// "Authorization: Bearer <Token>": the node's api.NodeSpec.LogToken,
	// which the dispatcher learns from its registration. Default: no
	// check.
	Token string
	// FirstContainer names the first container of the pod that runs a
	// task, or returns "" when it does not know, for requests that name
	// no container (Dispatcher.FirstContainer fits). Default, and when it
	// returns "": "c0", api's default name of a pod's first container.
	FirstContainer func(taskID string) string
	// Metrics, when set, are served at api.PathMetrics (GET) in
	// Prometheus' text format (nodelet/metrics.Metrics fits). Default
	// nil: api.PathMetrics is not found.
	Metrics MetricsWriter
	// MetricsToken, when set, is required of requests for the metrics as
	// "Authorization: Bearer <MetricsToken>". Token is not: it is the
	// dispatcher's, made afresh at each start, and the metrics name no
	// task or pod. Default "": the metrics are served to anyone who
	// reaches the listener.
	MetricsToken string
	// Logger receives failed requests. Default: discarded.
	Logger *slog.Logger
}

// MetricsWriter writes metrics in Prometheus' text format.
type MetricsWriter interface {
	Write(buf *bytes.Buffer) error
}

// metricsContentType is the media type of Prometheus' text format.
const metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// Defaults of LogServerConfig.
const (
	DefaultLogAddr = "127.0.0.1:0"
	// defaultContainer is api's default name of a pod's first container.
	defaultContainer = "c0"
)

// LogServer serves the output of the host's pods at api.PathNodeletLogs:
// GET with query task (the task ID, mapped to its pod by PodID),
// container (default: the pod's first), follow=1 (stream until the pod
// ends, the client goes away or the server closes) and tail=N (only the
// last N lines). Errors are JSON api.ErrorResponse bodies: 400 for bad
// parameters, 401 without the token, 404 for an unknown task, pod or
// container.
//
// One goroutine, started by NewLogServer and ended by Close, accepts
// connections; each follows stream runs in the connection's goroutine
// plus one that watches for the client to go away, both ended by Close.
type LogServer struct {
	cfg    LogServerConfig
	ln     net.Listener
	srv    *fasthttp.Server
	ctx    context.Context // cancelled by Close: ends every stream
	cancel context.CancelFunc
	done   chan struct{} // closed when Serve has returned
	once   sync.Once
	err    error // of Close
}

// NewLogServer listens (unless cfg.Listener is set) and starts serving.
func NewLogServer(cfg LogServerConfig) (*LogServer, error) {
	if cfg.Runtime == nil {
		return nil, errors.New("remote: log server: Runtime is required")
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultLogAddr
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, fmt.Errorf("remote: log server: %w", err)
		}
	}
	s := &LogServer{cfg: cfg, ln: ln, done: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.srv = &fasthttp.Server{
		Handler:               s.handle,
		Name:                  "sluice-nodelet",
		ReadTimeout:           30 * time.Second,
		IdleTimeout:           60 * time.Second,
		MaxRequestBodySize:    4 << 10,
		CloseOnShutdown:       true,
		NoDefaultServerHeader: true,
		Logger:                discardLogger{},
	}
	go func() {
		defer close(s.done)
		ln := api.KeepAccepting(ln, func(err error, wait time.Duration) {
			cfg.Logger.Error("remote: log server accept failed; accepting again", "err", err, "retry_in", wait)
		})
		if err := s.srv.Serve(ln); err != nil && s.ctx.Err() == nil {
			cfg.Logger.Error("remote: log server stopped", "err", err)
		}
	}()
	return s, nil
}

// Addr is the address the server listens on, host:port.
func (s *LogServer) Addr() string { return s.ln.Addr().String() }

// Close ends every stream, stops serving and waits for the serving
// goroutines to end. It is safe to call more than once.
func (s *LogServer) Close() error {
	s.once.Do(func() {
		s.cancel()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.err = s.srv.ShutdownWithContext(ctx)
		// Shutdown does nothing when Serve has not registered the
		// listener yet; closing it ends Serve then.
		_ = s.ln.Close()
		<-s.done
		if s.err != nil {
			s.err = fmt.Errorf("remote: log server: close: %w", s.err)
		}
	})
	return s.err
}

// logRequest is a parsed request.
type logRequest struct {
	task, container string
	follow          bool
	tail            int // -1: all
}

func (s *LogServer) handle(ctx *fasthttp.RequestCtx) {
	if string(ctx.Path()) == api.PathMetrics && s.cfg.Metrics != nil {
		s.serveMetrics(ctx)
		return
	}
	if string(ctx.Path()) != api.PathNodeletLogs {
		writeError(ctx, fasthttp.StatusNotFound, api.CodeNotFound, fmt.Sprintf("no route %s", ctx.Path()))
		return
	}
	if !ctx.IsGet() {
		ctx.Response.Header.Set("Allow", "GET")
		writeError(ctx, fasthttp.StatusMethodNotAllowed, api.CodeInvalid, "only GET is allowed")
		return
	}
	if !s.authorized(ctx) {
		ctx.Response.Header.Set("WWW-Authenticate", "Bearer")
		writeError(ctx, fasthttp.StatusUnauthorized, api.CodeUnauthorized, "missing or wrong bearer token")
		return
	}
	req, err := parseLogRequest(ctx.QueryArgs())
	if err != nil {
		writeError(ctx, fasthttp.StatusBadRequest, api.CodeInvalid, err.Error())
		return
	}
	if req.container == "" && s.cfg.FirstContainer != nil {
		req.container = s.cfg.FirstContainer(req.task)
	}
	if req.container == "" {
		req.container = defaultContainer
	}
	pod := PodID(req.task)

	// What is there now: the whole body without follow, the tail with.
	var head []byte
	var skip int64
	if !req.follow || req.tail >= 0 {
		rc, err := s.cfg.Runtime.Logs(s.ctx, pod, req.container, runtime.LogOptions{})
		if err != nil {
			s.logsError(ctx, req, err)
			return
		}
		if !req.follow && req.tail < 0 {
			ctx.SetContentType("text/plain; charset=utf-8")
			ctx.SetBodyStream(rc, -1) // closed by fasthttp when sent
			return
		}
		head, skip, err = tail(rc, req.tail)
		_ = rc.Close()
		if err != nil {
			s.logsError(ctx, req, err)
			return
		}
		if !req.follow {
			ctx.SetContentType("text/plain; charset=utf-8")
			ctx.SetBody(head)
			return
		}
	}

	sctx, cancel := context.WithCancel(s.ctx)
	rc, err := s.cfg.Runtime.Logs(sctx, pod, req.container, runtime.LogOptions{Follow: true})
	if err != nil {
		cancel()
		s.logsError(ctx, req, err)
		return
	}
	conn := ctx.Conn()
	ctx.SetConnectionClose()
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		defer cancel()
		defer rc.Close()
		stop := watchClient(conn, cancel)
		defer stop()
		if len(head) > 0 {
			if _, err := w.Write(head); err != nil || w.Flush() != nil {
				return
			}
		}
		// The tail came from a reader of its own: skip what it read.
		// If the log rotated in between, this skips newer output.
		if _, err := io.CopyN(io.Discard, rc, skip); err != nil {
			return
		}
		buf := make([]byte, 32<<10)
		for {
			n, err := rc.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil || w.Flush() != nil {
					return
				}
			}
			if err != nil {
				if !errors.Is(err, io.EOF) && sctx.Err() == nil {
					s.cfg.Logger.Warn("remote: follow logs", "task", req.task, "container", req.container, "err", err)
				}
				return
			}
		}
	})
}

// watchClient cancels when the client closes conn (or sends anything,
// which a client of a Connection: close stream has no reason to do). The
// returned stop ends the watch and waits for its goroutine.
func watchClient(conn net.Conn, cancel context.CancelFunc) (stop func()) {
	_ = conn.SetReadDeadline(time.Time{}) // no request timeout while streaming
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		var b [1]byte
		_, _ = conn.Read(b[:])
		cancel()
	}()
	return func() {
		_ = conn.SetReadDeadline(time.Now())
		<-gone
	}
}

func (s *LogServer) authorized(ctx *fasthttp.RequestCtx) bool {
	return bearer(ctx, s.cfg.Token)
}

// bearer reports whether the request carries token as its bearer token,
// or token is "".
func bearer(ctx *fasthttp.RequestCtx, token string) bool {
	if token == "" {
		return true
	}
	got := ctx.Request.Header.Peek(fasthttp.HeaderAuthorization)
	const prefix = "Bearer "
	if len(got) < len(prefix) || !equalFold(got[:len(prefix)], prefix) {
		return false
	}
	return subtle.ConstantTimeCompare(got[len(prefix):], []byte(token)) == 1
}

// serveMetrics answers GET api.PathMetrics with the metrics.
func (s *LogServer) serveMetrics(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() {
		ctx.Response.Header.Set("Allow", "GET")
		writeError(ctx, fasthttp.StatusMethodNotAllowed, api.CodeInvalid, "only GET is allowed")
		return
	}
	if !bearer(ctx, s.cfg.MetricsToken) {
		ctx.Response.Header.Set("WWW-Authenticate", "Bearer")
		writeError(ctx, fasthttp.StatusUnauthorized, api.CodeUnauthorized, "missing or wrong bearer token")
		return
	}
	var buf bytes.Buffer
	if err := s.cfg.Metrics.Write(&buf); err != nil {
		s.cfg.Logger.Warn("remote: metrics", "err", err)
		writeError(ctx, fasthttp.StatusInternalServerError, api.CodeInternal, "gathering metrics failed")
		return
	}
	ctx.SetContentType(metricsContentType)
	ctx.SetBody(buf.Bytes())
}

func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		x, y := b[i]|0x20, s[i]|0x20
		if x != y {
			return false
		}
	}
	return true
}

// parseLogRequest reads and checks the query.
func parseLogRequest(args *fasthttp.Args) (logRequest, error) {
	r := logRequest{
		task:      string(args.Peek("task")),
		container: string(args.Peek("container")),
		tail:      -1,
	}
	var errs []error
	if r.task == "" {
		errs = append(errs, errors.New("task: is required"))
	} else if len(r.task) > api.MaxNameLen {
		errs = append(errs, fmt.Errorf("task: longer than %d bytes", api.MaxNameLen))
	}
	if r.container != "" {
		if msg := runtime.CheckName(r.container); msg != "" {
			errs = append(errs, fmt.Errorf("container: %s", msg))
		}
	}
	switch f := string(args.Peek("follow")); f {
	case "", "0", "false":
	case "1", "true":
		r.follow = true
	default:
		errs = append(errs, fmt.Errorf("follow: want 1 or 0, not %q", f))
	}
	if t := args.Peek("tail"); len(t) > 0 {
		n, err := strconv.Atoi(string(t))
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("tail: want a number of lines, not %q", t))
		}
		r.tail = n
	}
	return r, errors.Join(errs...)
}

// logsError answers a failed runtime Logs call.
func (s *LogServer) logsError(ctx *fasthttp.RequestCtx, req logRequest, err error) {
	switch {
	case errors.Is(err, runtime.ErrNotFound):
		writeError(ctx, fasthttp.StatusNotFound, api.CodeNotFound,
			fmt.Sprintf("no container %q of task %s on this node", req.container, req.task))
	case errors.Is(err, runtime.ErrClosed) || errors.Is(err, context.Canceled):
		writeError(ctx, fasthttp.StatusServiceUnavailable, api.CodeUnavailable, "the nodelet is stopping")
	default:
		s.cfg.Logger.Warn("remote: logs", "task", req.task, "container", req.container, "err", err)
		writeError(ctx, fasthttp.StatusInternalServerError, api.CodeInternal, err.Error())
	}
}

func writeError(ctx *fasthttp.RequestCtx, status int, code, msg string) {
	body, _ := json.Marshal(api.ErrorResponse{Code: code, Error: msg})
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

// tail reads r to its end and returns its last n lines (all of it when n
// is negative) and the number of bytes read. A last line without a
// newline counts as a line.
func tail(r io.Reader, n int) (out []byte, read int64, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var ring [][]byte
	next := 0
	for {
		line, err := br.ReadBytes('\n')
		read += int64(len(line))
		if len(line) > 0 && n != 0 {
			switch {
			case n < 0 || len(ring) < n:
				ring = append(ring, line)
			default:
				ring[next] = line
				next = (next + 1) % n
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, read, err
		}
	}
	for _, l := range ring[next:] {
		out = append(out, l...)
	}
	for _, l := range ring[:next] {
		out = append(out, l...)
	}
	return out, read, nil
}

// discardLogger silences fasthttp's own logging.
type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}
