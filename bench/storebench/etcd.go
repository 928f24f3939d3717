package storebench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ErrNoEtcd says the etcd binary is not installed.
var ErrNoEtcd = errors.New("etcd is not installed (Debian: apt-get install etcd-server)")

// Etcd is a local etcd cluster started for a benchmark, and a client of it.
type Etcd struct {
	procs   []*exec.Cmd
	exited  []chan error
	client  *clientv3.Client
	Members []string // client URLs
}

// StartEtcd starts an etcd cluster of members processes on loopback, each
// with its data directory under dir and its log in dir/NAME.log, and waits
// until it answers writes. Close stops it.
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
	e.client, err = clientv3.New(clientv3.Config{Endpoints: e.Members, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := e.client.Put(wctx, "bench/ready", "1")
		cancel()
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

// Put writes key through the client; etcd acknowledges it once committed.
func (e *Etcd) Put(ctx context.Context, key string, value []byte) error {
	_, err := e.client.Put(ctx, key, string(value))
	return err
}

// Close closes the client and stops every member.
func (e *Etcd) Close() {
	if e.client != nil {
		e.client.Close()
	}
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
