package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/server"
	"github.com/sluicehq/sluice/internal/tlstest"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestDispatcherServes starts `sluice dispatcher` from a config file and
// the environment, submits through its API, and stops it.
func TestDispatcherServes(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "sluice.conf")
	if err := os.WriteFile(conf, []byte("# one replica\ndata = "+filepath.Join(dir, "data")+"\nlog-level = warn\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLUICE_HTTP_ADDR", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"dispatcher", "--config", conf}, &stderr, &stderr) }()
	var addr string
	for deadline := time.Now().Add(20 * time.Second); addr == ""; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no address printed:\n%s", stderr.String())
		}
		if _, rest, ok := strings.Cut(stderr.String(), "serving on "); ok {
			addr, _, _ = strings.Cut(rest, " ")
		}
	}
	c, err := api.NewClient(api.ClientConfig{Addrs: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()
	for c.Ready(rctx) != nil {
		time.Sleep(10 * time.Millisecond)
	}
	res, err := c.SubmitBody(rctx, []byte(`{"name":"a","tasks":[{"count":1,"pod":{"containers":[{"image":{"rootfs":"/img"},"command":["/w"],"resources":{"cpu":1,"memory":1024}}]}}]}`), "application/json", api.SubmitOptions{})
	if err != nil || len(res.Jobs) != 1 {
		t.Fatalf("submit: %+v, %v", res, err)
	}
	// Metrics are on by default.
	resp, err := http.Get(addr + api.PathMetrics)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "sluice_http_requests_total{code=\"200\",route=\"jobs\"} 1") {
		t.Errorf("GET /metrics: %d\n%s", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("dispatcher ended with %v, want context.Canceled", err)
	}
}

func TestDispatcherRejectsBadSettings(t *testing.T) {
	unbound := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(unbound, []byte("adm admin\nnl nodelet\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	shortKey := filepath.Join(t.TempDir(), "job-keys")
	if err := os.WriteFile(shortKey, []byte("too short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--job-token-key", "/nonexistent/keys"}, "job token keys"},
		{[]string{"--job-token-key", shortKey}, "line 1: a key is at least 32 bytes"},
		{[]string{"--peers", "1=127.0.0.1:1,x=127.0.0.1:2"}, `"x" is not a replica ID`},
		{[]string{"--peers", "1=127.0.0.1:1,1=127.0.0.1:2"}, "replica 1 given twice"},
		{[]string{"--peers", "1"}, "want id=value"},
		{[]string{"--peer-http", "2:http://x"}, "want id=value"},
		{[]string{"--tls-cert", "/c.pem"}, "go together"},
		{[]string{"--token-file", "/nonexistent/tokens"}, "tokens"},
		{[]string{"--token-file", unbound}, "line 2: a nodelet token names its node"},
		{[]string{"--job-retention-max", "-1"}, "--job-retention-max -1"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--config", "/nonexistent/sluice.conf"}, "config file"},
		{[]string{"--queue-weights", "a=3,b"}, "want queue=weight"},
		{[]string{"--slot-ttl", "-1s"}, "--slot-ttl -1s"},
		{[]string{"--job-retention", "-1m"}, "--job-retention -1m"},
		{[]string{"--history-retention", "-1h"}, "--history-retention -1h"},
		{[]string{"--history-max", "-1"}, "--history-max -1"},
		{[]string{"--history-max", "10000001"}, "--history-max 10000001"},
		{[]string{"--sync-interval", "-1ms"}, "--sync-interval -1ms"},
		{[]string{"--max-wait", "-1ms"}, "--max-wait -1ms"},
		{[]string{"--max-conns", "-1"}, "--max-conns -1"},
		{[]string{"--body-memory", "1048576"}, "--body-memory 1048576"},
		{[]string{"--queue-weights", "a=0"}, `weight "0" of queue "a"`},
		{[]string{"--queue-weights", "a=x"}, `weight "x" of queue "a"`},
		{[]string{"--queue-weights", "a=1,a=2"}, `queue "a" given twice`},
	} {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"dispatcher", "--data", t.TempDir()}, tc.args...), &out, &out)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("dispatcher %q = %v, want a usage error containing %q", tc.args, err, tc.want)
		}
	}
}

// TestDispatcherJobTokenKey: --job-token-key loads the keys every
// replica makes and checks job tokens with.
func TestDispatcherJobTokenKey(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "job-keys")
	if err := os.WriteFile(keys, []byte("# current\n"+strings.Repeat("a", 32)+"\n"+strings.Repeat("b", 40)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := dispatcherFlags{id: 1, jobTokenKey: keys}.serverConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := server.NewJobKeys([]byte(strings.Repeat("a", 32)))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.JobKeys == nil || cfg.JobKeys.Token("j1", 1) != want.Token("j1", 1) {
		t.Errorf("--job-token-key: JobKeys %v, want tokens made with the file's first key", cfg.JobKeys)
	}
	if cfg, _ := (dispatcherFlags{id: 1}).serverConfig(nil); cfg.JobKeys != nil {
		t.Error("no --job-token-key: JobKeys set")
	}
}

func TestDispatcherSchedulingFlags(t *testing.T) {
	cfg, err := dispatcherFlags{id: 1, queueWeights: "a=3, b=1", slotTTL: 5 * time.Second}.serverConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Dispatcher.SlotTTL != 5*time.Second {
		t.Errorf("slot TTL %v, want 5s", cfg.Dispatcher.SlotTTL)
	}
	if want := map[string]int64{"a": 3, "b": 1}; !maps.Equal(cfg.Dispatcher.QueueWeights, want) {
		t.Errorf("queue weights %v, want %v", cfg.Dispatcher.QueueWeights, want)
	}
	if cfg.Conns != nil {
		t.Errorf("without --max-conns Conns is %d, want nil (the server's default)", cfg.Conns.Max())
	}
	if cfg.BodyMemory != 0 {
		t.Errorf("without --body-memory BodyMemory is %d, want 0 (the server's default)", cfg.BodyMemory)
	}
	if cfg, err := (dispatcherFlags{id: 1, bodyMemory: 1 << 30}).serverConfig(nil); err != nil || cfg.BodyMemory != 1<<30 {
		t.Errorf("--body-memory 1GiB: BodyMemory %d, %v", cfg.BodyMemory, err)
	}
	for _, on := range []bool{true, false} {
		if cfg, err := (dispatcherFlags{id: 1, metrics: on}).serverConfig(nil); err != nil || cfg.DisableMetrics == on {
			t.Errorf("--metrics=%v: DisableMetrics %v, %v", on, cfg.DisableMetrics, err)
		}
	}
	cfg, err = dispatcherFlags{id: 1, maxConns: 500}.serverConfig(nil)
	if err != nil || cfg.Conns == nil || cfg.Conns.Max() != 500 {
		t.Errorf("--max-conns 500: Conns %v, %v; want a limit of 500", cfg.Conns, err)
	}
	for _, tc := range []struct {
		retention     time.Duration
		most          int
		wantRetention time.Duration
		wantMost      int
	}{{0, 5, -1, -1}, {time.Hour, 0, -1, -1}, {time.Hour, 5, time.Hour, 5}} {
		cfg, err := dispatcherFlags{id: 1, historyRetention: tc.retention, historyMax: tc.most}.serverConfig(nil)
		if err != nil || cfg.Dispatcher.HistoryRetention != tc.wantRetention || cfg.Dispatcher.HistoryMax != tc.wantMost {
			t.Errorf("--history-retention %v --history-max %d: HistoryRetention %v, HistoryMax %d, %v; want %v, %d",
				tc.retention, tc.most, cfg.Dispatcher.HistoryRetention, cfg.Dispatcher.HistoryMax, err, tc.wantRetention, tc.wantMost)
		}
	}
	for _, tc := range []struct{ flag, want time.Duration }{{0, -1}, {time.Minute, time.Minute}} {
		cfg, err := dispatcherFlags{id: 1, jobRetention: tc.flag}.serverConfig(nil)
		if err != nil || cfg.Dispatcher.JobRetention != tc.want {
			t.Errorf("--job-retention %v: JobRetention %v, %v; want %v", tc.flag, cfg.Dispatcher.JobRetention, err, tc.want)
		}
		cfg, err = dispatcherFlags{id: 1, maxWait: tc.flag}.serverConfig(nil)
		if err != nil || cfg.Dispatcher.MaxWait != tc.want {
			t.Errorf("--max-wait %v: MaxWait %v, %v; want %v", tc.flag, cfg.Dispatcher.MaxWait, err, tc.want)
		}
		cfg, err = dispatcherFlags{id: 1, syncInterval: tc.flag}.serverConfig(nil)
		if err != nil || cfg.SyncInterval != tc.want {
			t.Errorf("--sync-interval %v: SyncInterval %v, %v; want %v", tc.flag, cfg.SyncInterval, err, tc.want)
		}
	}
}

func TestDispatcherPeerTLSFlags(t *testing.T) {
	dir := t.TempDir()
	ca, other := tlstest.NewCA(t, "peer CA"), tlstest.NewCA(t, "other CA")
	caFile := ca.WriteCA(t, dir, "ca")
	cert, key := tlstest.WriteCert(t, dir, "r1", ca.Cert(t, "127.0.0.1"))
	foreignCert, foreignKey := tlstest.WriteCert(t, dir, "foreign", other.Cert(t, "127.0.0.1"))
	peers := "1=127.0.0.1:7001,2=127.0.0.1:7002"

	f := dispatcherFlags{id: 1, peers: peers, peerTLSCert: cert, peerTLSKey: key, peerTLSCA: caFile}
	cfg, err := f.serverConfig(nil)
	if err != nil || cfg.PeerTLS == nil || len(cfg.PeerTLS.Certificates) != 1 || cfg.PeerTLS.RootCAs == nil {
		t.Fatalf("all three flags: PeerTLS %v, %v", cfg.PeerTLS, err)
	}
	if cfg, err := (dispatcherFlags{id: 1, peers: peers}).serverConfig(nil); err != nil || cfg.PeerTLS != nil {
		t.Errorf("no peer TLS flags: PeerTLS %v, %v; want nil", cfg.PeerTLS, err)
	}
	// A wildcard listen host is not checked against the certificate.
	f.peers = "1=0.0.0.0:7001,2=127.0.0.1:7002"
	if cfg, err := f.serverConfig(nil); err != nil || cfg.PeerTLS == nil {
		t.Errorf("wildcard host: PeerTLS %v, %v", cfg.PeerTLS, err)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--peers", peers, "--peer-tls-cert", cert}, "--peer-tls-key and --peer-tls-ca missing"},
		{[]string{"--peers", peers, "--peer-tls-cert", cert, "--peer-tls-key", key}, "--peer-tls-ca missing"},
		{[]string{"--peers", peers, "--peer-tls-ca", caFile}, "--peer-tls-cert and --peer-tls-key missing"},
		{[]string{"--peer-tls-cert", cert, "--peer-tls-key", key, "--peer-tls-ca", caFile}, "give --peers too"},
		{[]string{"--peers", peers, "--peer-tls-cert", foreignCert, "--peer-tls-key", foreignKey, "--peer-tls-ca", caFile}, "foreign.crt: not valid against the CA"},
		{[]string{"--peers", peers, "--peer-tls-cert", cert, "--peer-tls-key", foreignKey, "--peer-tls-ca", caFile}, "private key does not match"},
		{[]string{"--peers", peers, "--peer-tls-cert", cert, "--peer-tls-key", key, "--peer-tls-ca", cert + ".none"}, "r1.crt.none"},
		{[]string{"--peers", "1=10.1.1.1:7001,2=127.0.0.1:7002", "--peer-tls-cert", cert, "--peer-tls-key", key, "--peer-tls-ca", caFile}, "not valid for this replica's peer host"},
	} {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"dispatcher", "--data", t.TempDir()}, tc.args...), &out, &out)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("dispatcher %q = %v, want a usage error containing %q", tc.args, err, tc.want)
		}
	}
}

// TestFaultSyncDelayFlag: the fault-injection flag wraps the store's file
// system only when given, and --help does not show it.
func TestFaultSyncDelayFlag(t *testing.T) {
	if cfg, err := (dispatcherFlags{id: 1}).serverConfig(nil); err != nil || cfg.FS != nil {
		t.Errorf("without the flag: FS %v, err %v; want the default", cfg.FS, err)
	}
	cfg, err := dispatcherFlags{id: 1, faultSyncDelayFile: t.TempDir() + "/delay"}.serverConfig(nil)
	if err != nil || cfg.FS == nil {
		t.Errorf("with the flag: FS %v, err %v; want a slow-sync FS", cfg.FS, err)
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"dispatcher", "--help"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String()+errOut.String(), "fault-sync-delay-file") {
		t.Error("--help shows the hidden fault-injection flag")
	}
}
