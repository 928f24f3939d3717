package submitbench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/bench/fleet"
	"github.com/sluicehq/sluice/dispatcher"
)

// LatencyConfig says what Latency builds and measures.
type LatencyConfig struct {
	// Nodes is the simulated nodelets; Samples the single-task jobs
	// submitted one after another.
	Nodes, Samples int
	// Dir holds the dispatcher's data; empty means a temporary directory.
	Dir string
	// Timeout bounds the whole run. Default 2 minutes.
	Timeout time.Duration
}

// Validate reports everything wrong with c.
func (c LatencyConfig) Validate() error {
	var errs []error
	if c.Nodes < 1 {
		errs = append(errs, fmt.Errorf("nodes %d: want at least 1", c.Nodes))
	}
	if c.Samples < 1 {
		errs = append(errs, fmt.Errorf("samples %d: want at least 1", c.Samples))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %v: want 0 (default) or more", c.Timeout))
	}
	return errors.Join(errs...)
}

// LatencyResult is what Latency measured.
type LatencyResult struct {
	Nodes   int     `json:"nodes"`
	Samples int     `json:"samples"`
	P50Ms   float64 `json:"p50_ms"`
	P99Ms   float64 `json:"p99_ms"`
	MaxMs   float64 `json:"max_ms"`
}

// Latency runs the `sluice dev` shape (one replica, simulated nodelets
// connected over HTTP, each a real nodelet agent on its own simulated host:
// bench/fleet) and measures, for
// cfg.Samples single-task jobs submitted one at a time through the API,
// the time from sending the submit to the dispatcher's state showing the
// task running (the nodelet started it and its report is committed). The
// state is read from the replica in process, every 100µs.
func Latency(ctx context.Context, cfg LatencyConfig) (LatencyResult, error) {
	if err := cfg.Validate(); err != nil {
		return LatencyResult{}, fmt.Errorf("latency benchmark: %w", err)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	cl, err := StartCluster(ctx, 1, cfg.Dir, dispatcher.Config{})
	if err != nil {
		return LatencyResult{}, err
	}
	defer cl.Close()
	srv := cl.Servers[0]
	fl, err := fleet.Start(ctx, fleet.Config{Addrs: []string{srv.Addr()}, Nodes: cfg.Nodes, NamePrefix: "sim-"})
	if err != nil {
		return LatencyResult{}, fmt.Errorf("latency benchmark: %w", err)
	}
	defer fl.Close()
	c, err := api.NewClient(api.ClientConfig{Addrs: []string{srv.Addr()}})
	if err != nil {
		return LatencyResult{}, fmt.Errorf("latency benchmark: %w", err)
	}
	defer c.Close()
	job := api.JobSpec{Name: "probe", Tasks: []api.TaskGroupSpec{{Count: 1, Pod: api.PodSpec{
		Containers: []api.ContainerSpec{{Image: api.Image{Rootfs: "/img"}, Command: []string{"/probe"},
			Resources: api.Resources{CPU: 100, Memory: 16 << 20}}},
		Sim: &api.SimSpec{RunTime: api.Duration(50 * time.Millisecond)},
	}}}}
	lats := make([]time.Duration, 0, cfg.Samples)
	for range cfg.Samples {
		start := time.Now()
		res, err := c.Submit(ctx, []api.JobSpec{job}, api.SubmitOptions{})
		if err != nil {
			return LatencyResult{}, fmt.Errorf("latency benchmark: submit: %w", err)
		}
		for {
			ts, _ := srv.FSM().JobTasks(res.Jobs[0], "", 1)
			if len(ts) == 1 && (ts[0].State == api.TaskRunning || ts[0].State.Done()) {
				break
			}
			if err := ctx.Err(); err != nil {
				return LatencyResult{}, fmt.Errorf("latency benchmark: job %s never ran: %w", res.Jobs[0], err)
			}
			time.Sleep(100 * time.Microsecond)
		}
		lats = append(lats, time.Since(start))
	}
	slices.Sort(lats)
	return LatencyResult{
		Nodes: cfg.Nodes, Samples: cfg.Samples,
		P50Ms: ms(lats[len(lats)/2]), P99Ms: ms(lats[(len(lats)*99)/100]), MaxMs: ms(lats[len(lats)-1]),
	}, nil
}
