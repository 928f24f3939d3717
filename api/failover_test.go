package api_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/api"
)

// replica is a test server standing for one dispatcher replica; hits
// counts the requests it read.
type replica struct {
	url  string
	hits atomic.Int32
}

// fakeReplica serves h on loopback, counting requests.
func fakeReplica(t *testing.T, h fasthttp.RequestHandler) *replica {
	t.Helper()
	r := &replica{}
	r.url = serve(t, func(ctx *fasthttp.RequestCtx) {
		r.hits.Add(1)
		h(ctx)
	})
	return r
}

// healthy answers as a leader would: a submit with a job ID, a node list,
// everything else with 204.
func healthy(t *testing.T) *replica {
	return fakeReplica(t, func(ctx *fasthttp.RequestCtx) {
		switch {
		case rawPath(ctx) == api.PathJobs && string(ctx.Method()) == http.MethodPost:
			writeJSON(ctx, 200, api.SubmitResponse{Jobs: []string{"j1"}})
		case strings.HasSuffix(rawPath(ctx), "/capboxes") && string(ctx.Method()) == http.MethodPost:
			writeJSON(ctx, 200, api.CreateCapboxesResponse{})
		case string(ctx.Method()) == http.MethodGet || string(ctx.Method()) == http.MethodDelete:
			writeJSON(ctx, 200, map[string]any{})
		default:
			ctx.SetStatusCode(fasthttp.StatusNoContent)
		}
	})
}

// failing answers every request with status and code.
func failing(t *testing.T, status int, code string) *replica {
	return fakeReplica(t, func(ctx *fasthttp.RequestCtx) {
		writeJSON(ctx, status, api.ErrorResponse{Code: code, Error: "failing"})
	})
}

// hanging reads requests and never answers them (until the test ends).
func hanging(t *testing.T) *replica {
	release := make(chan struct{})
	r := fakeReplica(t, func(*fasthttp.RequestCtx) { <-release })
	t.Cleanup(func() { close(release) }) // before the server's shutdown
	return r
}

// dropping reads a request's header, then closes the connection without
// answering: the connection is lost after the request was sent.
func dropping(t *testing.T) *replica {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{url: "http://" + ln.Addr().String()}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(conn)
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			for {
				line, err := br.ReadString('\n')
				if err != nil || line == "\r\n" {
					break
				}
			}
			r.hits.Add(1)
			conn.Close()
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return r
}

// clientOf returns a client of the replicas, in order, with the given
// timeout, whose pauses between rounds are recorded in *pauses rather
// than waited.
func clientOf(t *testing.T, timeout time.Duration, pauses *[]time.Duration, reps ...*replica) *api.Client {
	t.Helper()
	addrs := make([]string, len(reps))
	for i, r := range reps {
		addrs[i] = r.url
	}
	const seed = 42
	t.Logf("jitter seed %d", seed)
	var mu sync.Mutex
	c, err := api.NewClient(api.ClientConfig{Addrs: addrs, Timeout: timeout, JitterSeed: seed,
		Sleep: func(ctx context.Context, d time.Duration) error {
			if pauses != nil {
				mu.Lock()
				*pauses = append(*pauses, d)
				mu.Unlock()
			}
			return ctx.Err()
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// calls are the client's requests that are safe to repeat, by name.
var safeCalls = map[string]func(context.Context, *api.Client) error{
	"Nodes (GET)": func(ctx context.Context, c *api.Client) error { _, err := c.Nodes(ctx); return err },
	"Cancel (DELETE)": func(ctx context.Context, c *api.Client) error {
		_, err := c.Cancel(ctx, "j1")
		return err
	},
	"RegisterNode": func(ctx context.Context, c *api.Client) error {
		return c.RegisterNode(ctx, api.NodeSpec{Name: "n1"})
	},
	"Report": func(ctx context.Context, c *api.Client) error {
		return c.Report(ctx, "n1", []api.TaskReport{{TaskID: "j1/0/0/0", State: api.TaskRunning, Reason: api.ReasonStarted, Time: time.Now()}})
	},
	"Heartbeat": func(ctx context.Context, c *api.Client) error { return c.Heartbeat(ctx, "n1", api.NodeUsage{}) },
	"SubmitBody with a key": func(ctx context.Context, c *api.Client) error {
		_, err := c.SubmitBody(ctx, []byte(`{}`), "", api.SubmitOptions{IdempotencyKey: "k"})
		return err
	},
	"Submit of keyed jobs": func(ctx context.Context, c *api.Client) error {
		_, err := c.Submit(ctx, []api.JobSpec{{Name: "a", IdempotencyKey: "ka"}, {Name: "b", IdempotencyKey: "kb"}}, api.SubmitOptions{})
		return err
	},
	"CreateCapboxes keyed": func(ctx context.Context, c *api.Client) error {
		_, err := c.CreateCapboxes(ctx, "am", []api.CapboxRequest{{IdempotencyKey: "c1"}})
		return err
	},
	"StartCapTasks": func(ctx context.Context, c *api.Client) error {
		_, err := c.StartCapTasks(ctx, "am", []api.CapTaskSpec{{}})
		return err
	},
}

// unsafeCalls are requests that must not be sent twice.
var unsafeCalls = map[string]func(context.Context, *api.Client) error{
	"SubmitBody without a key": func(ctx context.Context, c *api.Client) error {
		_, err := c.SubmitBody(ctx, []byte(`{}`), "", api.SubmitOptions{})
		return err
	},
	"Submit with a job without a key": func(ctx context.Context, c *api.Client) error {
		_, err := c.Submit(ctx, []api.JobSpec{{Name: "a", IdempotencyKey: "ka"}, {Name: "b"}}, api.SubmitOptions{})
		return err
	},
	"CreateCapboxes without a key": func(ctx context.Context, c *api.Client) error {
		_, err := c.CreateCapboxes(ctx, "am", []api.CapboxRequest{{IdempotencyKey: "c1"}, {}})
		return err
	},
}

// TestClientFailsOverToHealthy: a request safe to repeat goes past a
// replica answering 503 unavailable, one answering 500, a closed port, a
// replica that never answers and one that drops the connection, to the
// healthy replica; and the next call goes to that one first.
func TestClientFailsOverToHealthy(t *testing.T) {
	unavail := failing(t, 503, api.CodeUnavailable)
	internal := failing(t, 500, api.CodeInternal)
	hang := hanging(t)
	drop := dropping(t)
	ctx := context.Background()
	for name, call := range safeCalls {
		t.Run(name, func(t *testing.T) {
			good := healthy(t)
			// Closed after good listens, so that good cannot take its port.
			closed := &replica{url: closedAddr(t)}
			c := clientOf(t, 300*time.Millisecond, nil, unavail, internal, closed, hang, drop, good)
			before := [...]int32{unavail.hits.Load(), internal.hits.Load(), hang.hits.Load(), drop.hits.Load()}
			start := time.Now()
			if err := call(ctx, c); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if good.hits.Load() != 1 {
				t.Errorf("the healthy replica got %d requests, want 1", good.hits.Load())
			}
			after := [...]int32{unavail.hits.Load(), internal.hits.Load(), hang.hits.Load(), drop.hits.Load()}
			for i, what := range []string{"503", "500", "hanging", "dropping"} {
				if after[i] == before[i] {
					t.Errorf("the %s replica was not tried first", what)
				}
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("failing over took %v", d)
			}
			// The healthy replica is tried first from now on.
			if err := call(ctx, c); err != nil || good.hits.Load() != 2 {
				t.Errorf("second call: %v; the healthy replica got %d requests, want 2", err, good.hits.Load())
			}
			if unavail.hits.Load() != after[0] {
				t.Error("the second call went to the failing replica again")
			}
		})
	}
}

// TestClientDoesNotRepeatUnsafe: a request that is not safe to repeat is
// not sent to another replica once a replica may have received it (a 5xx
// other than not_leader, a timeout, a dropped connection); the error
// says the outcome is unknown. It does go on past a replica that did
// nothing: a refused connection, a 503 not_leader.
func TestClientDoesNotRepeatUnsafe(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		first   func(*testing.T) *replica
		code    string // of the *APIError, or "" when no reply
		timeout bool
	}{
		{"503 unavailable", func(t *testing.T) *replica { return failing(t, 503, api.CodeUnavailable) }, api.CodeUnavailable, false},
		{"500", func(t *testing.T) *replica { return failing(t, 500, api.CodeInternal) }, api.CodeInternal, false},
		{"502 without a body", func(t *testing.T) *replica {
			return fakeReplica(t, func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(502) })
		}, "", false},
		{"hanging", hanging, "", true},
		{"dropped connection", dropping, "", false},
	} {
		for name, call := range unsafeCalls {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				first, good := tc.first(t), healthy(t)
				var pauses []time.Duration
				c := clientOf(t, 300*time.Millisecond, &pauses, first, good)
				err := call(ctx, c)
				if !errors.Is(err, api.ErrOutcomeUnknown) {
					t.Fatalf("err = %v, want ErrOutcomeUnknown", err)
				}
				if first.hits.Load() != 1 || good.hits.Load() != 0 || len(pauses) != 0 {
					t.Errorf("sent %d times to the failing replica, %d to the healthy one, %d pauses; want 1, 0, 0",
						first.hits.Load(), good.hits.Load(), len(pauses))
				}
				if tc.code != "" && api.ErrorCode(err) != tc.code {
					t.Errorf("err = %v, want code %s", err, tc.code)
				}
				if tc.timeout != errors.Is(err, api.ErrTimeout) {
					t.Errorf("err = %v: ErrTimeout %v, want %v", err, errors.Is(err, api.ErrTimeout), tc.timeout)
				}
				t.Logf("%v", err)
				// The next call starts with another replica.
				if err := call(ctx, c); err != nil || good.hits.Load() != 1 || first.hits.Load() != 1 {
					t.Errorf("next call: %v; hits %d and %d, want 1 and 1", err, first.hits.Load(), good.hits.Load())
				}
			})
		}
	}
	// A replica that did nothing: the request goes on.
	for name, call := range unsafeCalls {
		t.Run("did nothing/"+name, func(t *testing.T) {
			noLeader, good := failing(t, 503, api.CodeNotLeader), healthy(t)
			c := clientOf(t, 5*time.Second, nil, &replica{url: closedAddr(t)}, noLeader, good)
			if err := call(ctx, c); err != nil || noLeader.hits.Load() != 1 || good.hits.Load() != 1 {
				t.Errorf("%v; hits %d and %d, want 1 and 1", err, noLeader.hits.Load(), good.hits.Load())
			}
		})
	}
}

// TestClientRoundsBackOff: when every replica fails, the client goes over
// them Rounds times with growing, jittered pauses, never tries again a
// replica that timed out, and returns the last error.
func TestClientRoundsBackOff(t *testing.T) {
	noLeader := failing(t, 503, api.CodeNotLeader)
	unavail := failing(t, 503, api.CodeUnavailable)
	hang := hanging(t)
	var pauses []time.Duration
	addrs := []string{hang.url, noLeader.url, closedAddr(t), unavail.url}
	const seed = 7
	t.Logf("jitter seed %d", seed)
	cfg := api.ClientConfig{Addrs: addrs, Timeout: 200 * time.Millisecond, Rounds: 6,
		BackoffMin: 100 * time.Millisecond, BackoffMax: 500 * time.Millisecond, JitterSeed: seed,
		Sleep: func(ctx context.Context, d time.Duration) error { pauses = append(pauses, d); return nil }}
	c, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Nodes(context.Background())
	if api.ErrorCode(err) != api.CodeUnavailable {
		t.Fatalf("err = %v, want the last replica's unavailable", err)
	}
	if h, n, u := hang.hits.Load(), noLeader.hits.Load(), unavail.hits.Load(); h != 1 || n != 6 || u != 6 {
		t.Errorf("hits: hanging %d, not_leader %d, unavailable %d; want 1, 6, 6", h, n, u)
	}
	want := []time.Duration{100, 200, 400, 500, 500}
	if len(pauses) != len(want) {
		t.Fatalf("pauses %v, want %d", pauses, len(want))
	}
	for i, p := range pauses {
		w := want[i] * time.Millisecond
		if p < w/2 || p > w {
			t.Errorf("pause %d is %v, want from %v to %v", i+1, p, w/2, w)
		}
	}
	first := pauses

	// Every replica timed out: no pause, no second round.
	pauses = nil
	onlyHung := cfg
	onlyHung.Addrs = []string{hang.url}
	c5, err := api.NewClient(onlyHung)
	if err != nil {
		t.Fatal(err)
	}
	defer c5.Close()
	if _, err := c5.Nodes(context.Background()); !errors.Is(err, api.ErrTimeout) || hang.hits.Load() != 2 || len(pauses) != 0 {
		t.Errorf("a hanging replica alone: %v, %d requests in all, %d pauses; want ErrTimeout, 2, 0", err, hang.hits.Load(), len(pauses))
	}

	// The same seed draws the same pauses; the jitter is not constant.
	pauses = nil
	c2, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Nodes(context.Background()); err == nil {
		t.Fatal("no error")
	}
	if !slices.Equal(first, pauses) {
		t.Errorf("seed %d drew %v, then %v", seed, first, pauses)
	}
	if first[3] == first[4] {
		t.Errorf("pauses %v: no jitter", first)
	}

	// A context that ends during a pause ends the call with its error.
	ctx, cancel := context.WithCancel(context.Background())
	cfg.Addrs = []string{noLeader.url}
	cfg.Sleep = func(ctx context.Context, _ time.Duration) error { cancel(); return ctx.Err() }
	c3, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if _, err := c3.Nodes(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}

	// Ready is a probe: once over the replicas, no pause.
	pauses = nil
	before := noLeader.hits.Load()
	cfg.Addrs = []string{noLeader.url}
	cfg.Sleep = func(ctx context.Context, d time.Duration) error { pauses = append(pauses, d); return nil }
	c4, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c4.Close()
	if err := c4.Ready(context.Background()); err == nil || noLeader.hits.Load() != before+1 || len(pauses) != 0 {
		t.Errorf("Ready: %v, %d requests, %d pauses; want an error, 1, 0", err, noLeader.hits.Load()-before, len(pauses))
	}
}

// TestClientWaitsOutAnElection: replicas that know no leader for a while
// are asked again after pauses until one leads (the pauses stubbed: the
// third ends the election).
func TestClientWaitsOutAnElection(t *testing.T) {
	var elected atomic.Bool
	r := fakeReplica(t, func(ctx *fasthttp.RequestCtx) {
		if !elected.Load() {
			writeJSON(ctx, 503, api.ErrorResponse{Code: api.CodeNotLeader, Error: "no leader"})
			return
		}
		writeJSON(ctx, 200, api.SubmitResponse{Jobs: []string{"j1"}})
	})
	var rounds atomic.Int32
	c, err := api.NewClient(api.ClientConfig{Addrs: []string{r.url}, BackoffMin: time.Millisecond, BackoffMax: 4 * time.Millisecond, Rounds: 10,
		Sleep: func(ctx context.Context, d time.Duration) error {
			if rounds.Add(1) == 3 {
				elected.Store(true)
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Not safe to repeat, yet a not_leader did nothing: asked again.
	res, err := c.SubmitBody(context.Background(), []byte(`{}`), "", api.SubmitOptions{})
	if err != nil || len(res.Jobs) != 1 || r.hits.Load() != 4 {
		t.Errorf("submit: %+v, %v after %d requests; want j1 after 4", res, err, r.hits.Load())
	}
}

func TestNewClientValidatesBackoff(t *testing.T) {
	for _, cfg := range []api.ClientConfig{
		{Rounds: -1},
		{BackoffMin: -time.Second},
		{BackoffMin: time.Second, BackoffMax: time.Millisecond},
	} {
		cfg.Addrs = []string{"http://127.0.0.1:1"}
		if _, err := api.NewClient(cfg); err == nil {
			t.Errorf("NewClient(%+v) = nil error", cfg)
		}
	}
	// A minimum above the default maximum raises the maximum.
	if _, err := api.NewClient(api.ClientConfig{Addrs: []string{"http://127.0.0.1:1"}, BackoffMin: 3 * time.Second}); err != nil {
		t.Error(err)
	}
}
