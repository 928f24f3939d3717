package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/api"
)

// stubReq is a request the stub dispatcher received.
type stubReq struct {
	method, path, query  string
	key, encoding, ctype string
	auth                 string
	body                 []byte
}

// stubServer is a fasthttp server standing in for the dispatcher: it
// records every request and answers with handle.
type stubServer struct {
	url string
	mu  sync.Mutex
	got []stubReq
}

func (s *stubServer) requests() []stubReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]stubReq(nil), s.got...)
}

func startStub(t *testing.T, handle func(ctx *fasthttp.RequestCtx, r stubReq)) *stubServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &stubServer{url: "http://" + ln.Addr().String()}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		r := stubReq{
			method:   string(ctx.Method()),
			path:     string(ctx.URI().PathOriginal()),
			query:    string(ctx.URI().QueryString()),
			key:      string(ctx.Request.Header.Peek(api.HeaderIdempotencyKey)),
			encoding: string(ctx.Request.Header.Peek("Content-Encoding")),
			ctype:    string(ctx.Request.Header.ContentType()),
			auth:     string(ctx.Request.Header.Peek("Authorization")),
			body:     bytes.Clone(ctx.PostBody()),
		}
		s.mu.Lock()
		s.got = append(s.got, r)
		s.mu.Unlock()
		handle(ctx, r)
	}}
	go srv.Serve(ln) //nolint:errcheck // ends with Shutdown
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.ShutdownWithContext(ctx) //nolint:errcheck // best effort
	})
	return s
}

func reply(ctx *fasthttp.RequestCtx, status int, v any) {
	b, _ := json.Marshal(v)
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// runCmd runs the sluice command line args and returns its outputs and
// exit status.
func runCmd(t *testing.T, args ...string) (stdout, stderr string, code int, err error) {
	t.Helper()
	ctx := context.Background()
	var out, errOut bytes.Buffer
	err = run(ctx, args, &out, &errOut)
	return out.String(), errOut.String(), exitCode(ctx, err), err
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestClientServerErrorShownVerbatim(t *testing.T) {
	s := startStub(t, func(ctx *fasthttp.RequestCtx, r stubReq) {
		if r.auth != "Bearer tok-from-file" {
			reply(ctx, 401, api.ErrorResponse{Code: api.CodeUnauthorized, Error: "no token"})
			return
		}
		reply(ctx, 404, api.ErrorResponse{Code: api.CodeNotFound, Error: `no job "j9"`})
	})
	tokenFile := writeFile(t, "token", "tok-from-file\n")
	_, _, code, err := runCmd(t, "jobs", "j9", "--addr", s.url, "--token", "ignored", "--token-file", tokenFile)
	if code != exitError || err == nil || err.Error() != `no job "j9" (HTTP 404, not_found)` {
		t.Errorf("exit %d, err %v", code, err)
	}
	if !api.IsNotFound(err) {
		t.Errorf("err %v does not wrap the APIError", err)
	}

	// The address without a scheme, from the environment.
	t.Setenv("SLUICE_ADDR", strings.TrimPrefix(s.url, "http://"))
	t.Setenv("SLUICE_TOKEN", "nope")
	_, _, code, err = runCmd(t, "nodes")
	if code != exitError || err == nil || err.Error() != "no token (HTTP 401, unauthorized)" {
		t.Errorf("exit %d, err %v", code, err)
	}
}

func TestClientConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	ln.Close()
	_, _, code, err := runCmd(t, "nodes", "--addr", addr)
	if code != exitError || err == nil {
		t.Fatalf("exit %d, err %v", code, err)
	}
	for _, want := range []string{addr, "connection refused", "sluice dev", "--addr"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestClientBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"nodes", "-o", "yaml"},
		{"nodes", "--addr", "ftp://x"},
		{"jobs", "--state", "sleeping"},
		{"jobs", "--label", "novalue"},
		{"jobs", "--tasks"},
		{"submit", "f", "--compress", "br"},
		{"submit", "f", "--batch", "0"},
		{"logs"},
		{"cancel"},
	} {
		_, _, code, err := runCmd(t, args...)
		if code != exitUsage {
			t.Errorf("%q: exit %d (%v), want %d", args, code, err, exitUsage)
		}
	}
}

func TestHumanUnits(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{cores(16000), "16"}, {cores(1500), "1.5"}, {cores(250), "0.25"}, {cores(0), "0"},
		{bytesIEC(0), "0"}, {bytesIEC(1000), "1000"}, {bytesIEC(512 << 20), "512Mi"},
		{bytesIEC(3 << 29), "1.5Gi"}, {bytesIEC(64 << 30), "64Gi"}, {bytesIEC(200 << 30), "200Gi"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	now := time.Now()
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{{5 * time.Second, "5s"}, {3 * time.Minute, "3m"}, {5 * time.Hour, "5h"}, {72 * time.Hour, "3d"}} {
		if got := age(now, now.Add(-tc.d)); got != tc.want {
			t.Errorf("age(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}
