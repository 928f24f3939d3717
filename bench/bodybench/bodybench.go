package bodybench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/sluicehq/sluice/api"
)

// Config configures a run. Zero fields take their defaults.
type Config struct {
	// Exec is the sluice binary run as the dispatcher. Default: this
	// process's executable.
	Exec string
	// Conns is the slow phase's connections. Default 20.
	Conns int
	// Bombs is the bombs of the gzip and zstd phases, sent at once.
	// Default 20.
	Bombs int
	// Hold is how long the slow connections stay open. Default 3s.
	Hold time.Duration
	// Settle is how long after a phase's load the memory is read again.
	// Default 5s.
	Settle time.Duration
	// Phases are the phases to run, of "slow", "gzip" and "zstd".
	// Default all three.
	Phases []string
	// Dir holds the dispatchers' data. Default: a temporary directory,
	// removed.
	Dir string
}

// Validate reports every problem of c at once.
func (c *Config) Validate() error {
	var probs []string
	if c.Conns < 0 || c.Bombs < 0 || c.Hold < 0 || c.Settle < 0 {
		probs = append(probs, "Conns, Bombs, Hold and Settle must not be negative")
	}
	for _, p := range c.Phases {
		if p != "slow" && p != "gzip" && p != "zstd" {
			probs = append(probs, fmt.Sprintf("unknown phase %q (want slow, gzip or zstd)", p))
		}
	}
	if len(probs) > 0 {
		return fmt.Errorf("bodybench: %s", strings.Join(probs, "; "))
	}
	return nil
}

// Phase is one phase's measurement.
type Phase struct {
	Name string `json:"name"`
	// Requests is the connections or bombs of the load.
	Requests int `json:"requests"`
	// BeforeMB, PeakMB and AfterMB are the dispatcher's VmRSS before the
	// load, at its peak, and Settle after the load ended, in MB (10^6).
	BeforeMB float64 `json:"before_mb"`
	PeakMB   float64 `json:"peak_mb"`
	AfterMB  float64 `json:"after_mb"`
	// Statuses counts the answers by status: 0 is a connection that got
	// none (still waiting when the phase ended) or failed.
	Statuses map[int]int `json:"statuses"`
	// HealthzMaxMs is the slowest /healthz answer during the load.
	HealthzMaxMs float64 `json:"healthz_max_ms"`
}

// Result is a run's phases, in order.
type Result struct {
	Exec   string  `json:"exec"`
	Phases []Phase `json:"phases"`
}

const benchToken = "bodybench-admin"

// Run runs the phases of cfg.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if cfg.Exec == "" {
		exe, err := os.Executable()
		if err != nil {
			return Result{}, fmt.Errorf("bodybench: this executable: %w", err)
		}
		cfg.Exec = exe
	}
	if cfg.Conns == 0 {
		cfg.Conns = 20
	}
	if cfg.Bombs == 0 {
		cfg.Bombs = 20
	}
	if cfg.Hold == 0 {
		cfg.Hold = 3 * time.Second
	}
	if cfg.Settle == 0 {
		cfg.Settle = 5 * time.Second
	}
	if len(cfg.Phases) == 0 {
		cfg.Phases = []string{"slow", "gzip", "zstd"}
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "bodybench-")
		if err != nil {
			return Result{}, fmt.Errorf("bodybench: %w", err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(benchToken+" admin\n"), 0o600); err != nil {
		return Result{}, fmt.Errorf("bodybench: %w", err)
	}
	res := Result{Exec: cfg.Exec}
	for i, name := range cfg.Phases {
		p, err := runPhase(ctx, cfg, name, filepath.Join(dir, fmt.Sprintf("%d-%s", i, name)), tokens)
		if err != nil {
			return res, fmt.Errorf("bodybench: phase %s: %w", name, err)
		}
		res.Phases = append(res.Phases, p)
	}
	return res, nil
}

// dispatcher is a dispatcher process of a phase.
type dispatcher struct {
	cmd  *exec.Cmd
	addr string // host:port of its HTTP API
	done chan struct{}
}

func startDispatcher(ctx context.Context, exe, dir, tokens string) (*dispatcher, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	var stderr bytes.Buffer
	cmd := exec.Command(exe, "dispatcher", "--data", dir, "--http-addr", addr, "--token-file", tokens, "--log-level", "error")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", exe, err)
	}
	d := &dispatcher{cmd: cmd, addr: addr, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(d.done)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + api.PathReady)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d, nil
			}
		}
		select {
		case <-d.done:
			return nil, fmt.Errorf("the dispatcher exited: %s", strings.TrimSpace(stderr.String()))
		case <-ctx.Done():
			d.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.stop()
			return nil, errors.New("the dispatcher was not ready within 30s")
		}
	}
}

// stop ends the process and waits for it.
func (d *dispatcher) stop() {
	_ = d.cmd.Process.Kill()
	<-d.done
}

// rss returns the process's VmRSS in bytes.
func (d *dispatcher) rss() (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS in /proc/PID/status")
}

// sampler keeps the peak of a process's VmRSS, read every 10ms until
// stopped.
type sampler struct {
	stop, done chan struct{}
	peak       uint64
}

func sample(d *dispatcher) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			if v, err := d.rss(); err == nil {
				s.peak = max(s.peak, v)
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) end() uint64 {
	close(s.stop)
	<-s.done
	return s.peak
}

func mb(b uint64) float64 { return float64(b) / 1e6 }

func runPhase(ctx context.Context, cfg Config, name, dir, tokens string) (Phase, error) {
	var body []byte
	switch name {
	case "gzip", "zstd":
		b, err := Bomb(name, 128<<20)
		if err != nil {
			return Phase{}, err
		}
		body = b
	}
	d, err := startDispatcher(ctx, cfg.Exec, dir, tokens)
	if err != nil {
		return Phase{}, err
	}
	defer d.stop()
	p := Phase{Name: name, Statuses: map[int]int{}}
	before, err := d.rss()
	if err != nil {
		return p, err
	}
	p.BeforeMB = mb(before)
	s := sample(d)
	switch name {
	case "slow":
		p.Requests = cfg.Conns
		p.HealthzMaxMs, err = slowLoad(ctx, d.addr, cfg.Conns, cfg.Hold, p.Statuses)
	default:
		p.Requests = cfg.Bombs
		p.HealthzMaxMs, err = bombLoad(ctx, d.addr, name, body, cfg.Bombs, p.Statuses)
	}
	if err != nil {
		s.end()
		return p, err
	}
	select {
	case <-time.After(cfg.Settle):
	case <-ctx.Done():
		s.end()
		return p, ctx.Err()
	}
	p.PeakMB = mb(s.end())
	after, err := d.rss()
	if err != nil {
		return p, err
	}
	p.AfterMB = mb(after)
	return p, nil
}

// Bomb returns n zero bytes compressed with enc (gzip or zstd).
func Bomb(enc string, n int) ([]byte, error) {
	var buf bytes.Buffer
	var w io.WriteCloser
	if enc == "gzip" {
		w = gzip.NewWriter(&buf)
	} else {
		zw, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		w = zw
	}
	chunk := make([]byte, 1<<20)
	for ; n > 0; n -= len(chunk) {
		if _, err := w.Write(chunk[:min(n, len(chunk))]); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// healthz times one GET /healthz on a new connection, in milliseconds.
func healthz(addr string) float64 {
	start := time.Now()
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get("http://" + addr + api.PathHealth)
	if err != nil {
		return float64(30 * time.Second / time.Millisecond)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return float64(time.Since(start).Microseconds()) / 1000
}

// slowLoad opens n connections that declare the largest body, send 64 KiB
// of it and stall, half with the admin token; it holds them for hold,
// timing /healthz meanwhile, then closes them. It counts the answers
// that came in statuses.
func slowLoad(ctx context.Context, addr string, n int, hold time.Duration, statuses map[int]int) (float64, error) {
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	prefix := append([]byte("["), bytes.Repeat([]byte(" "), 64<<10-1)...)
	for i := range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return 0, err
		}
		conns = append(conns, c)
		auth := ""
		if i%2 == 1 {
			auth = "Authorization: Bearer " + benchToken + "\r\n"
		}
		head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: sluice\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n", api.PathJobs, auth, api.MaxBodyBytes)
		if _, err := c.Write(append([]byte(head), prefix...)); err != nil {
			return 0, err
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	deadline := time.Now().Add(hold)
	for _, c := range conns {
		wg.Go(func() {
			_ = c.SetReadDeadline(deadline)
			status := 0
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				status = resp.StatusCode
				resp.Body.Close()
			}
			mu.Lock()
			statuses[status]++
			mu.Unlock()
		})
	}
	var slowest float64
	for time.Now().Before(deadline) && ctx.Err() == nil {
		slowest = max(slowest, healthz(addr))
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	wg.Wait()
	return slowest, ctx.Err()
}

// bombLoad posts n copies of body, compressed with enc, at once, timing
// /healthz meanwhile; it counts the answers in statuses.
func bombLoad(ctx context.Context, addr, enc string, body []byte, n int, statuses map[int]int) (float64, error) {
	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			status := 0
			req, err := http.NewRequestWithContext(ctx, "POST", "http://"+addr+api.PathJobs, bytes.NewReader(body))
			if err == nil {
				req.Header.Set("Authorization", "Bearer "+benchToken)
				req.Header.Set("Content-Encoding", enc)
				var resp *http.Response
				if resp, err = client.Do(req); err == nil {
					status = resp.StatusCode
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
			mu.Lock()
			statuses[status]++
			mu.Unlock()
		})
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	var slowest float64
	for {
		slowest = max(slowest, healthz(addr))
		select {
		case <-done:
			return slowest, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// StatusText renders statuses as "401×10 503×6".
func StatusText(statuses map[int]int) string {
	codes := make([]int, 0, len(statuses))
	for c := range statuses {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var parts []string
	for _, c := range codes {
		name := strconv.Itoa(c)
		if c == 0 {
			name = "none"
		}
		parts = append(parts, fmt.Sprintf("%s×%d", name, statuses[c]))
	}
	return strings.Join(parts, " ")
}
