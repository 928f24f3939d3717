package submitbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/bench/storebench"
	"github.com/sluicehq/sluice/dispatcher"
	"github.com/sluicehq/sluice/dispatcher/server"
)

// Config says what Run builds and posts.
type Config struct {
	// Replicas is the cluster's size; Clients the concurrent clients, each
	// posting one request at a time of JobsPerRequest jobs; Requests the
	// requests in all.
	Replicas, Clients, JobsPerRequest, Requests int
	// Encoding compresses the bodies: "", "gzip" or "zstd".
	Encoding string
	// Dir holds the replicas' data; empty means a temporary directory,
	// removed afterwards.
	Dir string
	// Timeout bounds the whole run. Default 5 minutes.
	Timeout time.Duration
}

// Validate reports everything wrong with c.
func (c Config) Validate() error {
	var errs []error
	if c.Replicas < 1 || c.Replicas > 7 {
		errs = append(errs, fmt.Errorf("replicas %d: want 1 to 7", c.Replicas))
	}
	if c.Clients < 1 {
		errs = append(errs, fmt.Errorf("clients %d: want at least 1", c.Clients))
	}
	if c.JobsPerRequest < 1 || c.JobsPerRequest > api.MaxItemsPerRequest {
		errs = append(errs, fmt.Errorf("jobs per request %d: want 1 to %d", c.JobsPerRequest, api.MaxItemsPerRequest))
	}
	if c.Requests < max(1, c.Clients) {
		errs = append(errs, fmt.Errorf("requests %d: want at least one per client (%d)", c.Requests, c.Clients))
	}
	if c.Encoding != "" && c.Encoding != "gzip" && c.Encoding != "zstd" {
		errs = append(errs, fmt.Errorf("encoding %q: want none, gzip or zstd", c.Encoding))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %v: want 0 (default) or more", c.Timeout))
	}
	return errors.Join(errs...)
}

// Result is what one run measured; its JSON is `sluice bench submit
// --json`'s output.
type Result struct {
	Replicas       int     `json:"replicas"`
	Clients        int     `json:"clients"`
	JobsPerRequest int     `json:"jobs_per_request"`
	Encoding       string  `json:"encoding"`
	Jobs           int     `json:"jobs"`
	JobsPerSec     float64 `json:"jobs_per_sec"`
	P50Ms          float64 `json:"p50_ms"`
	P99Ms          float64 `json:"p99_ms"`
	BodyBytes      int     `json:"body_bytes"`
	Seconds        float64 `json:"seconds"`
}

// Cluster is a dispatcher cluster of real replicas (pebble on disk, raft
// over loopback TCP, the fasthttp API) for benchmarks.
type Cluster struct {
	Servers []*server.Server
	dir     string
	temp    bool
}

// StartCluster starts n replicas under dir (a temporary directory when
// empty), their dispatchers tuned by disp (the zero Config: defaults), and
// waits for a leader. Each of set, in order, changes every replica's
// configuration before it opens.
func StartCluster(ctx context.Context, n int, dir string, disp dispatcher.Config, set ...func(*server.Config)) (*Cluster, error) {
	c := &Cluster{dir: dir}
	if dir == "" {
		d, err := os.MkdirTemp("", "sluice-submitbench-")
		if err != nil {
			return nil, fmt.Errorf("submit benchmark: %w", err)
		}
		c.dir, c.temp = d, true
	}
	ports, err := storebench.FreePorts(2 * n)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("submit benchmark: %w", err)
	}
	peers, web := map[uint64]string{}, map[uint64]string{}
	for i := range n {
		id := uint64(i + 1)
		peers[id] = fmt.Sprintf("127.0.0.1:%d", ports[2*i])
		if n == 1 {
			peers[id] = ""
		}
		web[id] = fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1])
	}
	// The replicas share the process's descriptors, so they share a
	// connection limit that keeps each one's reserve.
	conns, err := server.ConnLimitFor(n)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("submit benchmark: %w", err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for i := range n {
		id := uint64(i + 1)
		scfg := server.Config{
			ID: id, Peers: peers, PeerHTTP: web, Dir: filepath.Join(c.dir, fmt.Sprint("r", id)),
			HTTPAddr: strings.TrimPrefix(web[id], "http://"), Logger: quiet, Dispatcher: disp, Conns: conns,
		}
		for _, f := range set {
			f(&scfg)
		}
		s, err := server.Open(scfg)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("submit benchmark: replica %d: %w", id, err)
		}
		c.Servers = append(c.Servers, s)
	}
	if _, err := c.Leader(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Leader waits until a replica leads and returns it.
func (c *Cluster) Leader(ctx context.Context) (*server.Server, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		for _, s := range c.Servers {
			if _, ok := s.Dispatcher().Leading(); ok {
				return s, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("submit benchmark: no leader: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Addrs returns the replicas' base URLs.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		out[i] = s.Addr()
	}
	return out
}

// Close stops every replica and removes a temporary directory.
func (c *Cluster) Close() {
	for _, s := range c.Servers {
		_ = s.Close()
	}
	if c.temp {
		_ = os.RemoveAll(c.dir)
	}
}

// Body returns a JSON array of n one-task jobs, as a bulk client sends.
func Body(n int) []byte {
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"bench-%d","queue":"q%d","tasks":[{"count":1,"pod":{"containers":[{"image":{"rootfs":"/img"},"command":["/bin/work","%d"],"resources":{"cpu":"100m","memory":"64Mi"}}],"sim":{"run_time":"1s"}}}]}`, i, i%4, i)
	}
	b.WriteByte(']')
	return []byte(b.String())
}

// Run starts the cluster and posts cfg.Requests requests from cfg.Clients
// clients to it; every request must be acknowledged.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, fmt.Errorf("submit benchmark: %w", err)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	cl, err := StartCluster(ctx, cfg.Replicas, cfg.Dir, dispatcher.Config{})
	if err != nil {
		return Result{}, err
	}
	defer cl.Close()
	leader, err := cl.Leader(ctx)
	if err != nil {
		return Result{}, err
	}
	body := Body(cfg.JobsPerRequest)
	var (
		next  atomic.Int64
		mu    sync.Mutex
		lats  = make([]time.Duration, 0, cfg.Requests)
		first error
		wg    sync.WaitGroup
	)
	start := time.Now()
	for range cfg.Clients {
		c, err := api.NewClient(api.ClientConfig{Addrs: []string{leader.Addr()}})
		if err != nil {
			return Result{}, fmt.Errorf("submit benchmark: %w", err)
		}
		defer c.Close()
		wg.Go(func() {
			for ctx.Err() == nil && next.Add(1) <= int64(cfg.Requests) {
				t := time.Now()
				res, err := c.SubmitBody(ctx, body, "application/json", api.SubmitOptions{Encoding: cfg.Encoding})
				d := time.Since(t)
				if err == nil && len(res.Jobs) != cfg.JobsPerRequest {
					err = fmt.Errorf("%d job IDs for %d jobs", len(res.Jobs), cfg.JobsPerRequest)
				}
				mu.Lock()
				lats = append(lats, d)
				if err != nil && first == nil {
					first = err
					cancel()
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if first != nil {
		return Result{}, fmt.Errorf("submit benchmark: %w", first)
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("submit benchmark: %w", err)
	}
	slices.Sort(lats)
	jobs := cfg.Requests * cfg.JobsPerRequest
	return Result{
		Replicas: cfg.Replicas, Clients: cfg.Clients, JobsPerRequest: cfg.JobsPerRequest, Encoding: cfg.Encoding,
		Jobs: jobs, JobsPerSec: float64(jobs) / took.Seconds(), BodyBytes: len(body),
		P50Ms: ms(lats[len(lats)/2]), P99Ms: ms(lats[(len(lats)*99)/100]), Seconds: took.Seconds(),
	}, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
