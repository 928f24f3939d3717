package storebench

import (
	"bytes"
	"context"
	"encoding/json"
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

	"github.com/sluicehq/sluice/bench/helperbin"
)

// ErrNoEtcd says the etcd binary is not installed.
var ErrNoEtcd = errors.New("etcd is not installed (Debian: apt-get install etcd-server)")

// ErrNoEtcdDriver says the etcd load driver is not built.
var ErrNoEtcdDriver = errors.New("the etcd load driver is not built (make etcdload puts it in bin/etcdload, beside bin/sluice)")

// EtcdDriverName is the file name of the etcd load driver (cmd/etcdload).
const EtcdDriverName = "etcdload"

// Etcd is a local etcd cluster started for a benchmark.
type Etcd struct {
	procs   []*exec.Cmd
	exited  []chan error
	Members []string // client URLs
}

// StartEtcd starts an etcd cluster of members processes on loopback, each
// with its data directory under dir and its log in dir/NAME.log, and waits
// until every member reports itself healthy (it has a leader). Close stops
// it.
func StartEtcd(ctx context.Context, dir string, members int) (*Etcd, error) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return nil, ErrNoEtcd
	}
	if members < 1 {
		return nil, fmt.Errorf("start etcd: %d members: want at least 1", members)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	ports, err := FreePorts(2 * members)
	if err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	var initial []string
	for i := range members {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, ports[2*i+1]))
	}
	e := &Etcd{}
	for i := range members {
		name := fmt.Sprintf("m%d", i)
		client := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i])
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1])
		logf, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("start etcd: %w", err)
		}
		cmd := exec.Command(bin,
			"--name", name,
			"--data-dir", filepath.Join(dir, name),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new", "--initial-cluster-token", "sluice-bench",
			"--quota-backend-bytes", fmt.Sprint(8<<30),
			"--log-level", "warn")
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			logf.Close()
			e.Close()
			return nil, fmt.Errorf("start etcd member %s: %w", name, err)
		}
		logf.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		e.procs = append(e.procs, cmd)
		e.exited = append(e.exited, done)
		e.Members = append(e.Members, client)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := e.healthy(ctx)
		if err == nil {
			return e, nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			e.Close()
			return nil, fmt.Errorf("etcd cluster did not become ready (logs in %s): %w", dir, err)
		}
		for i, done := range e.exited {
			select {
			case werr := <-done:
				e.exited[i] = nil
				e.Close()
				return nil, fmt.Errorf("etcd member m%d exited (log in %s): %v", i, dir, werr)
			default:
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// healthy asks every member's /health whether it is healthy.
func (e *Etcd) healthy(ctx context.Context) error {
	for _, m := range e.Members {
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		req, err := http.NewRequestWithContext(hctx, http.MethodGet, m+"/health", nil)
		if err != nil {
			cancel()
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			return err
		}
		var h struct {
			Health string `json:"health"`
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&h)
		resp.Body.Close()
		cancel()
		if err != nil {
			return fmt.Errorf("%s/health: %w", m, err)
		}
		if h.Health != "true" {
			return fmt.Errorf("%s/health: health %q", m, h.Health)
		}
	}
	return nil
}

// FindEtcdDriver returns path if it is set, else the etcd load driver
// beside the running executable (bin/etcdload beside bin/sluice), else the
// one on PATH, or ErrNoEtcdDriver.
func FindEtcdDriver(path string) (string, error) {
	if p, ok := helperbin.Find(EtcdDriverName, path); ok {
		return p, nil
	}
	return "", ErrNoEtcdDriver
}

// Drive runs the etcd load driver at driver (FindEtcdDriver) against the
// cluster with cfg's writers and returns what it measured. The driver is a
// process of its own, so that etcd's client stays out of the sluice binary.
func (e *Etcd) Drive(ctx context.Context, driver string, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, fmt.Errorf("drive etcd: %w", err)
	}
	cmd := exec.CommandContext(ctx, driver,
		"--endpoints", strings.Join(e.Members, ","),
		"--writers", strconv.Itoa(cfg.Writers), "--value-bytes", strconv.Itoa(cfg.ValueBytes),
		"--duration", cfg.Duration.String(), "--warmup", cfg.Warmup.String())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.Output()
	if err != nil {
		return Result{}, fmt.Errorf("etcd load driver %s: %w: %s", driver, err, strings.TrimSpace(stderr.String()))
	}
	var r Result
	if err := json.Unmarshal(out, &r); err != nil {
		return Result{}, fmt.Errorf("etcd load driver %s: its output: %w", driver, err)
	}
	return r, nil
}

// Close stops every member.
func (e *Etcd) Close() {
	for i, cmd := range e.procs {
		if e.exited[i] == nil {
			continue
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-e.exited[i]:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-e.exited[i]
		}
	}
	e.procs, e.exited = nil, nil
}

// FreePorts returns n distinct loopback TCP ports that were free a moment
// ago.
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
