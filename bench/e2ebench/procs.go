package e2ebench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// fleetStopGrace is how long a fleet process has to stop its agents after
// SIGINT before it is killed.
const fleetStopGrace = 10 * time.Second

// startFleetProcs starts cfg.FleetProcs processes of `cfg.FleetExec
// loadgen fleet`, cfg.Nodes nodes split between them (each its own name
// prefix), against addrs. It returns a context derived from ctx that a
// process exiting before stop ends, with the exit as its cause, and a
// function that stops them all: SIGINT, then SIGKILL after
// fleetStopGrace, and their PIDs. The processes' stderr is this
// process's.
func startFleetProcs(ctx context.Context, cfg Config, addrs []string) (context.Context, func(), []int, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	urls := make([]string, len(addrs))
	for i, a := range addrs {
		urls[i] = "http://" + strings.TrimPrefix(a, "http://")
	}
	var (
		cmds     []*exec.Cmd
		done     []chan struct{}
		wg       sync.WaitGroup
		stopping = make(chan struct{})
	)
	stop := func() {
		close(stopping)
		for i, c := range cmds {
			_ = c.Process.Signal(os.Interrupt)
			select {
			case <-done[i]:
			case <-time.After(fleetStopGrace):
				_ = c.Process.Kill()
			}
		}
		wg.Wait()
		cancel(nil)
	}
	for i := range cfg.FleetProcs {
		n := cfg.Nodes / cfg.FleetProcs
		if i < cfg.Nodes%cfg.FleetProcs {
			n++
		}
		if n == 0 {
			continue
		}
		c := exec.Command(cfg.FleetExec, "loadgen", "fleet",
			"--nodes", strconv.Itoa(n), "--addr", strings.Join(urls, ","), "--pool", Pool,
			"--name-prefix", "fleet-", "--name-suffix", fmt.Sprintf("-p%d", i+1), "--every", "1h")
		c.Env = fleetEnv(os.Environ(), cfg.FleetMemoryLimit)
		c.Stderr = os.Stderr
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := c.Start(); err != nil {
			stop()
			return nil, nil, nil, fmt.Errorf("e2e benchmark: start fleet process %d: %w", i+1, err)
		}
		ch := make(chan struct{})
		cmds, done = append(cmds, c), append(done, ch)
		wg.Go(func() {
			err := c.Wait()
			close(ch)
			select {
			case <-stopping:
			default:
				cancel(fmt.Errorf("e2e benchmark: fleet process %d (%d nodes) exited early: %v", i+1, n, err))
			}
		})
	}
	pids := make([]int, len(cmds))
	for i, c := range cmds {
		pids[i] = c.Process.Pid
	}
	return ctx, stop, pids, nil
}

// fleetEnv is a fleet process's environment: env, with GOMEMLIMIT set to
// limit bytes when limit is above 0.
func fleetEnv(env []string, limit int64) []string {
	if limit <= 0 {
		return env
	}
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "GOMEMLIMIT=") })
	return append(env, "GOMEMLIMIT="+strconv.FormatInt(limit, 10))
}
