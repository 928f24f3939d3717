package podbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet/runtime"
	"github.com/sluicehq/sluice/nodelet/runtime/container"
	"github.com/sluicehq/sluice/nodelet/runtime/container/cni"
	"golang.org/x/sys/unix"
)

// Config says what to measure. Zero values mean the documented defaults.
type Config struct {
	// Pods to start per runtime. Default 50.
	Pods int
	// Concurrency is how many starts are in flight. Default 1.
	Concurrency int
	// Runc is the runc binary; "" looks it up on PATH. When none is
	// found, the runc side is skipped and Result.RuncSkipped says why.
	Runc string
	// NoRunc skips the runc side.
	NoRunc bool
	// WorkDir holds the rootfs, state and bundles; default a temporary
	// directory, removed afterwards.
	WorkDir string
	// MilliCPU, MemoryBytes and Pids are each pod's limits. Defaults 500,
	// 64 MiB and 64.
	MilliCPU, MemoryBytes, Pids int64
	// Network is the pods' network mode: "none" or "bridge" (see the
	// package comment). Default "none".
	Network string
}

// Stats are one runtime's numbers.
type Stats struct {
	P50Ms        float64 `json:"p50_ms"`
	P99Ms        float64 `json:"p99_ms"`
	StartsPerSec float64 `json:"starts_per_sec"`
}

// Result is a run's report.
type Result struct {
	Pods        int `json:"pods"`
	Concurrency int `json:"concurrency"`
	// Network is the mode of the Sluice pods, and of runc's when it is
	// "bridge" (attached by the same plugins).
	Network string `json:"network,omitempty"`
	Sluice  Stats  `json:"sluice"`
	// SluiceNone is, in a bridge run, the same pods in none mode.
	SluiceNone *Stats `json:"sluice_none,omitempty"`
	Runc       *Stats `json:"runc,omitempty"`
	// RuncSkipped says why there are no runc numbers.
	RuncSkipped string `json:"runc_skipped,omitempty"`
}

// cgroupParent is the cgroup the benchmark's pods go under (and, with
// "-runc", runc's containers): one per process, so that two runs at once
// (a test and a benchmark) neither mix their pods nor remove each other's.
var cgroupParent = fmt.Sprintf("sluice-bench-%d", os.Getpid())

func (c *Config) setDefaults() {
	if c.Pods == 0 {
		c.Pods = 50
	}
	if c.Concurrency == 0 {
		c.Concurrency = 1
	}
	if c.MilliCPU == 0 {
		c.MilliCPU = 500
	}
	if c.MemoryBytes == 0 {
		c.MemoryBytes = 64 << 20
	}
	if c.Pids == 0 {
		c.Pids = 64
	}
	if c.Network == "" {
		c.Network = runtime.NetworkNone
	}
}

// Validate reports every problem of c.
func (c Config) Validate() error {
	var errs []error
	if c.Pods < 0 || c.Pods > 10000 {
		errs = append(errs, fmt.Errorf("podbench: pods %d outside [1, 10000]", c.Pods))
	}
	if c.Concurrency < 0 || c.Concurrency > 256 {
		errs = append(errs, fmt.Errorf("podbench: concurrency %d outside [1, 256]", c.Concurrency))
	}
	if c.MilliCPU < 0 || c.MemoryBytes < 0 || c.Pids < 0 {
		errs = append(errs, errors.New("podbench: limits must not be negative"))
	}
	if c.Network != "" && c.Network != runtime.NetworkNone && c.Network != runtime.NetworkBridge {
		errs = append(errs, fmt.Errorf("podbench: network %q: want none or bridge", c.Network))
	}
	return errors.Join(errs...)
}

// Run measures both runtimes. The caller's binary must have called
// container.Reexec first thing in main.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	cfg.setDefaults()
	if os.Geteuid() != 0 {
		return Result{}, errors.New("podbench: must run as root (containers need namespaces and cgroups)")
	}
	work := cfg.WorkDir
	if work == "" {
		d, err := os.MkdirTemp("", "sluice-podbench-")
		if err != nil {
			return Result{}, fmt.Errorf("podbench: %w", err)
		}
		defer os.RemoveAll(d)
		work = d
	}
	rootfs := filepath.Join(work, "rootfs")
	if err := BuildRootfs(ctx, rootfs); err != nil {
		return Result{}, err
	}
	run, unmount, err := mountRun(work)
	if err != nil {
		return Result{}, err
	}
	defer unmount()
	res := Result{Pods: cfg.Pods, Concurrency: cfg.Concurrency}
	var (
		net     *cni.Config
		network *cni.Network
	)
	if cfg.Network == runtime.NetworkBridge {
		res.Network = cfg.Network
		if net, network, err = benchNetwork(work, cfg.Pods); err != nil {
			return res, err
		}
		defer func() { _ = cni.RemoveNetwork(net.Bridge, net.PodCIDR) }()
	}
	s, err := runSluice(ctx, cfg, work, run, rootfs, net)
	if err != nil {
		return res, err
	}
	res.Sluice = s
	if net != nil {
		none := cfg
		none.Network = runtime.NetworkNone
		s, err := runSluice(ctx, none, work, run, rootfs, nil)
		if err != nil {
			return res, err
		}
		res.SluiceNone = &s
	}
	runc := cfg.Runc
	switch {
	case cfg.NoRunc:
		res.RuncSkipped = "disabled"
	case runc == "":
		p, err := exec.LookPath("runc")
		if err != nil {
			res.RuncSkipped = "runc not found on PATH; install it with scripts/install-runc.sh (apt-get install -y runc)"
			break
		}
		runc = p
	}
	if runc != "" && !cfg.NoRunc {
		r, err := runRunc(ctx, cfg, runc, work, run, rootfs, network)
		if err != nil {
			return res, err
		}
		res.Runc = &r
	}
	return res, nil
}

// mountRun mounts a tmpfs at work/run for the runtimes' state and returns
// its path and the function that unmounts it.
func mountRun(work string) (string, func(), error) {
	run := filepath.Join(work, "run")
	if err := os.MkdirAll(run, 0o700); err != nil {
		return "", nil, fmt.Errorf("podbench: %w", err)
	}
	if err := unix.Mount("tmpfs", run, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700"); err != nil {
		return "", nil, fmt.Errorf("podbench: mount a tmpfs for the runtimes' state at %s: %w", run, err)
	}
	return run, func() { _ = unix.Unmount(run, unix.MNT_DETACH) }, nil
}

// payload is the program the pods run.
const payload = `package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "exit" {
		return
	}
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
`

// BuildRootfs builds the payload, static, into dir/sleeper with the mount
// points a container needs. It needs the go command.
func BuildRootfs(ctx context.Context, dir string) error {
	src, err := os.MkdirTemp("", "sluice-podbench-src-")
	if err != nil {
		return fmt.Errorf("podbench: build rootfs: %w", err)
	}
	defer os.RemoveAll(src)
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(payload), 0o644); err != nil {
		return fmt.Errorf("podbench: build rootfs: %w", err)
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module sleeper\n\ngo 1.22\n"), 0o644); err != nil {
		return fmt.Errorf("podbench: build rootfs: %w", err)
	}
	for _, d := range []string{"", "proc", "dev", "sys", "tmp", "etc"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return fmt.Errorf("podbench: build rootfs: %w", err)
		}
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(dir, "sleeper"), ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("podbench: build rootfs: go build (the go command is needed): %v\n%s", err, out)
	}
	return nil
}

// measure runs start(i) for i in [0, n) with conc workers and returns the
// latencies and the wall time.
func measure(ctx context.Context, n, conc int, start func(i int) error) ([]time.Duration, time.Duration, error) {
	var (
		next  atomic.Int64
		mu    sync.Mutex
		lats  = make([]time.Duration, 0, n)
		first error
		wg    sync.WaitGroup
	)
	t0 := time.Now()
	for range conc {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				s := time.Now()
				err := start(i)
				d := time.Since(s)
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				if err == nil {
					lats = append(lats, d)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	wall := time.Since(t0)
	if first == nil {
		first = ctx.Err()
	}
	return lats, wall, first
}

func stats(lats []time.Duration, wall time.Duration) Stats {
	if len(lats) == 0 {
		return Stats{}
	}
	slices.Sort(lats)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p99 := min(len(lats)-1, (len(lats)*99+99)/100-1)
	return Stats{P50Ms: ms(lats[len(lats)/2]), P99Ms: ms(lats[p99]), StartsPerSec: float64(len(lats)) / wall.Seconds()}
}

func runSluice(ctx context.Context, cfg Config, work, run, rootfs string, net *cni.Config) (Stats, error) {
	state := filepath.Join(run, "sluice-state-"+cfg.Network)
	rt, err := container.New(container.Config{StateDir: state, CgroupParent: cgroupParent, ImageDir: filepath.Join(work, "images"),
		ImageRoots: []string{filepath.Dir(rootfs)}, Network: net})
	if err != nil {
		return Stats{}, fmt.Errorf("podbench: sluice: %w", err)
	}
	defer rt.Close()
	ids := make([]string, cfg.Pods)
	spec := func(i int) runtime.PodSpec {
		return runtime.PodSpec{ID: ids[i], Generation: 1, CgroupParent: cgroupParent, Network: cfg.Network, Containers: []runtime.ContainerSpec{{
			Name: "main", Image: api.Image{Rootfs: rootfs}, Args: []string{"/sleeper"}, ReadOnlyRootfs: true,
			Resources: runtime.Resources{MilliCPU: cfg.MilliCPU, MemoryBytes: cfg.MemoryBytes, Pids: cfg.Pids},
		}}}
	}
	for i := range ids {
		ids[i] = fmt.Sprintf("bench-%d", i)
	}
	lats, wall, err := measure(ctx, cfg.Pods, cfg.Concurrency, func(i int) error { return rt.Start(ctx, spec(i)) })
	cleanupCtx := context.WithoutCancel(ctx)
	for _, id := range ids {
		_ = rt.Stop(cleanupCtx, id, time.Second)
		_ = rt.Remove(cleanupCtx, id)
	}
	removeCgroup(cgroupParent)
	if err != nil {
		return Stats{}, fmt.Errorf("podbench: sluice start: %w", err)
	}
	return stats(lats, wall), nil
}

// runcSpec edits the config.json `runc spec` wrote to run the payload with
// the benchmark's limits.
func runcSpec(cfg Config, raw []byte, rootfs string) ([]byte, error) {
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("parse runc spec: %w", err)
	}
	proc, _ := s["process"].(map[string]any)
	linux, _ := s["linux"].(map[string]any)
	if proc == nil || linux == nil {
		return nil, errors.New("runc spec lacks process or linux")
	}
	proc["args"] = []string{"/sleeper"}
	proc["terminal"] = false
	s["root"] = map[string]any{"path": rootfs, "readonly": true}
	const period = 100000
	linux["resources"] = map[string]any{
		"devices": []any{map[string]any{"allow": false, "access": "rwm"}},
		"cpu":     map[string]any{"quota": cfg.MilliCPU * period / 1000, "period": period, "shares": max(2, cfg.MilliCPU*1024/1000)},
		"memory":  map[string]any{"limit": cfg.MemoryBytes},
		"pids":    map[string]any{"limit": cfg.Pids},
	}
	delete(linux, "uidMappings")
	delete(linux, "gidMappings")
	return json.MarshalIndent(s, "", "\t")
}

// runRunc measures runc's starts of cfg's pods, each in a network
// namespace attached to network when it is not nil.
func runRunc(ctx context.Context, cfg Config, runc, work, run, rootfs string, network *cni.Network) (Stats, error) {
	tmpl := filepath.Join(work, "runc-template")
	if err := os.MkdirAll(tmpl, 0o755); err != nil {
		return Stats{}, fmt.Errorf("podbench: runc: %w", err)
	}
	if out, err := exec.CommandContext(ctx, runc, "spec", "--bundle", tmpl).CombinedOutput(); err != nil {
		return Stats{}, fmt.Errorf("podbench: runc spec: %v: %s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(tmpl, "config.json"))
	if err != nil {
		return Stats{}, fmt.Errorf("podbench: runc: %w", err)
	}
	root := filepath.Join(run, "runc-state")
	ids := make([]string, cfg.Pods)
	for i := range ids {
		ids[i] = fmt.Sprintf("bench-runc-%d", i)
		b := filepath.Join(work, "bundles", ids[i])
		if err := os.MkdirAll(b, 0o755); err != nil {
			return Stats{}, fmt.Errorf("podbench: runc: %w", err)
		}
		edited, err := runcSpec(cfg, raw, rootfs)
		if err != nil {
			return Stats{}, fmt.Errorf("podbench: runc: %w", err)
		}
		// Same cgroup layout as Sluice: <parent>/<id>.
		var m map[string]any
		_ = json.Unmarshal(edited, &m)
		linux := m["linux"].(map[string]any)
		linux["cgroupsPath"] = "/" + cgroupParent + "-runc/" + ids[i]
		if network != nil {
			joinNetns(linux, network.NetnsPath(ids[i]))
		}
		edited, _ = json.Marshal(m)
		if err := os.WriteFile(filepath.Join(b, "config.json"), edited, 0o644); err != nil {
			return Stats{}, fmt.Errorf("podbench: runc: %w", err)
		}
	}
	lats, wall, err := measure(ctx, cfg.Pods, cfg.Concurrency, func(i int) error {
		if network != nil {
			if err := attachNewNetns(ctx, network, ids[i]); err != nil {
				return err
			}
		}
		// runc run -d hands its stdio to the container, so it must not be
		// a pipe we wait on: errors go to a file.
		errf, err := os.CreateTemp(work, "runc-stderr-")
		if err != nil {
			return err
		}
		defer os.Remove(errf.Name())
		defer errf.Close()
		cmd := exec.CommandContext(ctx, runc, "--root", root, "run", "-d", "--bundle", filepath.Join(work, "bundles", ids[i]), ids[i])
		cmd.Stderr = errf
		if err := cmd.Run(); err != nil {
			out, _ := os.ReadFile(errf.Name())
			return fmt.Errorf("runc run %s: %v: %s", ids[i], err, out)
		}
		return nil
	})
	cleanupCtx := context.WithoutCancel(ctx)
	for _, id := range ids {
		_ = exec.CommandContext(cleanupCtx, runc, "--root", root, "delete", "--force", id).Run()
		if network != nil {
			_ = network.Detach(cleanupCtx, id, nil)
		}
	}
	removeCgroup(cgroupParent + "-runc")
	if err != nil {
		return Stats{}, fmt.Errorf("podbench: runc: %w", err)
	}
	return stats(lats, wall), nil
}

// removeCgroup removes a benchmark's (empty) parent cgroup in every
// hierarchy.
func removeCgroup(p string) {
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", p))
	if d := filepath.Join("/sys/fs/cgroup", p); dirExists(d) {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		_ = os.Remove(d)
	}
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
