package schedbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/bench/storebench"
	"github.com/sluicehq/sluice/dispatcher"
	"github.com/sluicehq/sluice/dispatcher/fsm"
	"github.com/sluicehq/sluice/raftkv"
)

// Config says what Run builds and submits.
type Config struct {
	Nodes, Tasks, Replicas int
	// Seed chooses the workload.
	Seed uint64
	// Dir holds the replicas' data; empty means a temporary directory,
	// removed afterwards.
	Dir string
	// Timeout bounds the whole run. Default 5 minutes.
	Timeout time.Duration
}

// Validate reports what is wrong with c.
func (c Config) Validate() error {
	var errs []error
	if c.Nodes < 1 {
		errs = append(errs, fmt.Errorf("nodes %d: want at least 1", c.Nodes))
	}
	if c.Tasks < 1 {
		errs = append(errs, fmt.Errorf("tasks %d: want at least 1", c.Tasks))
	}
	if c.Replicas < 1 || c.Replicas > 7 {
		errs = append(errs, fmt.Errorf("replicas %d: want 1 to 7", c.Replicas))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %v: want 0 (default) or more", c.Timeout))
	}
	return errors.Join(errs...)
}

// Result is what one run measured; its JSON is the benchmark's --json
// output.
type Result struct {
	Nodes               int     `json:"nodes"`
	Tasks               int     `json:"tasks"`
	Jobs                int     `json:"jobs"`
	Replicas            int     `json:"replicas"`
	PlacementsPerSec    float64 `json:"placements_per_sec"`
	RoundP50Ms          float64 `json:"round_p50_ms"`
	RoundP99Ms          float64 `json:"round_p99_ms"`
	SolverShare         float64 `json:"solver_share"`
	BytesPerPendingTask float64 `json:"bytes_per_pending_task"`
	Rounds              int     `json:"rounds"`
	Seconds             float64 `json:"seconds"`
}

// Run builds the cluster, registers cfg.Nodes nodes, submits cfg.Tasks
// tasks and waits until every one is placed.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, fmt.Errorf("sched benchmark: %w", err)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "sluice-bench-sched-")
		if err != nil {
			return Result{}, fmt.Errorf("sched benchmark: %w", err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	c, err := startCluster(ctx, dir, cfg.Replicas)
	if err != nil {
		return Result{}, err
	}
	defer c.close()
	d := c.leader
	if err := register(ctx, d, cfg.Nodes); err != nil {
		return Result{}, err
	}
	// Let the registration rounds settle; measure from the first submit.
	time.Sleep(50 * time.Millisecond)
	before := d.Totals()
	specs := workload(cfg.Seed, cfg.Tasks)
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	for i := 0; i < len(specs); i += 100 {
		if _, _, err := d.Submit(ctx, specs[i:min(i+100, len(specs))]); err != nil {
			return Result{}, fmt.Errorf("submit: %w", err)
		}
	}
	runtime.ReadMemStats(&m1)
	for d.Totals().Placed-before.Placed < int64(cfg.Tasks) {
		if err := ctx.Err(); err != nil {
			return Result{}, fmt.Errorf("placed %d of %d tasks before the timeout: %w", d.Totals().Placed-before.Placed, cfg.Tasks, err)
		}
		time.Sleep(time.Millisecond)
	}
	el := time.Since(start)
	var rounds []dispatcher.RoundStat
	for _, r := range d.Rounds() {
		if r.Placed > 0 && r.Nodes == cfg.Nodes && !r.At.Before(start) {
			rounds = append(rounds, r)
		}
	}
	res := Result{
		Nodes: cfg.Nodes, Tasks: cfg.Tasks, Jobs: len(specs), Replicas: cfg.Replicas,
		PlacementsPerSec:    float64(cfg.Tasks) / el.Seconds(),
		BytesPerPendingTask: float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(cfg.Tasks),
		Rounds:              len(rounds),
		Seconds:             el.Seconds(),
	}
	p50, p99, share := dispatcher.Percentiles(rounds)
	res.RoundP50Ms, res.RoundP99Ms, res.SolverShare = ms(p50), ms(p99), share
	return res, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// workload returns job specs holding tasks tasks: mostly arrays of up to
// 200, a quarter up to 10,000, of four CPU shapes, a third online.
func workload(seed uint64, tasks int) []api.JobSpec {
	r := rand.New(rand.NewPCG(seed, 2))
	shapes := []int64{250, 500, 1000, 2000}
	var specs []api.JobSpec
	for left := tasks; left > 0; {
		n := min(left, 1+r.IntN(10_000))
		if r.IntN(4) > 0 {
			n = min(left, 1+r.IntN(200))
		}
		cpu := shapes[r.IntN(len(shapes))]
		s := api.JobSpec{
			Name: fmt.Sprint("j", len(specs)), Priority: int32(r.IntN(5)),
			Tasks: []api.TaskGroupSpec{{Count: int64(n), Pod: api.PodSpec{
				Containers: []api.ContainerSpec{{Image: api.Image{Rootfs: "/rootfs"}, Command: []string{"/bin/true"},
					Resources: api.Resources{CPU: cpu, Memory: cpu << 20}}},
				Sim: &api.SimSpec{RunTime: api.Duration(time.Hour)},
			}}},
		}
		if r.IntN(3) == 0 {
			s.QoS = api.QoSOnline
		}
		specs = append(specs, s)
		left -= n
	}
	return specs
}

// register registers nodes nodes of 64 cores, 64 at a time.
func register(ctx context.Context, d *dispatcher.Dispatcher, nodes int) error {
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	sem := make(chan struct{}, 64)
	for i := range nodes {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			capacity := api.Capacity{CPU: 64_000, Memory: 64_000 << 20, Disk: 1 << 40, Ports: 1000}
			spec := api.NodeSpec{Name: fmt.Sprintf("n%05d", i), Capacity: capacity, Allocatable: api.Allocatable{Online: capacity, Offline: capacity},
				Ports: api.PortRange{Lo: 20000, Hi: 20999}}
			if err := d.Register(ctx, spec); err != nil {
				select {
				case errc <- fmt.Errorf("register %s: %w", spec.Name, err):
				default:
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// cluster is the replicas, each a raftkv node with its FSM and dispatcher.
type cluster struct {
	kvs    []*raftkv.Node
	ds     []*dispatcher.Dispatcher
	leader *dispatcher.Dispatcher
}

func startCluster(ctx context.Context, dir string, n int) (*cluster, error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ports, err := storebench.FreePorts(n)
	if err != nil {
		return nil, err
	}
	peers := map[uint64]string{}
	for i, port := range ports {
		peers[uint64(i+1)] = fmt.Sprintf("127.0.0.1:%d", port)
	}
	c := &cluster{}
	for i := range n {
		id := uint64(i + 1)
		var tr raftkv.Transport
		if n > 1 {
			t, err := raftkv.NewTCPTransport(raftkv.TCPConfig{ID: id, ListenAddr: peers[id], Peers: peers, Logger: quiet})
			if err != nil {
				c.close()
				return nil, fmt.Errorf("replica %d: %w", id, err)
			}
			tr = t
		}
		f := fsm.New()
		kv, err := raftkv.Open(raftkv.Config{ID: id, Dir: filepath.Join(dir, fmt.Sprint("r", id)), Peers: peers,
			Transport: tr, StateMachine: f, Logger: quiet})
		if err != nil {
			if tr != nil {
				_ = tr.Close()
			}
			c.close()
			return nil, fmt.Errorf("replica %d: %w", id, err)
		}
		c.kvs = append(c.kvs, kv)
		d, err := dispatcher.New(dispatcher.Config{Raft: kv, FSM: f, Period: time.Hour, NodeTTL: time.Hour, Logger: quiet})
		if err != nil {
			c.close()
			return nil, fmt.Errorf("replica %d: %w", id, err)
		}
		c.ds = append(c.ds, d)
	}
	deadline := time.Now().Add(30 * time.Second)
	for c.leader == nil {
		for _, d := range c.ds {
			if _, ok := d.Leading(); ok {
				c.leader = d
			}
		}
		if c.leader != nil {
			break
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			c.close()
			return nil, errors.New("no scheduling loop started within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return c, nil
}

func (c *cluster) close() {
	for _, d := range c.ds {
		_ = d.Close()
	}
	for _, kv := range c.kvs {
		_ = kv.Close()
	}
}
