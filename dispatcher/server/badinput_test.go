package server_test

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
)

// TestBadInput sends malformed and hostile requests: each gets the right
// status and an api.ErrorResponse that explains it, and nothing is
// submitted.
func TestBadInput(t *testing.T) {
	s := openOne(t, nil)
	base := s.Addr()
	good := []byte(jobJSON("ok", "", 1))
	gz := gzipped(t, good)
	bomb := gzipped(t, bytes.Repeat([]byte{' '}, api.MaxBodyBytes+10))
	var many bytes.Buffer
	for range api.MaxItemsPerRequest + 1 {
		many.WriteString("{}\n")
	}
	longKey := strings.Repeat("k", api.MaxIdempotencyKeyLen-1)
	cases := []struct {
		name   string
		q      req
		status int
		code   string
		want   string // in the message or the problems
	}{
		{"malformed json", req{body: []byte(`{"name":`)}, 400, api.CodeInvalid, ""},
		{"unknown field", req{body: []byte(strings.Replace(string(good), `"name"`, `"nmae"`, 1))}, 400, api.CodeInvalid, "nmae"},
		{"wrong type", req{body: []byte(strings.Replace(string(good), `"count":1`, `"count":"one"`, 1))}, 400, api.CodeInvalid, "count"},
		{"negative cpu", req{body: []byte(strings.Replace(string(good), `"cpu":100`, `"cpu":-5`, 1))}, 400, api.CodeInvalid, "cpu"},
		{"absurd memory", req{body: []byte(strings.Replace(string(good), `"memory":"1Mi"`, `"memory":"900Pi"`, 1))}, 400, api.CodeInvalid, "memory"},
		{"absurd count", req{body: []byte(strings.Replace(string(good), `"count":1`, `"count":99999999999`, 1))}, 400, api.CodeInvalid, "count"},
		{"empty body", req{body: []byte{}}, 400, api.CodeInvalid, "empty"},
		{"empty array", req{body: []byte(" [ ] ")}, 400, api.CodeInvalid, "empty array"},
		{"byte-order mark", req{body: append([]byte("\xEF\xBB\xBF"), good...)}, 400, api.CodeInvalid, "byte-order mark"},
		{"one bad item of two", req{body: []byte("[" + string(good) + `,{"name":"x"}]`)}, 400, api.CodeInvalid, "jobs[1]"},
		// Read without validation first: a body that fails to read is read
		// again with it, so that item 1's invalid cpu is named too.
		{"read and validation problems", req{body: []byte("[" + strings.Replace(string(good), `"name"`, `"nmae"`, 1) + "," +
			strings.Replace(string(good), `"cpu":100`, `"cpu":-5`, 1) + "]")}, 400, api.CodeInvalid, "jobs[1]"},
		{"too many items", req{body: gzipped(t, many.Bytes()), header: map[string]string{"Content-Encoding": "gzip"}}, 413, api.CodeTooLarge, "100000"},
		{"decompression bomb", req{body: bomb, header: map[string]string{"Content-Encoding": "gzip"}}, 413, api.CodeTooLarge, "limit"},
		{"truncated gzip", req{body: gz[:len(gz)-10], header: map[string]string{"Content-Encoding": "gzip"}}, 400, api.CodeInvalid, "gzip"},
		{"not gzip", req{body: good, header: map[string]string{"Content-Encoding": "gzip"}}, 400, api.CodeInvalid, "gzip"},
		{"bad zstd", req{body: []byte("\x28\xb5\x2f\xfd garbage"), header: map[string]string{"Content-Encoding": "zstd"}}, 400, api.CodeInvalid, "zstd"},
		{"bogus content type", req{body: good, header: map[string]string{"Content-Type": "text/plain"}}, 415, api.CodeUnsupportedMedia, "text/plain"},
		{"bad content encoding", req{body: good, header: map[string]string{"Content-Encoding": "br"}}, 415, api.CodeUnsupportedMedia, "br"},
		{"key with space", req{body: good, header: map[string]string{api.HeaderIdempotencyKey: "a b"}}, 400, api.CodeInvalid, "printable"},
		{"key too long", req{body: good, header: map[string]string{api.HeaderIdempotencyKey: strings.Repeat("k", api.MaxIdempotencyKeyLen+1)}}, 400, api.CodeInvalid, "longer"},
		{"key too long with its suffix", req{body: good, header: map[string]string{api.HeaderIdempotencyKey: longKey}}, 400, api.CodeInvalid, "idempotency_key"},
		{"unknown query parameter", req{method: "GET", url: api.PathJobs + "?stat=pending"}, 400, api.CodeInvalid, "stat"},
		{"bad state", req{method: "GET", url: api.PathJobs + "?state=done"}, 400, api.CodeInvalid, "state"},
		{"bad limit", req{method: "GET", url: api.PathJobs + "?limit=0"}, 400, api.CodeInvalid, "limit"},
		{"huge limit", req{method: "GET", url: api.PathJobs + "?limit=10001"}, 400, api.CodeInvalid, "limit"},
		{"bad after", req{method: "GET", url: api.PathJobs + "?after=7"}, 400, api.CodeInvalid, "after"},
		{"bad label", req{method: "GET", url: api.PathJobs + "?label=team"}, 400, api.CodeInvalid, "label"},
		{"bad consistent", req{method: "GET", url: api.PathJobs + "?consistent=maybe"}, 400, api.CodeInvalid, "consistent"},
		{"bad task state", req{method: "GET", url: api.PathJob + "j1/tasks?state=sleeping"}, 400, api.CodeInvalid, "state"},
		{"bad task after", req{method: "GET", url: api.PathJob + "j1/tasks?after=j2/0/0/1"}, 400, api.CodeInvalid, "after"},
		{"bad generation", req{method: "GET", url: api.PathNode + "n1/target?generation=-1"}, 400, api.CodeInvalid, "generation"},
		{"bad wait", req{method: "GET", url: api.PathNode + "n1/target?wait=1h"}, 400, api.CodeInvalid, "wait"},
		{"bad diff", req{method: "GET", url: api.PathNode + "n1/target?diff=yes"}, 400, api.CodeInvalid, "diff"},
		{"bad identity", req{method: "GET", url: api.PathNode + "n1/target?identity=yes"}, 400, api.CodeInvalid, "identity"},
		{"bad from", req{method: "GET", url: api.PathWatch + "?from=x"}, 400, api.CodeInvalid, "from"},
		{"bad brief", req{method: "GET", url: api.PathWatch + "?brief=x"}, 400, api.CodeInvalid, "brief"},
		{"bad tail", req{method: "GET", url: api.PathTasks + "j1/0/0/1/logs?tail=-1"}, 400, api.CodeInvalid, "tail"},
		{"node unknown field", req{url: api.PathNodes, body: []byte(`{"name":"n","bogus":1}`)}, 400, api.CodeInvalid, "bogus"},
		{"node wrong type", req{url: api.PathNodes, body: []byte(`{"name":5}`)}, 400, api.CodeInvalid, "name"},
		{"node two objects", req{url: api.PathNodes, body: []byte(nodeJSON("a", "") + nodeJSON("b", ""))}, 400, api.CodeInvalid, "trailing"},
		{"node invalid", req{url: api.PathNodes, body: []byte(`{"name":"n","capacity":{"cpu":-1,"memory":1}}`)}, 400, api.CodeInvalid, "cpu"},
		{"node key twice", req{url: api.PathNodes, body: []byte(strings.Replace(nodeJSON("a", ""), `"name":"a"`, `"name":"a","name":"b"`, 1))}, 400, api.CodeInvalid, "name repeats"},
		{"node label twice", req{url: api.PathNodes, body: []byte(strings.Replace(nodeJSON("a", ""), `"name":"a"`, `"name":"a","labels":{"z":"1","z":"2"}`, 1))}, 400, api.CodeInvalid, "labels.z"},
		{"node capacity key twice", req{url: api.PathNodes, body: []byte(strings.Replace(nodeJSON("a", ""), `"cpu":8000,`, `"cpu":8000,"cpu":1,`, 1))}, 400, api.CodeInvalid, "capacity.cpu"},
		{"node address with a path", req{url: api.PathNodes, body: []byte(nodeJSON("a", "h:80/any/path#"))}, 400, api.CodeInvalid, "address"},
		{"node array", req{url: api.PathNodes, body: []byte(`[` + nodeJSON("a", "") + `]`)}, 400, api.CodeInvalid, "object"},
		{"report invalid", req{url: api.PathNode + "n1/reports", body: []byte(`{"reports":[{"task_id":"","state":"running","reason":"started","time":"2030-01-01T00:00:00Z"}]}`)}, 400, api.CodeInvalid, "reports[0].task_id"},
		{"report unknown field", req{url: api.PathNode + "n1/reports", body: []byte(`{"reports":[],"bogus":1}`)}, 400, api.CodeInvalid, "bogus"},
		{"report wrong type", req{url: api.PathNode + "n1/reports", body: []byte(`{"reports":[{"task_id":5}]}`)}, 400, api.CodeInvalid, "reports[0].task_id"},
		{"report not an object", req{url: api.PathNode + "n1/reports", body: []byte(`[]`)}, 400, api.CodeInvalid, "object"},
		{"report for an unknown node", req{url: api.PathNode + "n9/reports", body: []byte(`{"reports":[]}`)}, 404, api.CodeNotFound, "n9"},
		{"unknown path", req{method: "GET", url: "/v1/nope"}, 404, api.CodeNotFound, "/v1/nope"},
		{"unknown job path", req{method: "GET", url: api.PathJob + "j1/bogus"}, 404, api.CodeNotFound, ""},
		{"wrong method", req{method: "PUT", url: api.PathJobs}, 405, "method_not_allowed", "GET, POST"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := c.q
			if q.method == "" {
				q.method = "POST"
			}
			if q.url == "" {
				q.url = api.PathJobs
			}
			q.url = base + q.url
			r := do(t, q)
			errorReply(t, r, c.status, c.code, c.want)
			if c.status == 405 && r.header.Get("Allow") != "GET, POST" {
				t.Errorf("Allow %q", r.header.Get("Allow"))
			}
		})
	}
	if l := listJobs(t, base, "", ""); len(l.Jobs) != 0 {
		t.Fatalf("bad requests submitted %d jobs", len(l.Jobs))
	}
	if n := s.FSM().Nodes(); len(n) != 0 {
		t.Fatalf("bad requests registered %d nodes", len(n))
	}
}

// TestOversizedBody announces a body over the limit: the server answers
// 413 with a JSON body without reading it.
func TestOversizedBody(t *testing.T) {
	s := openOne(t, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.Addr(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", api.PathJobs, api.MaxBodyBytes+1)
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(conn)
	resp := buf.String()
	if !strings.HasPrefix(resp, "HTTP/1.1 413") || !strings.Contains(resp, `"code":"too_large"`) {
		t.Fatalf("reply to an oversized body:\n%s", resp)
	}
	if l := listJobs(t, s.Addr(), "", ""); len(l.Jobs) != 0 {
		t.Fatalf("%d jobs", len(l.Jobs))
	}
}

// TestIdempotency submits the same request with the same Idempotency-Key
// twice: the same IDs, Existing set, one set of jobs.
func TestIdempotency(t *testing.T) {
	s := openOne(t, nil)
	base := s.Addr()
	body := "[" + jobJSON("a", "", 1) + "," + jobJSON("b", "", 1) + "," +
		strings.Replace(jobJSON("c", "", 1), `"name"`, `"idempotency_key":"own","name"`, 1) + "]"
	h := map[string]string{api.HeaderIdempotencyKey: "batch-1"}
	first := submit(t, base, "", body, h)
	if len(first.Existing) != 0 || len(first.Jobs) != 3 {
		t.Fatalf("first submit: %+v", first)
	}
	again := submit(t, base, "", body, h)
	if fmt.Sprint(again.Jobs) != fmt.Sprint(first.Jobs) || fmt.Sprint(again.Existing) != "[0 1 2]" {
		t.Fatalf("repeated submit: %+v, first %+v", again, first)
	}
	if l := listJobs(t, base, "", ""); len(l.Jobs) != 3 {
		t.Fatalf("%d jobs after a repeated submit", len(l.Jobs))
	}
	j := decode[api.JobStatus](t, do(t, req{method: "GET", url: base + api.PathJob + first.Jobs[1]}), 200)
	if j.Spec.IdempotencyKey != "batch-1/1" {
		t.Fatalf("job b's key %q", j.Spec.IdempotencyKey)
	}
	j = decode[api.JobStatus](t, do(t, req{method: "GET", url: base + api.PathJob + first.Jobs[2]}), 200)
	if j.Spec.IdempotencyKey != "own" {
		t.Fatalf("job c's key %q", j.Spec.IdempotencyKey)
	}
	// Another key makes new jobs.
	other := submit(t, base, "", body, map[string]string{api.HeaderIdempotencyKey: "batch-2"})
	if len(other.Existing) != 1 || other.Existing[0] != 2 || other.Jobs[0] == first.Jobs[0] {
		t.Fatalf("submit with another key: %+v", other)
	}
}
