package overcommitbench

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
// suffix), against addrs, their nodes sending heartbeats every
// cfg.HeartbeatPeriod. It returns a context derived from ctx that a
// process exiting before stop ends, with the exit as its cause, and a
// function that stops them all: SIGINT, then SIGKILL after
// fleetStopGrace. The processes' stderr is this process's.
func startFleetProcs(ctx context.Context, cfg FleetConfig, addrs []string) (context.Context, func(), error) {
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
		once     sync.Once
	)
	stop := func() {
		once.Do(func() {
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
		})
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
			"--nodes", strconv.Itoa(n), "--addr", strings.Join(urls, ","), "--pool", FleetPool,
			"--cpu", strconv.FormatInt(cfg.NodeCPU, 10)+"m", "--memory", strconv.FormatInt(cfg.NodeMemory, 10),
			"--heartbeat", cfg.HeartbeatPeriod.String(),
			"--name-prefix", "fleet-", "--name-suffix", fmt.Sprintf("-p%d", i+1), "--every", "1h")
		c.Env = os.Environ()
		if cfg.FleetMemoryLimit > 0 {
			c.Env = slices.DeleteFunc(c.Env, func(kv string) bool { return strings.HasPrefix(kv, "GOMEMLIMIT=") })
			c.Env = append(c.Env, "GOMEMLIMIT="+strconv.FormatInt(cfg.FleetMemoryLimit, 10))
		}
		c.Stderr = os.Stderr
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := c.Start(); err != nil {
			stop()
			return nil, nil, fmt.Errorf("overcommit fleet benchmark: start fleet process %d: %w", i+1, err)
		}
		ch := make(chan struct{})
		cmds, done = append(cmds, c), append(done, ch)
		wg.Go(func() {
			err := c.Wait()
			close(ch)
			select {
			case <-stopping:
			default:
				cancel(fmt.Errorf("overcommit fleet benchmark: fleet process %d (%d nodes) exited early: %v", i+1, n, err))
			}
		})
	}
	return ctx, stop, nil
}
