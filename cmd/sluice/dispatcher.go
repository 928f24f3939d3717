package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/bench/chaosbench"
	"github.com/sluicehq/sluice/dispatcher"
	"github.com/sluicehq/sluice/dispatcher/server"
	"github.com/sluicehq/sluice/raftkv"
)

// dispatcherFlags are the settings of one dispatcher replica.
type dispatcherFlags struct {
	id               uint64
	peers, peerHTTP  string
	join             bool
	data, httpAddr   string
	tokenFile        string
	jobTokenKey      string
	tlsCert, tlsKey  string
	peerTLSCert      string
	peerTLSKey       string
	peerTLSCA        string
	logLevel, config string
	queueWeights     string
	slotTTL          time.Duration
	jobRetention     time.Duration
	maxWait          time.Duration
	jobRetentionMax  int
	historyRetention time.Duration
	historyMax       int
	syncInterval     time.Duration
	maxConns         int
	metrics          bool
	bodyMemory       int64
	gc               gcSetting
	// faultSyncDelayFile is for fault-injection benchmarks only (sluice
	// bench chaos): the store's syncs wait for the duration in this file.
	faultSyncDelayFile string
}

func newDispatcherCmd() *cobra.Command {
	var f dispatcherFlags
	c := &cobra.Command{
		Use:   "dispatcher",
		Short: "Run one dispatcher replica: the HTTP API, raft and the scheduling loop",
		Long: `Run one dispatcher replica. Alone (no --peers) it is a single-replica
cluster; three replicas started with the same --peers and --peer-http form
one cluster, and whichever leads schedules while the others redirect
writes to it. Replicas are added and removed later with 'sluice
dispatcher members' (a new one starts with --join); the membership is
replicated, so the flags of the others need no change.

Without --peer-tls-cert, --peer-tls-key and --peer-tls-ca the replicas'
raft traffic is plaintext and any client of the raft port is believed:
keep that port on a network only the replicas reach. With them it is
mutual TLS 1.3: every replica's certificate must be signed by that CA
(one for the replicas only), carry the host of its --peers address as a
subject alternative name, and allow both server and client
authentication.

Every flag can also be set with an environment variable (--http-addr is
SLUICE_HTTP_ADDR) or in a --config file of "name = value" lines; the
command line wins over the environment, which wins over the file.`,
		Example: `  sluice dispatcher --data /var/lib/sluice/d1
  sluice dispatcher --id 2 --data d2 --http-addr 127.0.0.1:8082 \
    --peers 1=127.0.0.1:7001,2=127.0.0.1:7002,3=127.0.0.1:7003 \
    --peer-http 1=http://127.0.0.1:8081,2=http://127.0.0.1:8082,3=http://127.0.0.1:8083`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := applySettings(c); err != nil {
				return err
			}
			if err := f.gc.apply(c); err != nil {
				return err
			}
			return runDispatcher(c.Context(), f, c.ErrOrStderr())
		},
	}
	fl := c.Flags()
	fl.Uint64Var(&f.id, "id", 1, "this replica's raft ID (a key of --peers)")
	fl.StringVar(&f.peers, "peers", "", "every initial replica's raft address, id=host:port,..., read on first start (empty: a single replica that cannot grow; 1=host:port: one that can)")
	fl.StringVar(&f.peerHTTP, "peer-http", "", "every initial replica's HTTP base URL, id=http://host:port,..., for redirects to the leader (a replica added later brings its own)")
	fl.BoolVar(&f.join, "join", false, "start empty and wait to be added to a running cluster ('sluice dispatcher members add' on it); --peers then holds this replica's raft address and the current members'")
	fl.StringVar(&f.data, "data", "/var/lib/sluice/dispatcher", "data directory (raft log and state)")
	fl.StringVar(&f.httpAddr, "http-addr", "127.0.0.1:8080", "address the HTTP API listens on")
	fl.StringVar(&f.tokenFile, "token-file", "", "bearer tokens and their roles, one 'TOKEN ROLE [QUEUE,...]' or 'TOKEN nodelet NODE' per line (empty: no authentication)")
	fl.StringVar(&f.jobTokenKey, "job-token-key", "", "file of keys (one a line, each at least 32 bytes; the first makes tokens, all check them) for the job tokens appmasters in the cluster get as SLUICE_TOKEN; every replica needs the same (empty: no job tokens)")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate file for the HTTP API (with --tls-key)")
	fl.StringVar(&f.tlsKey, "tls-key", "", "TLS key file for the HTTP API")
	fl.StringVar(&f.peerTLSCert, "peer-tls-cert", "", "this replica's certificate file for mutual TLS between the replicas' raft transports, valid for the host of its --peers address (with --peer-tls-key and --peer-tls-ca)")
	fl.StringVar(&f.peerTLSKey, "peer-tls-key", "", "key file of --peer-tls-cert")
	fl.StringVar(&f.peerTLSCA, "peer-tls-ca", "", "CA certificate file that signs every replica's --peer-tls-cert")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.StringVar(&f.config, "config", "", "a file of 'name = value' settings")
	fl.DurationVar(&f.slotTTL, "slot-ttl", 0, "keep an ended task's resources cached on its node this long for a task of the same shape (0: no caching)")
	fl.DurationVar(&f.maxWait, "max-wait", dispatcher.DefaultMaxWait, "delay scheduling: how long work that arrives waits for more before a round places it, so that one solve and one commit carry more (0: a round as soon as work arrives)")
	fl.DurationVar(&f.jobRetention, "job-retention", dispatcher.DefaultJobRetention, "how long a finished job is kept (then its records and tasks are forgotten; 0: kept for ever)")
	fl.IntVar(&f.jobRetentionMax, "job-retention-max", dispatcher.DefaultJobRetentionMax, "most finished jobs kept, whatever their age: past it the oldest are forgotten, so their memory has a ceiling (0: no bound)")
	fl.DurationVar(&f.historyRetention, "history-retention", dispatcher.DefaultHistoryRetention, "how long the summary of a forgotten job (name, queue, labels, times, final state, task counts, first failure) is kept after the job ended; listings show it as history (0: no history)")
	fl.IntVar(&f.historyMax, "history-max", dispatcher.DefaultHistoryMax, fmt.Sprintf("most summaries of forgotten jobs kept, whatever their age: past it those of the jobs that ended first go; each holds about 160 bytes of every replica's memory (0: no history; at most %d)", dispatcher.MaxHistoryMax))
	fl.DurationVar(&f.syncInterval, "sync-interval", server.DefaultSyncInterval, "least time between two syncs of the raft log: writes meanwhile share one (less CPU under load, some ms more commit latency; 0: sync as soon as asked)")
	fl.Int64Var(&f.bodyMemory, "body-memory", 0, fmt.Sprintf("most bytes of request bodies held at once, as read and decompressed: a body past it is answered 503 (0: %d; at least %d)", server.DefaultBodyMemory, server.MinBodyMemory))
	fl.BoolVar(&f.metrics, "metrics", true, "serve Prometheus metrics at /metrics (to readers when --token-file is set); false counts nothing")
	fl.IntVar(&f.maxConns, "max-conns", 0, "most HTTP connections open at once: a new one then replaces the one idle longest or waits to be accepted, so the store and raft keep their file descriptors (0: the open-files limit less 1200)")
	f.gc.addFlag(c)
	c.AddCommand(newMembersCmd())
	fl.StringVar(&f.faultSyncDelayFile, "fault-sync-delay-file", "", "for fault-injection benchmarks only: before each sync of the store, wait for the duration written in this file (absent or empty: no wait)")
	_ = fl.MarkHidden("fault-sync-delay-file")
	fl.StringVar(&f.queueWeights, "queue-weights", "", "fair-share weights of queues, queue=weight,... (1 to 1000; a queue not named weighs 1)")
	return c
}

// jobRetention turns a --job-retention flag, in which 0 keeps finished
// jobs for ever, into dispatcher.Config.JobRetention, in which that is
// negative (0 is the default there).
func jobRetention(flag time.Duration) (time.Duration, error) {
	switch {
	case flag < 0:
		return 0, usageError{fmt.Errorf("--job-retention %v: want 0 (keep for ever) or more", flag)}
	case flag == 0:
		return -1, nil
	}
	return flag, nil
}

// serverConfig turns the flags into the server's configuration.
func (f dispatcherFlags) serverConfig(logger *slog.Logger) (server.Config, error) {
	cfg := server.Config{ID: f.id, Dir: f.data, HTTPAddr: f.httpAddr, Logger: logger, DisableMetrics: !f.metrics}
	if f.faultSyncDelayFile != "" {
		cfg.FS = chaosbench.SlowSyncFS(vfs.Default, chaosbench.DelayFromFile(f.faultSyncDelayFile))
	}
	if f.slotTTL < 0 {
		return cfg, usageError{fmt.Errorf("--slot-ttl %v: want 0 or more", f.slotTTL)}
	}
	cfg.Dispatcher.SlotTTL = f.slotTTL
	switch {
	case f.maxConns < 0:
		return cfg, usageError{fmt.Errorf("--max-conns %d: want 0 (from the open-files limit) or more", f.maxConns)}
	case f.maxConns > 0:
		cfg.Conns = api.NewConnLimit(f.maxConns)
	}
	if f.bodyMemory != 0 && f.bodyMemory < server.MinBodyMemory {
		return cfg, usageError{fmt.Errorf("--body-memory %d: want 0 (%d) or at least %d", f.bodyMemory, server.DefaultBodyMemory, server.MinBodyMemory)}
	}
	cfg.BodyMemory = f.bodyMemory
	switch {
	case f.syncInterval < 0:
		return cfg, usageError{fmt.Errorf("--sync-interval %v: want 0 (sync as soon as asked) or more", f.syncInterval)}
	case f.syncInterval == 0:
		cfg.SyncInterval = -1
	default:
		cfg.SyncInterval = f.syncInterval
	}
	switch {
	case f.maxWait < 0:
		return cfg, usageError{fmt.Errorf("--max-wait %v: want 0 (no wait) or more", f.maxWait)}
	case f.maxWait == 0:
		cfg.Dispatcher.MaxWait = -1
	default:
		cfg.Dispatcher.MaxWait = f.maxWait
	}
	var err error
	if cfg.Dispatcher.JobRetention, err = jobRetention(f.jobRetention); err != nil {
		return cfg, err
	}
	switch {
	case f.jobRetentionMax < 0:
		return cfg, usageError{fmt.Errorf("--job-retention-max %d: want 0 (no bound) or more", f.jobRetentionMax)}
	case f.jobRetentionMax == 0:
		cfg.Dispatcher.JobRetentionMax = -1
	default:
		cfg.Dispatcher.JobRetentionMax = f.jobRetentionMax
	}
	switch {
	case f.historyRetention < 0:
		return cfg, usageError{fmt.Errorf("--history-retention %v: want 0 (no history) or more", f.historyRetention)}
	case f.historyMax < 0 || f.historyMax > dispatcher.MaxHistoryMax:
		return cfg, usageError{fmt.Errorf("--history-max %d: want 0 (no history) to %d", f.historyMax, dispatcher.MaxHistoryMax)}
	case f.historyRetention == 0 || f.historyMax == 0:
		cfg.Dispatcher.HistoryRetention, cfg.Dispatcher.HistoryMax = -1, -1
	default:
		cfg.Dispatcher.HistoryRetention, cfg.Dispatcher.HistoryMax = f.historyRetention, f.historyMax
	}
	if f.peers == "" {
		cfg.Peers = map[uint64]string{f.id: ""}
	} else if cfg.Peers, err = parseIDMap("--peers", f.peers); err != nil {
		return cfg, err
	}
	if f.join {
		if len(cfg.Peers) < 2 || cfg.Peers[f.id] == "" {
			return cfg, usageError{fmt.Errorf("--join: --peers must hold this replica's raft address (%d=host:port) and the current members'", f.id)}
		}
		cfg.Join = true
	}
	if cfg.PeerTLS, err = f.peerTLS(cfg.Peers); err != nil {
		return cfg, err
	}
	if f.peerHTTP != "" {
		if cfg.PeerHTTP, err = parseIDMap("--peer-http", f.peerHTTP); err != nil {
			return cfg, err
		}
	}
	if f.queueWeights != "" {
		if cfg.Dispatcher.QueueWeights, err = parseQueueWeights(f.queueWeights); err != nil {
			return cfg, err
		}
	}
	if f.tokenFile != "" {
		if cfg.Tokens, err = server.LoadTokens(f.tokenFile); err != nil {
			return cfg, usageError{err}
		}
	}
	if f.jobTokenKey != "" {
		if cfg.JobKeys, err = server.LoadJobKeys(f.jobTokenKey); err != nil {
			return cfg, usageError{err}
		}
	}
	switch {
	case f.tlsCert != "" && f.tlsKey != "":
		cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return cfg, usageError{fmt.Errorf("--tls-cert/--tls-key: %w", err)}
		}
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	case f.tlsCert != "" || f.tlsKey != "":
		return cfg, usageError{errors.New("--tls-cert and --tls-key go together")}
	}
	return cfg, nil
}

// peerTLS loads the raft transport's TLS configuration from
// --peer-tls-cert, --peer-tls-key and --peer-tls-ca, which go together,
// and checks the certificate against the CA and against the host of this
// replica's address in peers. It returns nil when none is given.
func (f dispatcherFlags) peerTLS(peers map[uint64]string) (*tls.Config, error) {
	var missing []string
	for _, fl := range []struct{ name, value string }{
		{"--peer-tls-cert", f.peerTLSCert}, {"--peer-tls-key", f.peerTLSKey}, {"--peer-tls-ca", f.peerTLSCA},
	} {
		if fl.value == "" {
			missing = append(missing, fl.name)
		}
	}
	switch len(missing) {
	case 3:
		return nil, nil
	case 0:
	default:
		return nil, usageError{fmt.Errorf("--peer-tls-cert, --peer-tls-key and --peer-tls-ca go together: %s missing", strings.Join(missing, " and "))}
	}
	if len(peers) < 2 {
		return nil, usageError{errors.New("--peer-tls-cert, --peer-tls-key and --peer-tls-ca secure the raft transport between replicas: give --peers too")}
	}
	// A wildcard or empty host names no one: the peers dial this replica
	// at an address the certificate cannot be checked against here.
	host, _, _ := net.SplitHostPort(peers[f.id])
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = ""
	}
	cfg, err := raftkv.LoadPeerTLS(f.peerTLSCert, f.peerTLSKey, f.peerTLSCA, host)
	if err != nil {
		return nil, usageError{fmt.Errorf("--peer-tls-cert/--peer-tls-key/--peer-tls-ca: %w", err)}
	}
	return cfg, nil
}

// parseQueueWeights parses "a=3,b=1" into queue weights.
func parseQueueWeights(s string) (map[string]int64, error) {
	m := map[string]int64{}
	for _, part := range strings.Split(s, ",") {
		q, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		w, err := strconv.ParseInt(v, 10, 64)
		switch {
		case !ok || q == "":
			return nil, usageError{fmt.Errorf("--queue-weights: want queue=weight, got %q", part)}
		case err != nil || w < 1 || w > api.MaxQueueWeight:
			return nil, usageError{fmt.Errorf("--queue-weights: weight %q of queue %q: want an integer from 1 to %d", v, q, api.MaxQueueWeight)}
		case m[q] != 0:
			return nil, usageError{fmt.Errorf("--queue-weights: queue %q given twice", q)}
		}
		m[q] = w
	}
	return m, nil
}

// parseIDMap parses "1=a,2=b" into a map from replica ID to value.
func parseIDMap(flag, s string) (map[uint64]string, error) {
	m := map[uint64]string{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		id, err := strconv.ParseUint(k, 10, 64)
		switch {
		case !ok || v == "":
			return nil, usageError{fmt.Errorf("%s: want id=value, got %q", flag, part)}
		case err != nil || id == 0:
			return nil, usageError{fmt.Errorf("%s: %q is not a replica ID (a positive integer)", flag, k)}
		case m[id] != "":
			return nil, usageError{fmt.Errorf("%s: replica %d given twice", flag, id)}
		}
		m[id] = v
	}
	return m, nil
}

func runDispatcher(ctx context.Context, f dispatcherFlags, stderr io.Writer) error {
	logger, err := newTextLogger(stderr, f.logLevel)
	if err != nil {
		return err
	}
	cfg, err := f.serverConfig(logger)
	if err != nil {
		return err
	}
	s, err := server.Open(cfg)
	if err != nil {
		return fmt.Errorf("dispatcher: %w", err)
	}
	fmt.Fprintf(stderr, "dispatcher %d serving on %s (web UI at %s%s, data in %s)\n", f.id, s.Addr(), s.Addr(), api.PathUI, f.data)
	select {
	case <-ctx.Done():
	case <-s.Failed():
		// The replica serves nothing again: exit, so that clients and a
		// supervisor see it gone, rather than answer 503s.
		failed := s.Err()
		logger.Error("dispatcher: the replica stopped on an error; exiting", "replica", f.id, "err", failed)
		if err := s.Close(); err != nil {
			logger.Warn("dispatcher: close after the failure", "replica", f.id, "err", err)
		}
		return fmt.Errorf("dispatcher: replica %d stopped: %w", f.id, failed)
	}
	if err := s.Close(); err != nil {
		return fmt.Errorf("dispatcher: close: %w", err)
	}
	return ctx.Err()
}
