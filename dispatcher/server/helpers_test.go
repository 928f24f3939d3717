package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher"
	"github.com/sluicehq/sluice/dispatcher/server"
	"github.com/sluicehq/sluice/internal/porttest"
)

func testLogger() *slog.Logger {
	if os.Getenv("SERVER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func testDispatcherConfig() dispatcher.Config {
	return dispatcher.Config{MaxWait: 2 * time.Millisecond, Period: 100 * time.Millisecond}
}

// openOne starts a single-replica server on loopback and waits until it
// leads.
func openOne(t testing.TB, tokens *server.Tokens) *server.Server {
	t.Helper()
	return openOneWith(t, func(c *server.Config) { c.Tokens = tokens })
}

// openOneWith is openOne with the configuration changed by set first.
func openOneWith(t testing.TB, set func(*server.Config)) *server.Server {
	t.Helper()
	addr := porttest.Addrs(t, 1)[0]
	cfg := server.Config{
		ID: 1, Peers: map[uint64]string{1: ""}, PeerHTTP: map[uint64]string{1: "http://" + addr},
		Dir: t.TempDir(), HTTPAddr: addr, Dispatcher: testDispatcherConfig(),
		TickInterval: 20 * time.Millisecond, WatchKeepAlive: 200 * time.Millisecond, Logger: testLogger(),
	}
	set(&cfg)
	s, err := server.Open(cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	waitLeadership(t, 10*time.Second, "the replica to lead", []*server.Server{s}, func() bool {
		_, ok := s.Dispatcher().Leading()
		return ok
	})
	return s
}

// waitLeadership waits until cond holds, testing it again at each change
// of the servers' leadership or applied state (their raft replicas'
// LeadershipChanged, their Dispatchers' Changed), so cond must read only
// such state. It fails t if timeout passes first.
func waitLeadership(t testing.TB, timeout time.Duration, what string, servers []*server.Server, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline.C)}}
		for _, s := range servers {
			cases = append(cases,
				reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s.Raft().LeadershipChanged())},
				reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s.Dispatcher().Changed())})
		}
		if cond() {
			return
		}
		if i, _, _ := reflect.Select(cases); i == 0 && !cond() {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

// waitFor tests cond every 5ms until it holds, and fails t if timeout
// passes first: for what HTTP clients, watch streams and connections over
// loopback show, which nothing signals.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// client is a plain net/http client that does not follow redirects.
var client = &http.Client{
	Timeout:       30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// req is one HTTP request of a test.
type req struct {
	method, url string
	body        []byte
	token       string
	header      map[string]string
}

type reply struct {
	status int
	header http.Header
	body   []byte
	close  bool // the server closes the connection after it
}

func (r reply) String() string { return fmt.Sprintf("%d %s", r.status, bytes.TrimSpace(r.body)) }

func do(t testing.TB, q req) reply {
	t.Helper()
	var body io.Reader
	if q.body != nil {
		body = bytes.NewReader(q.body)
	}
	hr, err := http.NewRequest(q.method, q.url, body)
	if err != nil {
		t.Fatalf("request %s %s: %v", q.method, q.url, err)
	}
	if q.token != "" {
		hr.Header.Set("Authorization", "Bearer "+q.token)
	}
	for k, v := range q.header {
		hr.Header.Set(k, v)
	}
	resp, err := client.Do(hr)
	if err != nil {
		t.Fatalf("%s %s: %v", q.method, q.url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", q.method, q.url, err)
	}
	return reply{resp.StatusCode, resp.Header, b, resp.Close}
}

// decode decodes a reply's JSON body, failing the test on a wrong status.
func decode[T any](t testing.TB, r reply, status int) T {
	t.Helper()
	var v T
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
	return v
}

// errorReply checks an error reply: status, an api.ErrorResponse body with
// code and a message containing want.
func errorReply(t testing.TB, r reply, status int, code, want string) api.ErrorResponse {
	t.Helper()
	e := decode[api.ErrorResponse](t, r, status)
	if e.Code != code || e.Error == "" {
		t.Fatalf("error reply %s: code %q, want %q", r, e.Code, code)
	}
	if want != "" && !strings.Contains(e.Error+fmt.Sprint(e.Problems), want) {
		t.Fatalf("error reply %s does not mention %q", r, want)
	}
	return e
}

// jobJSON is a valid job of count sim tasks in queue (default when "").
func jobJSON(name, queue string, count int) string {
	q := ""
	if queue != "" {
		q = fmt.Sprintf(`"queue":%q,`, queue)
	}
	return fmt.Sprintf(`{"name":%q,%s"labels":{"team":"t-%s"},"tasks":[{"count":%d,"pod":{"sim":{"run_time":"1h"},"containers":[{"image":{"rootfs":"/r"},"command":["x"],"resources":{"cpu":100,"memory":"1Mi"}}]}}]}`,
		name, q, name, count)
}

func submit(t testing.TB, base, token string, body string, header map[string]string) api.SubmitResponse {
	t.Helper()
	return decode[api.SubmitResponse](t, do(t, req{method: "POST", url: base + api.PathJobs, body: []byte(body), token: token, header: header}), 200)
}

func listJobs(t testing.TB, base, token, query string) api.JobList {
	t.Helper()
	return decode[api.JobList](t, do(t, req{method: "GET", url: base + api.PathJobs + query, token: token}), 200)
}

func nodeJSON(name, addr string) string {
	a := ""
	if addr != "" {
		a = fmt.Sprintf(`"address":%q,`, addr)
	}
	return fmt.Sprintf(`{"name":%q,%s"capacity":{"cpu":8000,"memory":8589934592},"allocatable":{"online":{"cpu":8000,"memory":8589934592},"offline":{"cpu":8000,"memory":8589934592}}}`, name, a)
}

func tempFile(t testing.TB, name, content string) string {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// cluster is three replicas over loopback TCP.
type cluster struct {
	servers  []*server.Server // replica ID i+1 at i
	peerHTTP map[uint64]string
	bases    []string // the replicas' HTTP base URLs, by ID
}

// openThree starts three replicas over loopback TCP, each with the
// configuration set (when not nil) changes.
func openThree(t testing.TB, set func(id uint64, c *server.Config)) *cluster {
	t.Helper()
	addrs := porttest.Addrs(t, 6)
	raftAddrs, httpAddrs := addrs[:3], addrs[3:]
	c := &cluster{peerHTTP: map[uint64]string{}}
	peers := map[uint64]string{}
	for i := range 3 {
		peers[uint64(i+1)] = raftAddrs[i]
		c.peerHTTP[uint64(i+1)] = "http://" + httpAddrs[i]
		c.bases = append(c.bases, "http://"+httpAddrs[i])
	}
	dir := t.TempDir()
	for i := range 3 {
		id := uint64(i + 1)
		cfg := server.Config{
			ID: id, Peers: peers, PeerHTTP: c.peerHTTP, Dir: fmt.Sprintf("%s/r%d", dir, id), HTTPAddr: httpAddrs[i],
			Dispatcher: testDispatcherConfig(), TickInterval: 20 * time.Millisecond, Logger: testLogger(),
		}
		if set != nil {
			set(id, &cfg)
		}
		s, err := server.Open(cfg)
		if err != nil {
			t.Fatalf("open replica %d: %v", id, err)
		}
		t.Cleanup(func() { _ = s.Close() })
		c.servers = append(c.servers, s)
	}
	return c
}

// leader waits for a replica other than replica except (0: any) to lead
// and schedule, and returns it.
func (c *cluster) leader(t testing.TB, except uint64) *server.Server {
	t.Helper()
	var l *server.Server
	waitLeadership(t, 15*time.Second, "a leader", c.servers, func() bool {
		for i, s := range c.servers {
			if _, ok := s.Dispatcher().Leading(); ok && s.Raft().Status().IsLeader && uint64(i+1) != except {
				l = s
				return true
			}
		}
		return false
	})
	return l
}

// parseTokens parses a token file's text, failing the test on an error.
func parseTokens(t testing.TB, text string) *server.Tokens {
	t.Helper()
	tk, err := server.ParseTokens(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}
