package chaosbench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/api"
)

// ErrNoLeader is returned when the replicas agree on no leader in time.
var ErrNoLeader = errors.New("chaosbench: no agreed leader")

// proc is one run of a child process. done closes when it has been
// waited for, after which err is its exit.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// startProc starts exe with args and env, its output appended to logPath
// (and its stdout, when stdout is not nil, piped to it instead). The
// child is killed if this process dies (Pdeathsig).
func startProc(exe string, args, env []string, logPath string, stdout func(io.Reader)) (*proc, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("chaosbench: open log: %w", err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = env
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var pipe io.ReadCloser
	if stdout != nil {
		if pipe, err = cmd.StdoutPipe(); err != nil {
			log.Close()
			return nil, fmt.Errorf("chaosbench: stdout pipe: %w", err)
		}
	} else {
		cmd.Stdout = log
	}
	fmt.Fprintf(log, "--- chaosbench %s: %s %s\n", time.Now().UTC().Format(time.RFC3339Nano), exe, strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("chaosbench: start %s: %w", args[0], err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		if pipe != nil {
			stdout(pipe) // reads until the process's stdout closes
		}
		p.err = cmd.Wait()
		fmt.Fprintf(log, "--- chaosbench %s: exited: %v\n", time.Now().UTC().Format(time.RFC3339Nano), p.err)
		log.Close()
		close(p.done)
	}()
	return p, nil
}

// kill sends SIGKILL and waits for the process.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGINT and waits up to grace, then kills.
func (p *proc) stop(grace time.Duration) {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.kill()
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// replica is one dispatcher replica: its addresses, data directory and
// current process (nil while down).
type replica struct {
	id       int
	raftAddr string // where it listens for raft
	httpAddr string
	base     string // "http://" + httpAddr
	dir      string // data directory
	tmpfs    bool   // dir is a tmpfs this package mounted
	syncFile string // its --fault-sync-delay-file
	args     []string
	p        *proc
}

func (r *replica) up() bool { return r.p != nil && !r.p.exited() }

// freePorts returns n distinct free ports of host.
func freePorts(host string, n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	out := make([]int, n)
	for i := range out {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("chaosbench: free port: %w", err)
		}
		lns = append(lns, l)
		out[i] = l.Addr().(*net.TCPAddr).Port
	}
	return out, nil
}

// childEnv is the environment of the children: base without SLUICE_*
// settings (the command line gives them all).
func childEnv(base []string) []string {
	var out []string
	for _, kv := range base {
		if !strings.HasPrefix(kv, "SLUICE_") {
			out = append(out, kv)
		}
	}
	return out
}

// mountTmpfs mounts a tmpfs of size bytes on dir.
func mountTmpfs(dir string, size int64) error {
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d", size)); err != nil {
		return fmt.Errorf("chaosbench: mount a tmpfs on %s: %w", dir, err)
	}
	return nil
}

// fillerName is the file that fills a replica's tmpfs.
const fillerName = "chaos-filler"

// fill writes zeros to dir's filler file until the file system is full.
func fill(dir string) error {
	f, err := os.OpenFile(filepath.Join(dir, fillerName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("chaosbench: fill %s: %w", dir, err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for range 1 << 16 { // at most 64 GiB: a tmpfs is far smaller
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return nil
			}
			return fmt.Errorf("chaosbench: fill %s: %w", dir, err)
		}
	}
	return fmt.Errorf("chaosbench: fill %s: not full after 64 GiB", dir)
}

// unfill removes what fill wrote.
func unfill(dir string) error {
	if err := os.Remove(filepath.Join(dir, fillerName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("chaosbench: unfill %s: %w", dir, err)
	}
	return nil
}

// waitReady waits until every replica that is up answers /readyz with 200
// (it knows a leader), or ctx ends.
func waitReady(ctx context.Context, reps []*replica) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	for _, r := range reps {
		if !r.up() {
			continue
		}
		for {
			err := httpProbe(ctx, hc, http.MethodGet, r.base+"/readyz", http.StatusOK)
			if err == nil {
				break
			}
			if r.p.exited() {
				return fmt.Errorf("chaosbench: replica %d exited before it was ready: %v", r.id, r.p.err)
			}
			if ctx.Err() != nil {
				return fmt.Errorf("chaosbench: replica %d not ready: %w", r.id, err)
			}
			sleepCtx(ctx, 50*time.Millisecond)
		}
	}
	return nil
}

func httpProbe(ctx context.Context, hc *http.Client, method, url string, want int) error {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %s", method, url, resp.Status)
	}
	return nil
}

// findLeader returns the replica that leads as every replica that is up
// says: a write reaching a follower is answered 307 to the leader, and
// the leader answers a submit of an unsupported content type 415 without
// doing anything.
func findLeader(ctx context.Context, reps []*replica) (*replica, error) {
	hc := &http.Client{
		Timeout:       2 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	defer hc.CloseIdleConnections()
	last := "nothing asked"
	for ctx.Err() == nil {
		votes := map[string]int{}
		var leading []*replica
		up := 0
		for _, r := range reps {
			if !r.up() {
				continue
			}
			up++
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+api.PathJobs, strings.NewReader("probe"))
			if err != nil {
				return nil, err
			}
			req.Header.Set("Content-Type", "text/plain")
			resp, err := hc.Do(req)
			if err != nil {
				continue
			}
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusTemporaryRedirect:
				votes[strings.TrimSuffix(resp.Header.Get("Location"), api.PathJobs)]++
			case http.StatusUnsupportedMediaType:
				leading = append(leading, r)
			}
		}
		if len(leading) == 1 && votes[leading[0].base] == up-1 {
			return leading[0], nil
		}
		last = fmt.Sprintf("%d replicas up, %d say they lead, followers name %v", up, len(leading), votes)
		sleepCtx(ctx, 50*time.Millisecond)
	}
	return nil, fmt.Errorf("%w: %s (%w)", ErrNoLeader, last, ctx.Err())
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// fleetProc is one `sluice loadgen fleet` process.
type fleetProc struct {
	idx    int
	args   []string
	podLog string // the pod log's path (bench/fleet's PodLog)
	p      *proc
}

// readRegistered reads a fleet process's stdout to its end and closes
// registered when the process says its nodes registered.
func readRegistered(r io.Reader, registered chan<- struct{}) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "simulated nodes registered") {
			close(registered)
			break
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

func itoa(i int) string { return strconv.Itoa(i) }
