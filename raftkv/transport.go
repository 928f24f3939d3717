package raftkv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluicehq/sluice/clock"
)

// Defaults of TCPConfig, used where a field is zero.
const (
	DefaultTCPQueueSize           = 4096
	DefaultTCPMaxBatchBytes       = 1 << 20
	DefaultTCPMaxFrameBytes       = 64 << 20
	DefaultTCPMaxSnapshotBytes    = 4 << 30
	DefaultTCPDialTimeout         = 2 * time.Second
	DefaultTCPWriteTimeout        = 5 * time.Second
	DefaultTCPReconnectBackoff    = 50 * time.Millisecond
	DefaultTCPMaxReconnectBackoff = 2 * time.Second
)

// ErrTransportClosed is returned by Start after Close.
var ErrTransportClosed = errors.New("raftkv: transport closed")

// TCPConfig configures a TCPTransport. Zero values mean the documented
// defaults; NewTCPTransport copies it, so later changes have no effect.
type TCPConfig struct {
	// ID is this replica's raft node ID. Required, not zero.
	ID uint64
	// ClusterID names the raft group. Both ends of a connection must have
	// the same one, or the handshake fails with a message naming both.
	// Zero is a valid cluster ID.
	ClusterID uint64
	// ListenAddr is the TCP address to listen on, e.g. "10.0.0.1:7001" or
	// "127.0.0.1:0" for a free port (TCPTransport.Addr says which).
	// Required.
	ListenAddr string
	// Peers maps the node IDs of the other replicas to their addresses.
	// An entry for ID itself is ignored. More can be added with AddPeer.
	Peers map[uint64]string
	// QueueSize is the number of messages that may wait for one peer;
	// Send drops what does not fit. Default DefaultTCPQueueSize.
	QueueSize int
	// MaxBatchBytes is the payload size at which a frame is closed and the
	// next begins. A single larger message still goes out, alone in its
	// frame. Default DefaultTCPMaxBatchBytes (1 MiB).
	MaxBatchBytes int
	// MaxFrameBytes is the largest frame payload sent or accepted: a
	// larger message is dropped by the sender (and logged), a larger frame
	// closes the receiving connection. At most 1 GiB. Default
	// DefaultTCPMaxFrameBytes (64 MiB).
	MaxFrameBytes int
	// MaxSnapshotBytes is the largest marshalled MsgSnap sent or accepted.
	// Default DefaultTCPMaxSnapshotBytes (4 GiB).
	MaxSnapshotBytes int64
	// DialTimeout bounds connecting to a peer and each side's handshake
	// (the TLS handshake and the hello together, so that a dialer that is
	// slow or silent holds a listener's goroutine no longer). Default
	// DefaultTCPDialTimeout (2 s).
	DialTimeout time.Duration
	// WriteTimeout is how long a write may make no progress before the
	// connection is given up; it also bounds each read of an incoming
	// snapshot. Default DefaultTCPWriteTimeout (5 s).
	WriteTimeout time.Duration
	// ReconnectBackoff is the first wait after a failed dial; it doubles
	// with each further failure up to MaxReconnectBackoff and resets on
	// success. Default DefaultTCPReconnectBackoff (50 ms).
	ReconnectBackoff time.Duration
	// MaxReconnectBackoff caps ReconnectBackoff's growth. Default
	// DefaultTCPMaxReconnectBackoff (2 s).
	MaxReconnectBackoff time.Duration
	// Clock times the waits between dials and between failed accepts;
	// deadlines on connections stay on real time. Default the system
	// clock.
	Clock clock.Clock
	// TLS, when set, makes every connection mutual TLS 1.3; nil (the
	// default) speaks plaintext and accepts any dialer that knows the
	// wire format. It holds this replica's certificate chain and key in
	// Certificates (or callbacks GetCertificate and GetClientCertificate)
	// and the cluster CA in RootCAs, which verifies the peers' server
	// certificates and, unless ClientCAs is set, their client
	// certificates. The transport uses clones and sets, whatever was
	// there: MinVersion TLS 1.3, ClientAuth RequireAndVerifyClientCert,
	// and, when dialling, ServerName to the host of the peer's address.
	// The certificate of every replica must therefore carry the host of
	// its peer address (as written in Peers and AddPeer: a DNS name or an
	// IP address) as a subject alternative name, and both the serverAuth
	// and clientAuth extended key usages. See the package documentation,
	// "Security", for what a peer's certificate proves. LoadPeerTLS
	// builds this from PEM files.
	TLS *tls.Config
	// Logger receives the transport's logs. Default: none.
	Logger *slog.Logger
}

// withDefaults returns a copy of c with every zero field set to its
// default and its own Peers map.
func (c TCPConfig) withDefaults() TCPConfig {
	peers := make(map[uint64]string, len(c.Peers))
	for id, addr := range c.Peers {
		peers[id] = addr
	}
	c.Peers = peers
	if c.QueueSize == 0 {
		c.QueueSize = DefaultTCPQueueSize
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = DefaultTCPMaxBatchBytes
	}
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = DefaultTCPMaxFrameBytes
	}
	if c.MaxSnapshotBytes == 0 {
		c.MaxSnapshotBytes = DefaultTCPMaxSnapshotBytes
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultTCPDialTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultTCPWriteTimeout
	}
	if c.ReconnectBackoff == 0 {
		c.ReconnectBackoff = DefaultTCPReconnectBackoff
	}
	if c.MaxReconnectBackoff == 0 {
		c.MaxReconnectBackoff = max(DefaultTCPMaxReconnectBackoff, c.ReconnectBackoff)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Clock = clock.OrSystem(c.Clock)
	return c
}

// Validate reports every problem of c at once, after defaults are applied.
func (c TCPConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("raftkv: tcp transport config: "+format, args...))
	}
	if c.ID == 0 {
		bad("ID must not be zero")
	}
	if c.ListenAddr == "" {
		bad("ListenAddr is required")
	}
	for _, id := range slices.Sorted(maps.Keys(c.Peers)) {
		addr := c.Peers[id]
		if id == 0 {
			bad("Peers: node ID 0 (at %q) is not a valid ID", addr)
		}
		if addr == "" {
			bad("Peers[%d]: empty address", id)
		}
	}
	if c.QueueSize < 0 {
		bad("QueueSize %d is negative", c.QueueSize)
	}
	if c.MaxFrameBytes < 0 || c.MaxFrameBytes > tcpFrameLimit {
		bad("MaxFrameBytes %d is outside [1, %d]", c.MaxFrameBytes, tcpFrameLimit)
	}
	if c.MaxBatchBytes < 0 || c.MaxBatchBytes > c.MaxFrameBytes {
		bad("MaxBatchBytes %d is outside [1, MaxFrameBytes=%d]", c.MaxBatchBytes, c.MaxFrameBytes)
	}
	if c.MaxSnapshotBytes < 0 {
		bad("MaxSnapshotBytes %d is negative", c.MaxSnapshotBytes)
	}
	if c.DialTimeout < 0 {
		bad("DialTimeout %v is negative", c.DialTimeout)
	}
	if c.WriteTimeout < 0 {
		bad("WriteTimeout %v is negative", c.WriteTimeout)
	}
	if c.ReconnectBackoff < 0 {
		bad("ReconnectBackoff %v is negative", c.ReconnectBackoff)
	}
	if c.MaxReconnectBackoff < c.ReconnectBackoff {
		bad("MaxReconnectBackoff %v is below ReconnectBackoff %v", c.MaxReconnectBackoff, c.ReconnectBackoff)
	}
	if c.TLS != nil {
		for _, p := range PeerTLSProblems(c.TLS) {
			bad("TLS: %s", p)
		}
	}
	return errors.Join(errs...)
}

// PeerTLSProblems lists what makes tc unfit for TCPConfig.TLS, each
// problem a phrase without a prefix; none when it fits.
func PeerTLSProblems(tc *tls.Config) []string {
	var probs []string
	if len(tc.Certificates) == 0 && (tc.GetCertificate == nil || tc.GetClientCertificate == nil) {
		probs = append(probs, "no certificate: set Certificates (or both GetCertificate and GetClientCertificate)")
	}
	if tc.RootCAs == nil {
		probs = append(probs, "RootCAs (the cluster CA) is required; the system's roots are never trusted for peers")
	}
	if tc.InsecureSkipVerify {
		probs = append(probs, "InsecureSkipVerify must be false")
	}
	if tc.MaxVersion != 0 && tc.MaxVersion < tls.VersionTLS13 {
		probs = append(probs, fmt.Sprintf("MaxVersion %s is below TLS 1.3, the least the transport speaks", tls.VersionName(tc.MaxVersion)))
	}
	return probs
}

// TCPStats are the counters of a TCPTransport since it was created. Every
// field only grows.
type TCPStats struct {
	// MessagesSent counts messages written to a peer's connection (including
	// snapshots); MessagesReceived counts messages delivered to the Handler.
	MessagesSent, MessagesReceived uint64
	// MessagesDropped counts messages given up on: queue full, unknown or
	// removed peer, peer unreachable, write failed, too large, failed
	// snapshot. MessagesFiltered counts those the filter dropped.
	MessagesDropped, MessagesFiltered uint64
	// BytesSent and BytesReceived count frame bytes, headers included.
	BytesSent, BytesReceived uint64
	// FramesSent and FramesReceived count frames; with messages, they show
	// how well batching works.
	FramesSent, FramesReceived uint64
	// ChecksumFailures counts frames and snapshots received with a bad
	// CRC-32C; each closed its connection.
	ChecksumFailures uint64
	// ProtocolErrors counts inbound connections closed for anything else
	// that broke the wire format: malformed or oversized frames, bad
	// hellos, messages not from the peer the hello named.
	ProtocolErrors uint64
	// HandshakesRejected counts hellos refused (other cluster, other node,
	// other version), on either side.
	HandshakesRejected uint64
	// TLSHandshakeFailures counts TLS handshakes that failed, on either
	// side: a plaintext dialer, no certificate or one the cluster CA did
	// not sign, a server certificate not valid for the dialled host, a
	// handshake not done within DialTimeout. Each closed its connection
	// before a hello was read or sent.
	TLSHandshakeFailures uint64
	// DialFailures counts failed connection attempts, handshakes included.
	DialFailures uint64
	// UnreachableReports counts Handler.ReportUnreachable calls.
	UnreachableReports uint64
	// SnapshotsSent, SnapshotsFailed and SnapshotsReceived count MsgSnap
	// streams; SnapshotBytesSent and SnapshotBytesReceived their bytes on
	// the wire (compressed).
	SnapshotsSent, SnapshotsFailed, SnapshotsReceived uint64
	SnapshotBytesSent, SnapshotBytesReceived          uint64
}

// tcpCounters back TCPStats.
type tcpCounters struct {
	messagesSent, messagesReceived, messagesDropped, messagesFiltered atomic.Uint64
	bytesSent, bytesReceived, framesSent, framesReceived              atomic.Uint64
	checksumFailures, protocolErrors, handshakesRejected              atomic.Uint64
	tlsHandshakeFailures                                              atomic.Uint64
	dialFailures, unreachableReports                                  atomic.Uint64
	snapshotsSent, snapshotsFailed, snapshotsReceived                 atomic.Uint64
	snapshotBytesSent, snapshotBytesReceived                          atomic.Uint64
}

// TCPTransport is a Transport over TCP.
//
// Each peer has one outbound goroutine that owns its connection and a
// bounded queue: it dials (with backoff after failures), then drains
// whatever is queued into frames of up to MaxBatchBytes, writes them through
// one buffered writer and flushes when the queue is empty. Order is kept per
// peer. A MsgSnap does not use the queue: it is marshalled, compressed with
// zstd and streamed on a connection of its own, at most one per peer at a
// time, so a large snapshot never holds up heartbeats; its outcome is
// reported with Handler.ReportSnapshot.
//
// Each inbound connection has one goroutine that, with TLS, completes the
// TLS handshake (a client certificate of the cluster CA; see the package
// documentation, "Security"), then checks the peer's hello (cluster ID,
// node IDs, version) and then reads frames, verifying each one's checksum before delivering
// any of its messages; a connection that breaks the wire format is closed
// and counted (see TCPStats). The TLS handshake and the hello together
// must end within DialTimeout.
//
// The transport listens in NewTCPTransport, so Addr is known at once;
// nothing is accepted, dialled or reported before Start. Handler calls come
// from the transport's goroutines: Receive from one goroutine per inbound
// connection (concurrently), ReportUnreachable and ReportSnapshot from one
// reporting goroutine, so they never run inside Send. Close waits for
// Handler calls in progress, so a Handler must not call Close.
//
// Send never blocks: a message that cannot be queued is dropped and the peer
// reported unreachable, at most once per reconnect backoff window.
//
// The wire format (hello, reply, frames, snapshot stream) is described at
// the top of transport_wire.go; its errors are ErrFrameTooLarge,
// ErrChecksumMismatch, ErrMalformed and ErrHandshakeRejected.
type TCPTransport struct {
	cfg    TCPConfig
	log    *slog.Logger
	ln     net.Listener
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	// wg counts every goroutine the transport starts; Close waits for it.
	wg     sync.WaitGroup
	filter atomic.Pointer[func(*raftpb.Message) bool]
	stats  tcpCounters
	rep    tcpReporter
	// serverTLS and clientTLS are derived from TCPConfig.TLS; both nil
	// without it. clientTLS lacks ServerName, which each dial sets.
	serverTLS, clientTLS *tls.Config

	closeOnce sync.Once
	closeErr  error

	mu struct {
		sync.RWMutex
		// started and closed are set by Start and Close.
		started, closed bool
		// peers holds the outbound side of every known peer.
		peers map[uint64]*tcpPeer
		// inbound holds every accepted connection still open.
		inbound map[net.Conn]struct{}
		// streams holds the newest message stream from each peer; an older
		// one is closed when a newer arrives, so that messages from two
		// connections never interleave.
		streams map[uint64]net.Conn
	}
}

var _ Transport = (*TCPTransport)(nil)

// NewTCPTransport validates cfg, applies its defaults and starts listening
// on cfg.ListenAddr. Connections wait in the listen backlog until Start.
func NewTCPTransport(cfg TCPConfig) (*TCPTransport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("raftkv: tcp transport: listen on %s: %w", cfg.ListenAddr, err)
	}
	t := &TCPTransport{
		cfg: cfg,
		log: cfg.Logger.With("component", "raftkv.transport", "node", cfg.ID),
		ln:  ln,
	}
	if cfg.TLS != nil {
		t.serverTLS, t.clientTLS = peerTLSConfigs(cfg.TLS)
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.rep.init()
	t.mu.peers = make(map[uint64]*tcpPeer, len(cfg.Peers))
	t.mu.inbound = make(map[net.Conn]struct{})
	t.mu.streams = make(map[uint64]net.Conn)
	for id, addr := range cfg.Peers {
		if id != cfg.ID {
			t.mu.peers[id] = t.newPeer(id, addr)
		}
	}
	return t, nil
}

// Addr returns the address the transport listens on, with the port chosen
// by the system if ListenAddr asked for port 0.
func (t *TCPTransport) Addr() string { return t.ln.Addr().String() }

// Start begins accepting connections, dialling peers and delivering to h.
// It returns an error if h is nil, if Start was called before, or after
// Close.
func (t *TCPTransport) Start(h Handler) error {
	if h == nil {
		return errors.New("raftkv: tcp transport: Start with a nil Handler")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return fmt.Errorf("raftkv: tcp transport: start: %w", ErrTransportClosed)
	}
	if t.mu.started {
		return errors.New("raftkv: tcp transport: started twice")
	}
	t.mu.started = true
	t.wg.Add(2)
	go t.acceptLoop(h)
	go t.runReporter(h)
	for _, p := range t.mu.peers {
		t.startPeerLocked(p)
	}
	t.log.Info("transport started", "addr", t.Addr(), "peers", len(t.mu.peers), "tls", t.serverTLS != nil)
	return nil
}

// Send queues msgs for their peers (m.To) and returns without blocking. It
// takes ownership of the messages: the caller must not change them after.
// Messages the filter rejects are dropped silently (a MsgSnap is also
// reported as a failed snapshot, which is what a partition would cause).
// Messages for unknown peers, or that find their peer's queue full, are
// dropped and the peer reported unreachable; a MsgSnap that cannot start
// is reported with ReportSnapshot(to, SnapshotFailure). Send after Close
// does nothing.
func (t *TCPTransport) Send(msgs []*raftpb.Message) {
	filterp := t.filter.Load()
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.mu.closed {
		return
	}
	for _, m := range msgs {
		if m == nil {
			continue
		}
		to, snap := m.GetTo(), m.GetType() == raftpb.MsgSnap
		if filterp != nil && !(*filterp)(m) {
			t.stats.messagesFiltered.Add(1)
			if snap {
				t.rep.snapshot(to, raft.SnapshotFailure)
			}
			continue
		}
		p := t.mu.peers[to]
		switch {
		case p == nil:
			t.stats.messagesDropped.Add(1)
			if snap {
				t.stats.snapshotsFailed.Add(1)
				t.rep.snapshot(to, raft.SnapshotFailure)
			} else {
				t.rep.unreachable(to, t.cfg.MaxReconnectBackoff)
			}
		case snap:
			t.sendSnapshotLocked(p, m)
		default:
			select {
			case p.queue <- m:
			default:
				t.stats.messagesDropped.Add(1)
				t.rep.unreachable(to, p.window())
			}
		}
	}
}

// AddPeer makes id reachable at addr, replacing its address if it had
// another (the old connection is closed). It does nothing for this node's
// own ID, for an invalid ID or address (which it logs), or after Close.
func (t *TCPTransport) AddPeer(id uint64, addr string) {
	if id == t.cfg.ID {
		return
	}
	if id == 0 || addr == "" {
		t.log.Error("AddPeer with an invalid peer ignored", "peer", id, "addr", addr)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return
	}
	if old := t.mu.peers[id]; old != nil {
		if old.addr == addr {
			return
		}
		old.cancel()
	}
	p := t.newPeer(id, addr)
	t.mu.peers[id] = p
	if t.mu.started {
		t.startPeerLocked(p)
	}
	t.log.Info("peer added", "peer", id, "addr", addr)
}

// RemovePeer stops sending to id: its queued messages are dropped, its
// connection and any snapshot in flight are closed. Inbound connections
// from id are left alone. It does nothing for an unknown id.
func (t *TCPTransport) RemovePeer(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.mu.peers[id]
	if p == nil {
		return
	}
	delete(t.mu.peers, id)
	p.cancel()
	t.log.Info("peer removed", "peer", id)
}

// SetFilter installs f, which sees every message given to Send: those for
// which it returns false are dropped as if the network had lost them. A nil
// f removes the filter. It is meant for fault-injection tests, is safe to
// call at any time from any goroutine, and f must be safe for concurrent
// use.
func (t *TCPTransport) SetFilter(f func(m *raftpb.Message) bool) {
	if f == nil {
		t.filter.Store(nil)
		return
	}
	t.filter.Store(&f)
}

// Stats returns the transport's counters.
func (t *TCPTransport) Stats() TCPStats {
	s := &t.stats
	return TCPStats{
		MessagesSent:          s.messagesSent.Load(),
		MessagesReceived:      s.messagesReceived.Load(),
		MessagesDropped:       s.messagesDropped.Load(),
		MessagesFiltered:      s.messagesFiltered.Load(),
		BytesSent:             s.bytesSent.Load(),
		BytesReceived:         s.bytesReceived.Load(),
		FramesSent:            s.framesSent.Load(),
		FramesReceived:        s.framesReceived.Load(),
		ChecksumFailures:      s.checksumFailures.Load(),
		ProtocolErrors:        s.protocolErrors.Load(),
		HandshakesRejected:    s.handshakesRejected.Load(),
		TLSHandshakeFailures:  s.tlsHandshakeFailures.Load(),
		DialFailures:          s.dialFailures.Load(),
		UnreachableReports:    s.unreachableReports.Load(),
		SnapshotsSent:         s.snapshotsSent.Load(),
		SnapshotsFailed:       s.snapshotsFailed.Load(),
		SnapshotsReceived:     s.snapshotsReceived.Load(),
		SnapshotBytesSent:     s.snapshotBytesSent.Load(),
		SnapshotBytesReceived: s.snapshotBytesReceived.Load(),
	}
}

// Close stops the transport: the listener, every connection and every
// goroutine, and waits for them, including Handler calls in progress. It
// can be called more than once (later calls wait for the first and return
// nil) and before Start.
func (t *TCPTransport) Close() error {
	first := false
	t.closeOnce.Do(func() {
		first = true
		t.mu.Lock()
		t.mu.closed = true
		conns := make([]net.Conn, 0, len(t.mu.inbound))
		for c := range t.mu.inbound {
			conns = append(conns, c)
		}
		t.mu.Unlock()

		t.cancel() // stops peers, snapshot senders and the reporter
		if err := t.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			t.closeErr = fmt.Errorf("raftkv: tcp transport: close listener: %w", err)
		}
		for _, c := range conns {
			c.Close()
		}
		t.wg.Wait()
		t.log.Info("transport closed")
	})
	if !first {
		return nil
	}
	return t.closeErr
}

// tcpReporter hands ReportUnreachable and ReportSnapshot calls to the
// reporting goroutine, so that they never run inside Send, and rate-limits
// unreachable reports per peer.
type tcpReporter struct {
	wake chan struct{} // holds a token when there is something to report

	mu struct {
		sync.Mutex
		// unreachable are the peers waiting to be reported, in order.
		unreachable []uint64
		// pending marks the peers in unreachable.
		pending map[uint64]bool
		// last is when each peer was last queued for a report.
		last map[uint64]time.Time
		// snapshots are the snapshot outcomes waiting to be reported.
		snapshots []tcpSnapReport
	}
}

// tcpSnapReport is one ReportSnapshot call to make.
type tcpSnapReport struct {
	id     uint64
	status raft.SnapshotStatus
}

func (r *tcpReporter) init() {
	r.wake = make(chan struct{}, 1)
	r.mu.pending = make(map[uint64]bool)
	r.mu.last = make(map[uint64]time.Time)
}

// unreachable queues a report for id unless one was queued within window.
// A zero window always queues one (unless one is already waiting).
func (r *tcpReporter) unreachable(id uint64, window time.Duration) {
	now := time.Now()
	r.mu.Lock()
	if r.mu.pending[id] || (window > 0 && now.Sub(r.mu.last[id]) < window) {
		r.mu.Unlock()
		return
	}
	r.mu.pending[id] = true
	r.mu.last[id] = now
	r.mu.unreachable = append(r.mu.unreachable, id)
	r.mu.Unlock()
	r.poke()
}

// snapshot queues a snapshot outcome; these are never merged or limited.
func (r *tcpReporter) snapshot(id uint64, status raft.SnapshotStatus) {
	r.mu.Lock()
	r.mu.snapshots = append(r.mu.snapshots, tcpSnapReport{id, status})
	r.mu.Unlock()
	r.poke()
}

func (r *tcpReporter) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// runReporter makes the queued Handler calls until the transport closes.
func (t *TCPTransport) runReporter(h Handler) {
	defer t.wg.Done()
	var ids []uint64
	var snaps []tcpSnapReport
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-t.rep.wake:
		}
		t.rep.mu.Lock()
		ids = append(ids[:0], t.rep.mu.unreachable...)
		snaps = append(snaps[:0], t.rep.mu.snapshots...)
		t.rep.mu.unreachable = t.rep.mu.unreachable[:0]
		t.rep.mu.snapshots = t.rep.mu.snapshots[:0]
		clear(t.rep.mu.pending)
		t.rep.mu.Unlock()
		for _, id := range ids {
			t.stats.unreachableReports.Add(1)
			h.ReportUnreachable(id)
		}
		for _, s := range snaps {
			h.ReportSnapshot(s.id, s.status)
		}
	}
}
