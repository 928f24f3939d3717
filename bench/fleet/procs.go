package fleet

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

// ProcStopGrace is how long a fleet process has to stop its agents after
// SIGINT before it is killed.
const ProcStopGrace = 10 * time.Second

// ProcsConfig says what StartProcs starts.
type ProcsConfig struct {
	// Exec is the sluice binary, run as `Exec loadgen fleet`.
	Exec string
	// Procs is the processes, Nodes the nodes split between them (the
	// first Nodes%Procs one more), each process's named with the suffix
	// -pK.
	Procs, Nodes int
	// Addrs are the dispatchers' addresses, with or without http://.
	Addrs []string
	// Pool is the nodes' pool.
	Pool string
	// Args are more flags of `loadgen fleet`, such as --cpu or
	// --heartbeat.
	Args []string
	// MemoryLimit is each process's GOMEMLIMIT in bytes; 0 leaves this
	// process's environment as it is.
	MemoryLimit int64
	// Owner names the caller in errors, such as "e2e benchmark".
	Owner string
}

// StartProcs starts cfg.Procs processes of `cfg.Exec loadgen fleet`. It
// returns a context derived from ctx that a process exiting before stop
// ends, with the exit as its cause; a function that stops them all
// (SIGINT, then SIGKILL after ProcStopGrace; it may be called more than
// once); and their PIDs. The processes' stderr is this process's, and
// each dies with this process (Pdeathsig).
func StartProcs(ctx context.Context, cfg ProcsConfig) (context.Context, func(), []int, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	urls := make([]string, len(cfg.Addrs))
	for i, a := range cfg.Addrs {
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
				case <-time.After(ProcStopGrace):
					_ = c.Process.Kill()
				}
			}
			wg.Wait()
			cancel(nil)
		})
	}
	for i := range cfg.Procs {
		n := cfg.Nodes / cfg.Procs
		if i < cfg.Nodes%cfg.Procs {
			n++
		}
		if n == 0 {
			continue
		}
		args := append([]string{"loadgen", "fleet", "--nodes", strconv.Itoa(n), "--addr", strings.Join(urls, ","), "--pool", cfg.Pool,
			"--name-prefix", "fleet-", "--name-suffix", fmt.Sprintf("-p%d", i+1), "--every", "1h"}, cfg.Args...)
		c := exec.Command(cfg.Exec, args...)
		c.Env = ProcEnv(os.Environ(), cfg.MemoryLimit)
		c.Stderr = os.Stderr
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := c.Start(); err != nil {
			stop()
			return nil, nil, nil, fmt.Errorf("%s: start fleet process %d: %w", cfg.Owner, i+1, err)
		}
		ch := make(chan struct{})
		cmds, done = append(cmds, c), append(done, ch)
		wg.Go(func() {
			err := c.Wait()
			close(ch)
			select {
			case <-stopping:
			default:
				cancel(fmt.Errorf("%s: fleet process %d (%d nodes) exited early: %v", cfg.Owner, i+1, n, err))
			}
		})
	}
	pids := make([]int, len(cmds))
	for i, c := range cmds {
		pids[i] = c.Process.Pid
	}
	return ctx, stop, pids, nil
}

// ProcEnv is a fleet process's environment: env, with GOMEMLIMIT set to
// limit bytes when limit is above 0.
func ProcEnv(env []string, limit int64) []string {
	if limit <= 0 {
		return env
	}
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "GOMEMLIMIT=") })
	return append(env, "GOMEMLIMIT="+strconv.FormatInt(limit, 10))
}
