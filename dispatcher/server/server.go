package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher"
	"github.com/sluicehq/sluice/dispatcher/fsm"
	"github.com/sluicehq/sluice/dispatcher/metrics"
	"github.com/sluicehq/sluice/raftkv"
	"github.com/valyala/fasthttp"
)

// ErrConfig is wrapped by the errors of Open and NewHandler about their
// configuration; the error lists every problem, naming the field.
var ErrConfig = errors.New("server: invalid config")

// DefaultShutdownTimeout bounds how long Close waits for requests in flight.
const DefaultShutdownTimeout = 10 * time.Second

// DefaultSyncInterval is Config.SyncInterval's default: a dispatcher's load
// (nodes' reports, users' submissions) arrives whatever the commit
// latency, so spacing syncs saves CPU where it is short.
const DefaultSyncInterval = 10 * time.Millisecond

// Config configures one dispatcher replica process. The zero value of
// every optional field means its documented default.
type Config struct {
	// ID is this replica's raft ID, a key of Peers. Required.
	ID uint64
	// Peers maps every initial replica's raft ID to its raft (TCP) address,
	// this one's included; it is where this replica's transport listens.
	// A single replica is {ID: ""} and uses no transport (nor can it grow:
	// {ID: "host:port"} can). It is read on first boot; afterwards the
	// members and their addresses come from the replicated member table,
	// and only this replica's own address is taken from it. With Join it
	// is this replica's address and those of the current members (or at
	// least the leader's). Required.
	Peers map[uint64]string
	// PeerHTTP maps replica IDs to their HTTP base URLs, such as
	// "http://10.0.0.1:8001": writes reaching a follower are redirected to
	// the leader's. On first boot it is stored with the initial members;
	// a replica added later brings its own URL, replicated with its
	// membership, which wins. Default none: followers answer 503
	// not_leader for a leader whose URL is unknown.
	PeerHTTP map[uint64]string
	// Join starts a new, empty replica that waits to be added to a running
	// cluster (POST /v1/members on the leader) and then catches up from a
	// snapshot. It is read on first boot only. Default false: bootstrap a
	// new cluster of Peers.
	Join bool
	// Dir is the data directory; the raft replica's store is Dir/raft.
	// Required.
	Dir string
	// FS is the filesystem the raft replica's store is on
	// (raftkv.Config.FS). Default: the operating system's. Tests pass
	// pebble's error-injecting FS to make the store fail.
	FS vfs.FS
	// HTTPAddr is the HTTP listen address, such as ":8001" or
	// "127.0.0.1:0" (Server.Addr says which port). Required.
	HTTPAddr string
	// Tokens authenticates requests. Nil: no authentication.
	Tokens *Tokens
	// JobKeys make and check the job tokens appmasters in the cluster get
	// (HandlerConfig.JobKeys); every replica must hold the same. Nil: no
	// job tokens.
	JobKeys *JobKeys
	// TLS, when set, serves HTTPS with this configuration.
	TLS *tls.Config
	// PeerTLS, when set, is raftkv.TCPConfig.TLS for the raft transport:
	// the replicas then speak to each other only over mutual TLS 1.3 with
	// certificates of the CA in its RootCAs, each valid for the host of
	// the replica's address in Peers (raftkv.LoadPeerTLS loads one).
	// Default nil: the raft transport speaks plaintext and accepts any
	// dialer. It is not used by a replica without a raft address.
	PeerTLS *tls.Config
	// Dispatcher tunes the dispatcher; Open fills its Raft and FSM, and its
	// Logger defaults to Logger.
	Dispatcher dispatcher.Config
	// TickInterval is the raft tick. Default raftkv's (100ms).
	TickInterval time.Duration
	// SyncInterval is the least time between two syncs of this replica's
	// raft log (raftkv.Config.SyncInterval): under load, the writes of
	// that long share one sync, which costs the replicas a sixth less CPU
	// a task at 24k tasks/s for some milliseconds of commit latency; a
	// client that waits for each commit before the next gets at most one
	// an interval. Default DefaultSyncInterval; negative: sync as soon as
	// asked.
	SyncInterval time.Duration
	// ShutdownTimeout bounds how long Close waits for requests in flight
	// after the listener is closed. Default 10s.
	ShutdownTimeout time.Duration
	// WatchKeepAlive is HandlerConfig.WatchKeepAlive. Default 15s.
	WatchKeepAlive time.Duration
	// Conns bounds the HTTP connections the replica holds open; at the
	// limit, a new connection takes the place of the longest idle one or
	// waits to be accepted (api.ConnLimit), so that the store and the
	// raft peers keep the descriptors they need when every node
	// reconnects at once, as after an election. Replicas in one process
	// share a limit of ConnLimitFor(their number). Default:
	// ConnLimitFor(1).
	Conns *api.ConnLimit
	// BodyMemory is HandlerConfig.BodyMemory: the most bytes of request
	// bodies the replica holds at once. At least MinBodyMemory. Default
	// DefaultBodyMemory.
	BodyMemory int64
	// DisableMetrics turns the replica's Prometheus metrics off: nothing
	// is counted, and api.PathMetrics is not found. Default false: the
	// replica serves them at api.PathMetrics to readers (dispatcher/metrics
	// lists them).
	DisableMetrics bool
	// Logger receives the logs of every part. Default: discard.
	Logger *slog.Logger
}

// Validate reports every problem of c at once.
func (c *Config) Validate() error {
	var probs []string
	add := func(f string, a ...any) { probs = append(probs, fmt.Sprintf(f, a...)) }
	if c.ID == 0 {
		add("ID is required (non-zero)")
	}
	if len(c.Peers) == 0 {
		add("Peers is required")
	} else if _, ok := c.Peers[c.ID]; !ok && c.ID != 0 {
		add("Peers has no entry for ID %d", c.ID)
	}
	if len(c.Peers) > 1 || c.Peers[c.ID] != "" {
		for id, a := range c.Peers {
			if id == 0 {
				add("Peers: replica ID 0 is not allowed")
			}
			if _, _, err := net.SplitHostPort(a); err != nil {
				add("Peers[%d] %q must be host:port", id, a)
			}
		}
	}
	if c.Join && len(c.Peers) < 2 {
		add("Join needs Peers to hold this replica's address and at least the leader's")
	}
	if c.PeerTLS != nil && c.Peers[c.ID] != "" {
		for _, p := range raftkv.PeerTLSProblems(c.PeerTLS) {
			add("PeerTLS: %s", p)
		}
	}
	probs = append(probs, checkPeerHTTP(c.PeerHTTP)...)
	if c.Dir == "" {
		add("Dir is required")
	}
	if c.HTTPAddr == "" {
		add("HTTPAddr is required")
	} else if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		add("HTTPAddr %q must be host:port", c.HTTPAddr)
	}
	if c.TickInterval < 0 {
		add("TickInterval %v must not be negative", c.TickInterval)
	}
	if c.ShutdownTimeout < 0 {
		add("ShutdownTimeout %v must not be negative", c.ShutdownTimeout)
	}
	if c.WatchKeepAlive < 0 {
		add("WatchKeepAlive %v must not be negative", c.WatchKeepAlive)
	}
	if c.BodyMemory != 0 && c.BodyMemory < MinBodyMemory {
		add("BodyMemory %d must be 0 (default) or at least %d", c.BodyMemory, MinBodyMemory)
	}
	if c.Dispatcher.Raft != nil || c.Dispatcher.FSM != nil {
		add("Dispatcher.Raft and Dispatcher.FSM must be nil: Open fills them")
	}
	d := c.Dispatcher
	d.Raft, d.FSM = &raftkv.Node{}, &fsm.FSM{} // placeholders, so that only tuning is checked
	if err := d.Validate(); err != nil {
		add("Dispatcher: %s", strings.TrimPrefix(strings.TrimPrefix(err.Error(), dispatcher.ErrConfig.Error()), ": "))
	}
	if len(probs) > 0 {
		return fmt.Errorf("%w: %s", ErrConfig, strings.Join(probs, "; "))
	}
	return nil
}

// Server is one running dispatcher replica: its raft replica (and
// transport), FSM, dispatcher and HTTP API.
type Server struct {
	cfg     Config
	log     *slog.Logger
	tr      *raftkv.TCPTransport
	fsm     *fsm.FSM
	raft    *raftkv.Node
	disp    *dispatcher.Dispatcher
	handler *Handler
	http    *fasthttp.Server
	ln      net.Listener
	addr    string

	// cancel ends the base context of long-polls and streams.
	cancel context.CancelFunc
	// watchDone is closed when watchReplica has returned.
	watchDone chan struct{}
	serveDone chan struct{} // closed when the HTTP server's Serve returned
	serveErr  error         // Serve's error, read after serveDone

	closeOnce sync.Once
	closeErr  error
}

// Open validates cfg and starts a replica: the raft transport (when there
// is more than one peer), the FSM and raft replica on Dir, the dispatcher
// and the HTTP server. On error everything started is stopped again.
func Open(cfg Config) (_ *Server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.SyncInterval == 0 {
		cfg.SyncInterval = DefaultSyncInterval
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	if cfg.Conns == nil {
		if cfg.Conns, err = ConnLimitFor(1); err != nil {
			return nil, err
		}
	}
	s := &Server{cfg: cfg, log: cfg.Logger, serveDone: make(chan struct{})}
	var closers []func()
	defer func() {
		if err != nil {
			for i := len(closers) - 1; i >= 0; i-- {
				closers[i]()
			}
		}
	}()

	var tr raftkv.Transport
	if cfg.Peers[cfg.ID] != "" {
		s.tr, err = raftkv.NewTCPTransport(raftkv.TCPConfig{
			ID: cfg.ID, ListenAddr: cfg.Peers[cfg.ID], Peers: cfg.Peers, TLS: cfg.PeerTLS, Logger: cfg.Logger,
		})
		if err != nil {
			return nil, fmt.Errorf("server: raft transport: %w", err)
		}
		closers = append(closers, func() { _ = s.tr.Close() })
		tr = s.tr
	}
	s.fsm = fsm.New()
	s.raft, err = raftkv.Open(raftkv.Config{
		ID: cfg.ID, Dir: filepath.Join(cfg.Dir, "raft"), FS: cfg.FS, Peers: cfg.Peers, PeerMeta: cfg.PeerHTTP, Join: cfg.Join, Transport: tr,
		StateMachine: s.fsm, TickInterval: cfg.TickInterval, SyncInterval: max(cfg.SyncInterval, 0), Logger: cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	closers = append(closers, func() { _ = s.raft.Close() })
	dcfg := cfg.Dispatcher
	dcfg.Raft, dcfg.FSM = s.raft, s.fsm
	if dcfg.Logger == nil {
		dcfg.Logger = cfg.Logger
	}
	var m *metrics.Metrics
	if !cfg.DisableMetrics {
		if m, err = NewMetrics(true); err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		if prev := dcfg.OnRound; prev != nil {
			dcfg.OnRound = func(st dispatcher.RoundStat) { m.ObserveRound(st); prev(st) }
		} else {
			dcfg.OnRound = m.ObserveRound
		}
	}
	if s.disp, err = dispatcher.New(dcfg); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	closers = append(closers, func() { _ = s.disp.Close() })
	if m != nil {
		m.Attach(s.disp, s.fsm, s.raft)
	}

	base, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	closers = append(closers, cancel)
	s.handler, err = NewHandler(HandlerConfig{
		Dispatcher: s.disp, FSM: s.fsm, Raft: s.raft, PeerHTTP: cfg.PeerHTTP, Tokens: cfg.Tokens, JobKeys: cfg.JobKeys,
		BaseContext: base, WatchKeepAlive: cfg.WatchKeepAlive, Logger: cfg.Logger, BodyMemory: cfg.BodyMemory,
		Metrics: m,
	})
	if err != nil {
		return nil, err
	}
	s.ln, err = net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("server: HTTP listen on %s: %w", cfg.HTTPAddr, err)
	}
	scheme := "http"
	if cfg.TLS != nil {
		scheme = "https"
	}
	s.addr = scheme + "://" + dialable(s.ln.Addr())
	s.ln = cfg.Conns.Listener(api.KeepAccepting(s.ln, func(err error, wait time.Duration) {
		s.log.Error("server: HTTP accept failed; accepting again", "replica", cfg.ID, "err", err, "retry_in", wait)
	}))
	if cfg.TLS != nil {
		s.ln = tls.NewListener(s.ln, cfg.TLS.Clone())
	}
	s.http = NewHTTPServer(s.handler, cfg.Logger)
	s.http.ConnState = cfg.Conns.ConnState
	go func() {
		defer close(s.serveDone)
		s.serveErr = s.http.Serve(s.ln)
		if s.serveErr != nil {
			s.log.Error("server: HTTP serving ended", "replica", cfg.ID, "err", s.serveErr)
		}
	}()
	s.watchDone = make(chan struct{})
	go s.watchReplica(base)
	s.log.Info("server: serving", "replica", cfg.ID, "addr", s.addr)
	return s, nil
}

// watchReplica waits until the raft replica fails or base, the base
// context of long-polls and streams, ends (Close ends it).
// When the replica fails it ends every long-poll and stream at once: a
// watch stream would otherwise stay open on a replica that has nothing
// new to send, its keep-alives hiding that from its client.
func (s *Server) watchReplica(base context.Context) {
	defer close(s.watchDone)
	select {
	case <-s.raft.Failed():
		s.log.Error("server: the replica stopped on an error; it serves nothing until it is restarted",
			"replica", s.cfg.ID, "err", s.raft.Err())
		s.cancel()
	case <-base.Done():
	}
}

// FileReserve is how many file descriptors ConnLimitFor keeps out of the
// process's limit for each replica, beside its HTTP connections: pebble's
// table cache (up to 1,000 open sstables), its log, manifest and lock
// files, the raft transport's connections, and the nodelet connections of
// proxied log requests.
const FileReserve = 1200

// ConnLimitFor returns a connection limit (Config.Conns) for replicas
// replicas sharing this process: its open-file limit less FileReserve for
// each, and at least a quarter of the limit.
func ConnLimitFor(replicas int) (*api.ConnLimit, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return nil, fmt.Errorf("server: read the open-files limit: %w", err)
	}
	return api.NewConnLimit(connsWithin(lim.Cur, replicas)), nil
}

// connsWithin is ConnLimitFor's arithmetic for an open-file limit of files.
func connsWithin(files uint64, replicas int) int {
	files = min(files, math.MaxInt32)
	reserve := uint64(max(replicas, 1)) * FileReserve
	if files < 4*reserve/3 {
		return int(files / 4)
	}
	return int(files - reserve)
}

// Bounds of the buffers fasthttp keeps in its pools (process-wide):
// request bodies are streamed (fasthttp holds at most 8 KiB of one), and
// a larger buffer, of a reply or of a body read by another server of the
// process, is left to the collector.
const (
	maxPooledRequestBody  = 64 << 10
	maxPooledResponseBody = maxPooledBuffer
)

var setPoolLimits sync.Once

// NewHTTPServer returns a fasthttp server for h with the limits the API
// needs: request bodies streamed to the handler, which authenticates a
// request and checks its declared length (HeaderReceived) before reading
// any of its body, and reads it into memory counted against
// HandlerConfig.BodyMemory, at most api.MaxBodyBytes; read errors
// answered with api.ErrorResponse bodies. It bounds the buffers fasthttp
// pools, for every server of the process (fasthttp.SetBodySizePoolLimit).
func NewHTTPServer(h *Handler, logger *slog.Logger) *fasthttp.Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	setPoolLimits.Do(func() { fasthttp.SetBodySizePoolLimit(maxPooledRequestBody, maxPooledResponseBody) })
	return &fasthttp.Server{
		Handler:                      h.ServeFastHTTP,
		ErrorHandler:                 h.ServeError,
		HeaderReceived:               h.HeaderReceived,
		StreamRequestBody:            true,
		DisablePreParseMultipartForm: true,
		Name:                         "sluice",
		MaxRequestBodySize:           api.MaxBodyBytes,
		ReadBufferSize:               16 << 10,
		ReadTimeout:                  time.Minute,
		IdleTimeout:                  2 * time.Minute,
		NoDefaultContentType:         true,
		CloseOnShutdown:              true,
		Logger:                       fasthttpLogger{logger},
		SecureErrorLogMessage:        true,
	}
}

// fasthttpLogger sends fasthttp's logs to slog at debug.
type fasthttpLogger struct{ l *slog.Logger }

func (f fasthttpLogger) Printf(format string, args ...any) {
	f.l.Debug("fasthttp: " + fmt.Sprintf(format, args...))
}

// dialable turns a listener's address into one a client can dial: an
// unspecified host (":8001", "[::]:8001") becomes 127.0.0.1.
func dialable(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// Addr returns the base URL the HTTP server listens on, such as
// "http://127.0.0.1:8001".
func (s *Server) Addr() string { return s.addr }

// Dispatcher returns the replica's dispatcher.
func (s *Server) Dispatcher() *dispatcher.Dispatcher { return s.disp }

// FSM returns the replica's state machine.
func (s *Server) FSM() *fsm.FSM { return s.fsm }

// Raft returns the raft replica.
func (s *Server) Raft() *raftkv.Node { return s.raft }

// Handler returns the HTTP handler.
func (s *Server) Handler() *Handler { return s.handler }

// Failed returns a channel that is closed when the replica can no longer
// go on: its raft replica stopped on an error, such as a write or sync of
// its store that failed (a full or broken disk). From then on the replica
// answers every request but /healthz and /readyz with a 503 not_leader, so
// that clients go to another replica, and /readyz with a 503; its owner
// should Close it and, as `sluice dispatcher` does, exit non-zero with
// Err, so that the failure is seen and the replica repaired. Close
// itself does not close the channel.
func (s *Server) Failed() <-chan struct{} { return s.raft.Failed() }

// Err returns the error that stopped the replica (see Failed), or nil.
func (s *Server) Err() error { return s.raft.Err() }

// Close stops the replica: it ends long-polls and streams, shuts the HTTP
// server down (waiting up to ShutdownTimeout for requests in flight), then
// closes the dispatcher, the raft replica and the transport, in that order.
// Every goroutine Open started has ended when it returns. It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		s.cancel()
		<-s.watchDone
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		if err := s.http.ShutdownWithContext(ctx); err != nil {
			errs = append(errs, fmt.Errorf("server: HTTP shutdown: %w", err))
		}
		cancel()
		<-s.serveDone
		if s.serveErr != nil {
			errs = append(errs, fmt.Errorf("server: HTTP serve: %w", s.serveErr))
		}
		s.handler.Wait()
		if err := s.disp.Close(); err != nil {
			errs = append(errs, err)
		}
		if err := s.raft.Close(); err != nil {
			errs = append(errs, err)
		}
		if s.tr != nil {
			if err := s.tr.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		s.closeErr = errors.Join(errs...)
		s.log.Info("server: closed", "replica", s.cfg.ID)
	})
	return s.closeErr
}
