package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
)

// lockedBuffer is an io.Writer safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startHTTPServe runs httpServe on a fresh loopback port; the channel
// gives its result.
func startHTTPServe(t *testing.T, task string, requests int, timeout time.Duration) (port int, out *lockedBuffer, done <-chan error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	out = &lockedBuffer{}
	ch := make(chan error, 1)
	go func() { ch <- httpServe(l, task, requests, timeout, out) }()
	return l.Addr().(*net.TCPAddr).Port, out, ch
}

// waitResult waits up to 10s for a result on done.
func waitResult(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return within 10s", what)
		return nil
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHTTPServeAnswersThenExits: the server answers each GET with its
// task ID and the request's number, refuses other methods without
// counting them, and returns nil once it has answered its count.
func TestHTTPServeAnswersThenExits(t *testing.T) {
	port, out, done := startHTTPServe(t, "j1/0/0/1", 2, 10*time.Second)
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	resp, err := http.Post(url, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %s, want 405", resp.Status)
	}
	for i := 1; i <= 2; i++ {
		code, body := httpGet(t, url)
		if want := fmt.Sprintf("task j1/0/0/1 answered request %d of 2\n", i); code != 200 || body != want {
			t.Errorf("GET %d: %d %q, want 200 %q", i, code, body, want)
		}
	}
	if err := waitResult(t, done, "http-serve"); err != nil {
		t.Errorf("http-serve after its requests: %v", err)
	}
	if !strings.Contains(out.String(), "answered request 2 of 2 from 127.0.0.1:") {
		t.Errorf("output %q", out.String())
	}
	if _, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
		t.Error("the port still takes connections after http-serve returned")
	}
}

// TestHTTPServeTimeout: a server whose requests do not all come fails
// when its timeout passes, saying how many it answered.
func TestHTTPServeTimeout(t *testing.T) {
	port, _, done := startHTTPServe(t, "j1/0/0/1", 3, 300*time.Millisecond)
	if code, _ := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/", port)); code != 200 {
		t.Errorf("GET: %d", code)
	}
	err := waitResult(t, done, "http-serve")
	if err == nil || !strings.Contains(err.Error(), "300ms passed with 1 of 3 requests answered") {
		t.Errorf("got %v, want the timeout with 1 of 3 answered", err)
	}
}

// TestHTTPServeRefusals: bad flags, and a pod without the port.
func TestHTTPServeRefusals(t *testing.T) {
	t.Setenv("SLUICE_PORT_HTTP", "")
	t.Setenv("SLUICE_PORT_WEB", "x")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"http-serve", "-requests", "0"}, "usage"},
		{[]string{"http-serve", "-timeout", "0s"}, "usage"},
		{[]string{"http-serve", "extra"}, "usage"},
		{[]string{"http-serve", "-fly"}, "flag provided but not defined"},
		{[]string{"http-serve"}, `SLUICE_PORT_HTTP is "", not a port: run it in a pod that asks for a port named "http"`},
		{[]string{"http-serve", "-port", "web"}, `SLUICE_PORT_WEB is "x", not a port`},
	} {
		if err := run(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

// fakeAPI answers GET /v1/jobs/j7/tasks with what list returns for the
// n-th call (from 1), and refuses a request without the bearer token
// token (when set) as the dispatcher does.
func fakeAPI(t *testing.T, token string, list func(n int) (int, any)) (url string, calls *atomic.Int64) {
	t.Helper()
	calls = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method != http.MethodGet || r.URL.Path != api.PathJob+"j7/tasks" {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(api.ErrorResponse{Code: api.CodeNotFound, Error: "no such route"})
			return
		}
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(api.ErrorResponse{Code: api.CodeUnauthorized, Error: "unknown token"})
			return
		}
		status, body := list(int(calls.Add(1)))
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, calls
}

// serverTask is the listing of the server task in state s on port p.
func serverTask(s api.TaskState, p int32) api.TaskStatus {
	t := api.TaskStatus{ID: "j7/0/0/1", Group: "server", State: s, Node: "node-1", Updated: time.Unix(1, 0).UTC()}
	if s != api.TaskPending {
		t.Host = "127.0.0.1"
		t.Ports = []api.Port{{Name: "admin", Port: 1, Protocol: "tcp"}, {Name: "http", Port: p, Protocol: "tcp"}}
	}
	return t
}

func clientTask(i int64) api.TaskStatus {
	return api.TaskStatus{ID: fmt.Sprintf("j7/1/%d/1", i), Group: "client", Index: i, State: api.TaskRunning, Node: "node-1", Host: "127.0.0.1", Updated: time.Unix(1, 0).UTC()}
}

func fetchCfg(addr string, wait time.Duration) fetchConfig {
	return fetchConfig{addrs: []string{addr}, job: "j7", group: "server", port: "http", path: "/", wait: wait, pause: 20 * time.Millisecond}
}

// TestFetchFindsTheServer: fetch waits while the server is pending and
// starting, pages through the listing, finds the running task of group
// server at its host and its port named http, GETs it and prints the
// answer; the server, asked once, exits.
func TestFetchFindsTheServer(t *testing.T) {
	port, _, done := startHTTPServe(t, "j7/0/0/1", 1, 10*time.Second)
	addr, calls := fakeAPI(t, "", func(n int) (int, any) {
		switch {
		case n == 1:
			return 200, api.TaskList{Tasks: []api.TaskStatus{serverTask(api.TaskPending, 0)}}
		case n == 2:
			return 200, api.TaskList{Tasks: []api.TaskStatus{serverTask(api.TaskStarting, int32(port))}}
		case n%2 == 1: // the first page: clients only
			return 200, api.TaskList{Tasks: []api.TaskStatus{clientTask(0), clientTask(1)}, Next: "j7/1/1/1"}
		default:
			return 200, api.TaskList{Tasks: []api.TaskStatus{serverTask(api.TaskRunning, int32(port))}}
		}
	})
	var out bytes.Buffer
	if err := fetch(context.Background(), fetchCfg(addr, 10*time.Second), &out); err != nil {
		t.Fatalf("fetch: %v", err)
	}
	want := fmt.Sprintf("fetched http://127.0.0.1:%d/ from task j7/0/0/1: task j7/0/0/1 answered request 1 of 1\n", port)
	if out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
	if n := calls.Load(); n != 4 {
		t.Errorf("%d listings, want 4 (pending, starting, two pages)", n)
	}
	if err := waitResult(t, done, "http-serve"); err != nil {
		t.Errorf("http-serve: %v", err)
	}
}

// TestFetchRetriesAServerNotListening: a server listed as running whose
// port refuses connections is tried again until the deadline, and the
// error says what the last try met, and that a loopback host is the
// pod's own.
func TestFetchRetriesAServerNotListening(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	addr, calls := fakeAPI(t, "", func(int) (int, any) {
		return 200, api.TaskList{Tasks: []api.TaskStatus{serverTask(api.TaskRunning, int32(port))}}
	})
	err = fetch(context.Background(), fetchCfg(addr, 300*time.Millisecond), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "gave up after 300ms") || !strings.Contains(err.Error(), "connection refused") ||
		!strings.Contains(err.Error(), "the listing's host 127.0.0.1 is loopback, which in a bridge-mode pod is the pod itself") {
		t.Errorf("got %v, want a give-up after connections refused, with the loopback host pointed out", err)
	}
	if calls.Load() < 2 {
		t.Errorf("%d listings, want tries again", calls.Load())
	}
}

// TestFetchGivesUp: a server that never runs ends fetch at its deadline
// with the server task's state; refusals of the dispatcher and a server
// without the port end it at once.
func TestFetchGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   any
		wait   time.Duration
		want   string
	}{
		{"never runs", 200, api.TaskList{Tasks: []api.TaskStatus{serverTask(api.TaskPending, 0), clientTask(0)}}, 300 * time.Millisecond,
			`fetch: gave up after 300ms: fetch: no task of group "server" of job j7 runs yet: j7/0/0/1 pending`},
		{"not placed", 200, api.TaskList{Tasks: []api.TaskStatus{clientTask(0)}}, 300 * time.Millisecond,
			`job j7 has no placed task of group "server" yet`},
		{"forbidden", 403, api.ErrorResponse{Code: api.CodeForbidden, Error: "the token may not read jobs"}, time.Minute,
			"the dispatcher refused to list job j7's tasks"},
		{"unknown job", 404, api.ErrorResponse{Code: api.CodeNotFound, Error: "no job j7"}, time.Minute, "fetch: job j7:"},
		{"no such port", 200, api.TaskList{Tasks: []api.TaskStatus{{ID: "j7/0/0/1", Group: "server", State: api.TaskRunning, Host: "127.0.0.1",
			Ports: []api.Port{{Name: "web", Port: 8080, Protocol: "tcp"}}}}}, time.Minute, `task j7/0/0/1 of group server has no port named "http"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, _ := fakeAPI(t, "", func(int) (int, any) { return tc.status, tc.body })
			start := time.Now()
			err := fetch(context.Background(), fetchCfg(addr, tc.wait), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
			if took := time.Since(start); took > tc.wait+5*time.Second || tc.wait == time.Minute && took > 5*time.Second {
				t.Errorf("took %s with a wait of %s", took, tc.wait)
			}
		})
	}
}

// TestFetchCmdEnvAndToken: fetch takes the dispatcher and job from the
// environment, its token from -token-file (else SLUICE_TOKEN), and says
// which variables are missing; without the token the dispatcher's
// refusal names the reader token.
func TestFetchCmdEnvAndToken(t *testing.T) {
	port, _, done := startHTTPServe(t, "j7/0/0/1", 2, 10*time.Second)
	addr, _ := fakeAPI(t, "reader-secret", func(int) (int, any) {
		return 200, api.TaskList{Tasks: []api.TaskStatus{serverTask(api.TaskRunning, int32(port))}}
	})
	t.Setenv(api.EnvAddr, "")
	t.Setenv(api.EnvJobID, "")
	t.Setenv(api.EnvToken, "")
	if err := run([]string{"fetch"}); err == nil || !strings.Contains(err.Error(), "SLUICE_ADDR and SLUICE_JOB_ID not set") {
		t.Errorf("fetch without its environment: %v", err)
	}
	t.Setenv(api.EnvAddr, addr)
	t.Setenv(api.EnvJobID, "j7")
	if err := run([]string{"fetch", "-wait", "5s"}); err == nil || !strings.Contains(err.Error(), "fetch needs a reader token: -token-file") {
		t.Errorf("fetch without a token: %v", err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("reader-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"fetch", "-wait", "5s", "-token-file", file}); err != nil {
		t.Errorf("fetch with -token-file: %v", err)
	}
	t.Setenv(api.EnvToken, "reader-secret")
	if err := run([]string{"fetch", "-wait", "5s"}); err != nil {
		t.Errorf("fetch with SLUICE_TOKEN: %v", err)
	}
	if err := waitResult(t, done, "http-serve"); err != nil {
		t.Errorf("http-serve: %v", err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"fetch", "-token-file", empty}, "is empty"},
		{[]string{"fetch", "-token-file", filepath.Join(dir, "none")}, "no such file"},
		{[]string{"fetch", "-wait", "0s"}, "usage"},
		{[]string{"fetch", "-path", "x"}, "usage"},
		{[]string{"fetch", "extra"}, "usage"},
	} {
		if err := run(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}
