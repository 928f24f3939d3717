package server_test

import (
	"encoding/json"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/fsm"
	"github.com/sluicehq/sluice/dispatcher/server"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"
)

// FuzzSubmit posts arbitrary bodies and headers to the submit path of a
// real replica over an in-memory listener. The server must never answer
// 5xx or panic; a 200 must name jobs that are listed afterwards, and any
// other answer must leave the jobs as they were.
func FuzzSubmit(f *testing.F) {
	f.Add([]byte(jobJSON("a", "", 1)), "application/json", "", "")
	f.Add([]byte("["+jobJSON("a", "q", 2)+","+jobJSON("b", "", 1)+"]"), "", "identity", "key-1")
	f.Add([]byte(jobJSON("a", "", 1)+"\n"+jobJSON("b", "", 1)), "application/x-ndjson", "", "k")
	f.Add(gzipped(f, []byte(jobJSON("gz", "", 1))), "application/json", "gzip", "")
	f.Add(zstded(f, []byte(jobJSON("zs", "", 1))), "application/json", "zstd", "")
	f.Add([]byte(`{"name":`), "application/json", "gzip", "bad key")
	f.Add([]byte(`[{},1,null]`), "text/plain", "br", "")

	s := openOne(f, nil)
	h, err := server.NewHandler(server.HandlerConfig{Dispatcher: s.Dispatcher(), FSM: s.FSM(), Raft: s.Raft(), Logger: testLogger()})
	if err != nil {
		f.Fatal(err)
	}
	ln := fasthttputil.NewInmemoryListener()
	srv := server.NewHTTPServer(h, testLogger())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = srv.Serve(ln)
	}()
	f.Cleanup(func() {
		_ = srv.Shutdown()
		wg.Wait()
		h.Wait()
	})
	c := &fasthttp.Client{
		Dial:                func(string) (net.Conn, error) { return ln.Dial() },
		MaxResponseBodySize: 1 << 20,
	}
	f.Fuzz(func(t *testing.T, body []byte, contentType, encoding, key string) {
		before := len(s.FSM().Jobs(fsmAll))
		rq, rs := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(rq)
		defer fasthttp.ReleaseResponse(rs)
		rq.SetRequestURI("http://sluice" + api.PathJobs)
		rq.Header.SetMethod("POST")
		if contentType != "" {
			rq.Header.SetContentType(contentType)
		}
		if encoding != "" {
			rq.Header.Set("Content-Encoding", encoding)
		}
		if key != "" {
			rq.Header.Set(api.HeaderIdempotencyKey, key)
		}
		rq.SetBody(body)
		if err := c.DoTimeout(rq, rs, 20*time.Second); err != nil {
			// fasthttp's client refuses some header values itself.
			t.Skipf("request not sent: %v", err)
		}
		st := rs.StatusCode()
		if st >= 500 {
			t.Fatalf("status %d: %s", st, rs.Body())
		}
		if st != 200 {
			var e api.ErrorResponse
			if err := json.Unmarshal(rs.Body(), &e); err != nil || e.Code == "" || e.Error == "" {
				t.Fatalf("status %d without an explaining body: %q", st, rs.Body())
			}
			if after := len(s.FSM().Jobs(fsmAll)); after != before {
				t.Fatalf("status %d, but the jobs went from %d to %d", st, before, after)
			}
			return
		}
		var res api.SubmitResponse
		if err := json.Unmarshal(rs.Body(), &res); err != nil || len(res.Jobs) == 0 {
			t.Fatalf("200 with body %q: %v", rs.Body(), err)
		}
		for _, id := range res.Jobs {
			if _, ok := s.FSM().Job(id); !ok {
				t.Fatalf("submitted job %s is not listed", id)
			}
		}
	})
}

var fsmAll = fsm.JobFilter{}
