package remote_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet/remote"
	"github.com/sluicehq/sluice/nodelet/runtime"
	"github.com/sluicehq/sluice/nodelet/runtime/sim"
)

// textRuntime is the sim runtime whose containers printed text: Logs
// returns text first, then (with Follow) what the sim reader returns. It
// counts the follow readers closed, and says on opened, when not nil, that
// one was opened.
type textRuntime struct {
	runtime.Runtime
	text   string
	opened chan struct{}

	mu     sync.Mutex
	closed int
	notify chan struct{} // closed and replaced when a reader closes
}

func (r *textRuntime) Logs(ctx context.Context, id, container string, opts runtime.LogOptions) (io.ReadCloser, error) {
	rc, err := r.Runtime.Logs(ctx, id, container, opts)
	if err != nil {
		return nil, err
	}
	if opts.Follow && r.opened != nil {
		select {
		case r.opened <- struct{}{}:
		default:
		}
	}
	return &textReader{Reader: io.MultiReader(strings.NewReader(r.text), rc), rc: rc, rt: r, follow: opts.Follow}, nil
}

type textReader struct {
	io.Reader
	rc     io.Closer
	rt     *textRuntime
	follow bool
}

func (t *textReader) Close() error {
	if t.follow {
		t.rt.mu.Lock()
		t.rt.closed++
		close(t.rt.notify)
		t.rt.notify = make(chan struct{})
		t.rt.mu.Unlock()
	}
	return t.rc.Close()
}

// awaitClosed waits until n follow readers were closed.
func (r *textRuntime) awaitClosed(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(wait)
	for {
		r.mu.Lock()
		closed, ch := r.closed, r.notify
		r.mu.Unlock()
		if closed >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%d follow readers closed, want %d", closed, n)
		}
	}
}

// logFixture is a log server over a sim host with one running pod for
// task j1/0/0/0 whose containers are "main" and "side".
type logFixture struct {
	rt   *textRuntime
	srv  *remote.LogServer
	base string
}

const (
	logTask  = "j1/0/0/0"
	logToken = "tok"
)

func newLogFixture(t *testing.T, text string) *logFixture {
	t.Helper()
	host := sim.NewHost()
	t.Cleanup(host.Close)
	rt := &textRuntime{Runtime: sim.New(host), text: text, notify: make(chan struct{})}
	spec := runtime.PodSpec{ID: remote.PodID(logTask), Containers: []runtime.ContainerSpec{
		{Name: "main", Image: api.Image{Rootfs: "/img"}, Args: []string{"x"}},
		{Name: "side", Image: api.Image{Rootfs: "/img"}, Args: []string{"y"}},
	}}
	if err := rt.Start(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	srv, err := remote.NewLogServer(remote.LogServerConfig{
		Runtime: rt, Token: logToken,
		FirstContainer: func(task string) string {
			if task == logTask {
				return "main"
			}
			return ""
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})
	return &logFixture{rt: rt, srv: srv, base: "http://" + srv.Addr() + api.PathNodeletLogs}
}

// get requests the query q with the token and returns status and body.
func (f *logFixture) get(t *testing.T, q string, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.base+"?"+q, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := http.Client{Timeout: wait}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func errorCode(t *testing.T, body string) string {
	t.Helper()
	var e api.ErrorResponse
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" {
		t.Fatalf("error body %q is not an ErrorResponse (%v)", body, err)
	}
	return e.Code
}

func TestLogServerServesSimLogs(t *testing.T) {
	// The sim runtime's pods print nothing: their logs are empty.
	f := newLogFixture(t, "")
	task := url.QueryEscape(logTask)
	for _, q := range []string{"task=" + task, "task=" + task + "&container=side", "task=" + task + "&tail=5"} {
		if status, body := f.get(t, q, logToken); status != http.StatusOK || body != "" {
			t.Errorf("GET ?%s = %d %q, want 200 and an empty body", q, status, body)
		}
	}
}

func TestLogServerTail(t *testing.T) {
	f := newLogFixture(t, "one\ntwo\nthree\nfour")
	task := url.QueryEscape(logTask)
	for _, c := range []struct{ q, want string }{
		{"", "one\ntwo\nthree\nfour"},
		{"&tail=2", "three\nfour"},
		{"&tail=0", ""},
		{"&tail=10", "one\ntwo\nthree\nfour"},
	} {
		if status, body := f.get(t, "task="+task+c.q, logToken); status != http.StatusOK || body != c.want {
			t.Errorf("GET %s = %d %q, want 200 %q", c.q, status, body, c.want)
		}
	}
}

func TestLogServerErrors(t *testing.T) {
	f := newLogFixture(t, "")
	task := url.QueryEscape(logTask)
	for _, c := range []struct {
		q, token string
		status   int
		code     string
	}{
		{"task=" + task, "", http.StatusUnauthorized, api.CodeUnauthorized},
		{"task=" + task, "wrong", http.StatusUnauthorized, api.CodeUnauthorized},
		{"", logToken, http.StatusBadRequest, api.CodeInvalid},
		{"task=" + task + "&follow=yes", logToken, http.StatusBadRequest, api.CodeInvalid},
		{"task=" + task + "&tail=-1", logToken, http.StatusBadRequest, api.CodeInvalid},
		{"task=" + task + "&tail=x", logToken, http.StatusBadRequest, api.CodeInvalid},
		{"task=" + task + "&container=..", logToken, http.StatusBadRequest, api.CodeInvalid},
		{"task=j9/0/0/0", logToken, http.StatusNotFound, api.CodeNotFound},
		{"task=j9/0/0/0&follow=1", logToken, http.StatusNotFound, api.CodeNotFound},
		{"task=" + task + "&container=nope", logToken, http.StatusNotFound, api.CodeNotFound},
		{"task=" + task + "&container=nope&follow=1&tail=3", logToken, http.StatusNotFound, api.CodeNotFound},
	} {
		status, body := f.get(t, c.q, c.token)
		if status != c.status {
			t.Errorf("GET ?%s (token %q) = %d %q, want %d", c.q, c.token, status, body, c.status)
			continue
		}
		if code := errorCode(t, body); code != c.code {
			t.Errorf("GET ?%s: code %q, want %q", c.q, code, c.code)
		}
	}
	// Another path.
	resp, err := http.Get("http://" + f.srv.Addr() + "/v1/other")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /v1/other = %d, want 404", resp.StatusCode)
	}
}

func TestLogServerFollowEndsWithPod(t *testing.T) {
	f := newLogFixture(t, "hello\n")
	type result struct {
		status int
		body   string
	}
	done := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, f.base+"?follow=1&tail=1&task="+url.QueryEscape(logTask), nil)
		req.Header.Set("Authorization", "Bearer "+logToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- result{body: err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		done <- result{resp.StatusCode, string(b)}
	}()
	// The stream stays open while the pod runs.
	select {
	case r := <-done:
		t.Fatalf("follow ended while the pod runs: %+v", r)
	case <-time.After(200 * time.Millisecond):
	}
	if err := f.rt.Stop(context.Background(), remote.PodID(logTask), 0); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		// The tail, then what followed it: the same text again from the
		// test runtime's follow reader, skipped as already sent.
		if r.status != http.StatusOK || r.body != "hello\n" {
			t.Errorf("follow = %d %q, want 200 %q", r.status, r.body, "hello\n")
		}
	case <-time.After(wait):
		t.Fatal("follow did not end with the pod")
	}
	f.rt.awaitClosed(t, 1)
}

func TestLogServerFollowEndsWhenClientGoes(t *testing.T) {
	f := newLogFixture(t, "hi\n")
	conn, err := net.DialTimeout("tcp", f.srv.Addr(), wait)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET %s?follow=1&task=%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n",
		api.PathNodeletLogs, url.QueryEscape(logTask), logToken)
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "hi\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	conn.Close()
	// The pod still runs; the stream's reader is closed all the same.
	f.rt.awaitClosed(t, 1)
}

func TestLogServerCloseEndsStreams(t *testing.T) {
	f := newLogFixture(t, "")
	f.rt.opened = make(chan struct{}, 1)
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, f.base+"?follow=1&task="+url.QueryEscape(logTask), nil)
		req.Header.Set("Authorization", "Bearer "+logToken)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		errc <- err
	}()
	select {
	case <-f.rt.opened:
	case err := <-errc:
		t.Fatalf("the stream ended before it started: %v", err)
	case <-time.After(wait):
		t.Fatal("the stream did not start")
	}
	closed := make(chan error, 1)
	go func() { closed <- f.srv.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(wait):
		t.Fatal("Close did not return with a stream open")
	}
	select {
	case <-errc:
	case <-time.After(wait):
		t.Fatal("the stream did not end with Close")
	}
	f.rt.awaitClosed(t, 1)
}
