package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/api"
)

// jobLine is a valid job named name, on one line.
func jobLine(name string) string {
	return `{"name":"` + name + `","tasks":[{"count":2,"pod":{"containers":[{"image":{"rootfs":"/img"},"command":["/bin/true"],"resources":{"cpu":"500m","memory":"64Mi"}}]}}]}`
}

// acceptSubmits answers a submit with an ID per job: "id-" and its name.
func acceptSubmits(ctx *fasthttp.RequestCtx, r stubReq) {
	body := r.body
	if r.encoding == "zstd" {
		zr, err := zstd.NewReader(bytes.NewReader(body))
		if err != nil {
			reply(ctx, 415, api.ErrorResponse{Code: api.CodeUnsupportedMedia, Error: err.Error()})
			return
		}
		defer zr.Close()
		if body, err = io.ReadAll(zr); err != nil {
			reply(ctx, 415, api.ErrorResponse{Code: api.CodeUnsupportedMedia, Error: err.Error()})
			return
		}
	}
	jobs, err := api.DecodeJobs(body)
	if err != nil {
		reply(ctx, 400, api.ErrorResponse{Code: api.CodeInvalid, Error: err.Error()})
		return
	}
	var resp api.SubmitResponse
	for _, j := range jobs {
		resp.Jobs = append(resp.Jobs, "id-"+j.Name)
	}
	reply(ctx, 200, resp)
}

// names returns the job names of a submit body.
func names(t *testing.T, r stubReq) []string {
	t.Helper()
	jobs, err := api.DecodeJobs(r.body)
	if err != nil {
		t.Fatalf("request body: %v", err)
	}
	var out []string
	for _, j := range jobs {
		out = append(out, j.Name)
	}
	return out
}

func ndjson(names ...string) string {
	var b strings.Builder
	for _, n := range names {
		b.WriteString(jobLine(n) + "\n")
	}
	return b.String()
}

func TestSubmitSplitsIntoKeyedRequests(t *testing.T) {
	s := startStub(t, acceptSubmits)
	file := writeFile(t, "jobs.ndjson", ndjson("a", "b", "c", "d", "e"))
	out, errOut, code, err := runCmd(t, "submit", file, "--addr", s.url, "--batch", "2", "--parallel", "2", "--idempotency-key", "K")
	if code != exitOK {
		t.Fatalf("exit %d: %v\n%s", code, err, errOut)
	}
	if out != "id-a\nid-b\nid-c\nid-d\nid-e\n" {
		t.Errorf("stdout %q", out)
	}
	if errOut != "" {
		t.Errorf("stderr %q (no progress bar off a terminal)", errOut)
	}
	reqs := s.requests()
	slices.SortFunc(reqs, func(a, b stubReq) int { return strings.Compare(a.key, b.key) })
	want := map[string][]string{"K-0": {"a", "b"}, "K-1": {"c", "d"}, "K-2": {"e"}}
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for _, r := range reqs {
		if got := names(t, r); !slices.Equal(got, want[r.key]) || r.method != "POST" || r.path != api.PathJobs || r.ctype != "application/json" {
			t.Errorf("request %s %s key %q type %q: jobs %v", r.method, r.path, r.key, r.ctype, got)
		}
		// The jobs are sent as written: quantities stay strings.
		if !bytes.Contains(r.body, []byte(`"cpu":"500m"`)) {
			t.Errorf("request %s body %s", r.key, r.body)
		}
	}
}

func TestSubmitOneRequestAsWritten(t *testing.T) {
	s := startStub(t, acceptSubmits)
	content := ndjson("a", "b")
	file := writeFile(t, "jobs.ndjson", content)
	out, _, code, err := runCmd(t, "submit", file, "--addr", s.url, "--compress", "zstd", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %v", code, err)
	}
	var resp api.SubmitResponse
	if err := json.Unmarshal([]byte(out), &resp); err != nil || !slices.Equal(resp.Jobs, []string{"id-a", "id-b"}) {
		t.Errorf("stdout %q: %v", out, err)
	}
	reqs := s.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.encoding != "zstd" || r.ctype != "application/x-ndjson" || !regexp.MustCompile(`^[0-9a-f]{24}-0$`).MatchString(r.key) {
		t.Errorf("encoding %q, type %q, key %q", r.encoding, r.ctype, r.key)
	}
	plain, err := zstdDecode(r.body)
	if err != nil || string(plain) != content {
		t.Errorf("body %q, %v", plain, err)
	}
}

func zstdDecode(b []byte) ([]byte, error) {
	zr, err := zstd.NewReader(nil)
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	return zr.DecodeAll(b, nil)
}

func TestSubmitInvalidSendsNothing(t *testing.T) {
	s := startStub(t, acceptSubmits)
	file := writeFile(t, "jobs.json", `[`+jobLine("a")+`, {"name": "b", "tasks": []}]`)
	out, errOut, code, err := runCmd(t, "submit", file, "--addr", s.url)
	if code != exitError || err == nil {
		t.Fatalf("exit %d: %v", code, err)
	}
	if out != "" || !strings.Contains(errOut, "[1].tasks") {
		t.Errorf("stdout %q, stderr %q", out, errOut)
	}
	if n := len(s.requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

func TestSubmitPartialFailure(t *testing.T) {
	s := startStub(t, func(ctx *fasthttp.RequestCtx, r stubReq) {
		if r.key == "K-1" {
			reply(ctx, 400, api.ErrorResponse{Code: api.CodeInvalid, Error: "invalid request", Total: 1,
				Problems: []api.Problem{{Item: 1, Path: "jobs[1].queue", Message: "no such queue"}}})
			return
		}
		acceptSubmits(ctx, r)
	})
	file := writeFile(t, "jobs.json", "["+strings.Join(strings.Split(strings.TrimSpace(ndjson("a", "b", "c", "d", "e")), "\n"), ",\n")+"]")
	out, errOut, code, err := runCmd(t, "submit", file, "--addr", s.url, "--batch", "2", "--parallel", "1", "--idempotency-key", "K")
	if code != exitError || err == nil {
		t.Fatalf("exit %d: %v", code, err)
	}
	if out != "id-a\nid-b\n" {
		t.Errorf("stdout %q", out)
	}
	want := "2 of 5 jobs committed; 1 of 3 requests failed, 1 not sent; resubmit safely with --idempotency-key K --batch 2"
	if err.Error() != want {
		t.Errorf("error %q\nwant  %q", err, want)
	}
	if !strings.Contains(errOut, "request 1 (jobs 2-3): invalid request (HTTP 400, invalid)\n  jobs[1].queue: no such queue") {
		t.Errorf("stderr %q", errOut)
	}
	if n := len(s.requests()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}

	// One request: the server's error as it said it.
	file = writeFile(t, "one.json", jobLine("a"))
	s2 := startStub(t, func(ctx *fasthttp.RequestCtx, r stubReq) {
		reply(ctx, 400, api.ErrorResponse{Code: api.CodeInvalid, Error: "invalid request, 2 problems", Total: 2, Problems: []api.Problem{
			{Path: "jobs[0].queue", Message: "no such queue"}, {Path: "jobs[0].pool", Message: "no such pool"}}})
	})
	_, _, code, err = runCmd(t, "submit", file, "--addr", s2.url)
	want = "invalid request, 2 problems (HTTP 400, invalid)\n  jobs[0].queue: no such queue\n  jobs[0].pool: no such pool"
	if code != exitError || err == nil || err.Error() != want {
		t.Errorf("exit %d, error %q\nwant %q", code, err, want)
	}
}

func TestSubmitRetriesUnavailable(t *testing.T) {
	var calls atomic.Int32
	s := startStub(t, func(ctx *fasthttp.RequestCtx, r stubReq) {
		if calls.Add(1) == 1 {
			reply(ctx, 503, api.ErrorResponse{Code: api.CodeUnavailable, Error: "no quorum"})
			return
		}
		acceptSubmits(ctx, r)
	})
	file := writeFile(t, "jobs.json", jobLine("a"))
	out, _, code, err := runCmd(t, "submit", file, "--addr", s.url, "--idempotency-key", "again")
	if code != exitOK || out != "id-a\n" {
		t.Fatalf("exit %d, stdout %q: %v", code, out, err)
	}
	reqs := s.requests()
	if len(reqs) != 2 || reqs[0].key != "again-0" || reqs[1].key != "again-0" {
		t.Errorf("requests %+v", reqs)
	}
}

func TestSubmitMergesExisting(t *testing.T) {
	s := startStub(t, func(ctx *fasthttp.RequestCtx, r stubReq) {
		jobs, _ := api.DecodeJobs(r.body)
		resp := api.SubmitResponse{Existing: []int{len(jobs) - 1}}
		for _, j := range jobs {
			resp.Jobs = append(resp.Jobs, "id-"+j.Name)
		}
		reply(ctx, 200, resp)
	})
	file := writeFile(t, "jobs.ndjson", ndjson("a", "b", "c"))
	out, _, code, err := runCmd(t, "submit", file, "--addr", s.url, "--batch", "2", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %v", code, err)
	}
	var resp api.SubmitResponse
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(resp.Jobs, resp.Existing); got != "[id-a id-b id-c] [1 2]" {
		t.Errorf("merged %s", got)
	}
}
