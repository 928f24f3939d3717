package cgroup

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
)

// ErrNotFound is returned (wrapped in *Error) when a cgroup does not exist.
var ErrNotFound = errors.New("cgroup: not found")

// ErrUnsupported is returned (wrapped in *Error) when the host lacks the
// file a setting needs, e.g. a block I/O weight without BFQ.
var ErrUnsupported = errors.New("cgroup: not supported on this host")

// Error describes a failed operation on one cgroup.
type Error struct {
	Op         string // "create", "update", "stat", "delete", ...
	Path       string // the cgroup path relative to the hierarchy root, e.g. /sluice/offline/pod-1
	Controller string // "cpu", "memory", ... or "" when not specific to one
	Err        error
}

func (e *Error) Error() string {
	if e.Controller == "" {
		return fmt.Sprintf("cgroup %s %s: %v", e.Op, e.Path, e.Err)
	}
	return fmt.Sprintf("cgroup %s %s (controller %s): %v", e.Op, e.Path, e.Controller, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Mode is the cgroup version in use.
type Mode int

const (
	// ModeAuto (the zero value) asks New to detect the mode.
	ModeAuto Mode = iota
	// ModeV1 uses the legacy per-controller hierarchies.
	ModeV1
	// ModeV2 uses the unified hierarchy.
	ModeV2
)

func (m Mode) String() string {
	switch m {
	case ModeAuto:
		return "auto"
	case ModeV1:
		return "v1"
	case ModeV2:
		return "v2"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Tier is one of the two cgroup tiers.
type Tier string

const (
	// Online holds latency-sensitive pods with guaranteed resources. The
	// overcommit controller never throttles it.
	Online Tier = "online"
	// Offline holds batch pods that borrow what online leaves idle.
	Offline Tier = "offline"
)

// Valid reports whether t is Online or Offline.
func (t Tier) Valid() bool { return t == Online || t == Offline }

// Limits are the settings of one cgroup. A zero field leaves the current
// value unchanged; -1 (where allowed) means unlimited.
type Limits struct {
	// CPUQuotaUS is the CFS quota in microseconds per period (cpu.cfs_quota_us
	// in v1, the first field of cpu.max in v2); -1 is unlimited.
	CPUQuotaUS int64
	// CPUPeriodUS is the CFS period in microseconds; 0 keeps the current one
	// (the kernel default is 100000).
	CPUPeriodUS uint64
	// CPUShares is the relative CPU weight in v1 units (2..262144, default
	// 1024); in v2 it is converted to cpu.weight (1..10000) with the formula
	// runc uses.
	CPUShares uint64
	// CPUIdle is 1 to mark the cgroup idle (cpu.idle, Linux 5.15 and
	// later): against its siblings its tasks run as SCHED_IDLE, so that any
	// other task waking preempts them at once, and the group's weight is
	// the kernel's lowest whatever CPUShares says; -1 clears the mark (read
	// back as 0). Where the kernel has no cpu.idle, setting it fails with
	// ErrUnsupported. The kernel refuses a weight for an idle group, so
	// CPUShares is not written to a group that is and stays idle (its
	// weight reads back as the kernel's idle weight); clearing the mark
	// resets the weight to the kernel default (1024 shares) unless
	// CPUShares is given with it.
	CPUIdle int8
	// MemoryLimit is the hard memory limit in bytes; -1 is unlimited.
	MemoryLimit int64
	// PidsMax is the maximum number of tasks; -1 is unlimited.
	PidsMax int64
	// IOWeight is the proportional block I/O weight (10..1000; BFQ's range is
	// 1..1000). It needs BFQ (blkio.bfq.weight / io.bfq.weight) or CFQ
	// (blkio.weight); without either, setting it fails with ErrUnsupported.
	IOWeight uint16
}

// Sample is a point-in-time reading of one cgroup. Counters are cumulative
// since the cgroup was created.
type Sample struct {
	CPUUsageNS       uint64 // total CPU time consumed
	CPUPeriods       uint64 // CFS enforcement periods elapsed
	CPUThrottled     uint64 // periods in which the group was throttled
	CPUThrottledNS   uint64 // total time throttled
	MemoryUsage      uint64 // bytes charged, including page cache
	MemoryWorkingSet uint64 // usage minus inactive file pages
	MemoryLimit      uint64 // current hard limit (a huge value when unlimited)
	Pids             uint64 // tasks currently in the group
	PidsLimit        uint64 // 0 when unlimited
	OOMKills         uint64 // processes killed by the kernel OOM killer
	OOMEvents        uint64 // v2: times the limit was hit and OOM ran; v1: 1 while under OOM
}

// Config configures a Manager. Zero values mean the documented defaults.
type Config struct {
	// Root is the absolute cgroup path of the tree, relative to each
	// hierarchy's mount point. Default "/sluice". Tests use a unique root.
	Root string
	// Mode forces a cgroup version; default ModeAuto detects it.
	Mode Mode
	// Mountpoint is where cgroups are mounted. Default "/sys/fs/cgroup". In
	// v1 the controllers are its subdirectories; in v2 it is the unified
	// mount (for hybrid hosts forced to v2, "/sys/fs/cgroup/unified").
	Mountpoint string
}

// DefaultRoot is the default Config.Root.
const DefaultRoot = "/sluice"

const defaultMountpoint = "/sys/fs/cgroup"

// Validate reports every problem with c at once.
func (c Config) Validate() error {
	var errs []error
	if c.Root != "" {
		if !path.IsAbs(c.Root) || path.Clean(c.Root) != c.Root || c.Root == "/" {
			errs = append(errs, fmt.Errorf("cgroup: config: Root %q must be a clean absolute path other than /", c.Root))
		}
	}
	if c.Mode < ModeAuto || c.Mode > ModeV2 {
		errs = append(errs, fmt.Errorf("cgroup: config: unknown Mode %d", int(c.Mode)))
	}
	if c.Mountpoint != "" && !path.IsAbs(c.Mountpoint) {
		errs = append(errs, fmt.Errorf("cgroup: config: Mountpoint %q must be absolute", c.Mountpoint))
	}
	return errors.Join(errs...)
}

// validID checks that a pod ID is a single, safe path element.
func validID(id string) error {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, "/\x00") || len(id) > 255 {
		return fmt.Errorf("cgroup: invalid pod ID %q: must be one path element", id)
	}
	return nil
}

// backend is one cgroup version's implementation. Paths are absolute cgroup
// paths (relative to hierarchy roots, starting with "/").
type backend interface {
	create(p string, l Limits) error
	update(p string, l Limits) error
	limits(p string) (Limits, error)
	stat(p string) (Sample, error)
	addProc(p string, pid int) error
	procs(p string) ([]int, error)
	exists(p string) bool
	children(p string) ([]string, error)
	remove(p string) error
}

// Manager creates, configures, samples and deletes the cgroups under one
// root. Its methods are safe for concurrent use. The only state it keeps
// beyond the kernel's is the usage files PodUsage leaves open.
type Manager struct {
	root string
	mode Mode
	be   backend

	open struct {
		sync.Mutex
		files map[string]*openUsage // by cgroup path
	}
}

// New detects the cgroup mode (unless cfg.Mode forces one) and returns a
// Manager. It creates nothing; call EnsureTiers.
func New(cfg Config) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Root == "" {
		cfg.Root = DefaultRoot
	}
	if cfg.Mountpoint == "" {
		cfg.Mountpoint = defaultMountpoint
	}
	mode, unified := cfg.Mode, cfg.Mountpoint
	if mode == ModeAuto || (mode == ModeV2 && isHybrid(cfg.Mountpoint)) {
		detected, u, err := detect(cfg.Mountpoint)
		if err != nil && mode == ModeAuto {
			return nil, err
		}
		if mode == ModeAuto {
			mode = detected
		}
		if u != "" {
			unified = u
		}
	}
	m := &Manager{root: cfg.Root, mode: mode}
	switch mode {
	case ModeV1:
		be, err := newV1(cfg.Mountpoint)
		if err != nil {
			return nil, err
		}
		m.be = be
	case ModeV2:
		m.be = newV2(unified)
	}
	return m, nil
}

// Mode returns the cgroup version in use.
func (m *Manager) Mode() Mode { return m.mode }

// Root returns the cgroup path of the tree's root.
func (m *Manager) Root() string { return m.root }

// TierPath returns the cgroup path of a tier, e.g. /sluice/offline.
func (m *Manager) TierPath(t Tier) string { return path.Join(m.root, string(t)) }

// PodPath returns the cgroup path of a pod, e.g. /sluice/offline/pod-1.
func (m *Manager) PodPath(t Tier, podID string) string {
	return path.Join(m.root, string(t), podID)
}

func (m *Manager) tierPath(t Tier) (string, error) {
	if !t.Valid() {
		return "", fmt.Errorf("cgroup: invalid tier %q", t)
	}
	return m.TierPath(t), nil
}

func (m *Manager) podPath(t Tier, id string) (string, error) {
	if !t.Valid() {
		return "", fmt.Errorf("cgroup: invalid tier %q", t)
	}
	if err := validID(id); err != nil {
		return "", err
	}
	return m.PodPath(t, id), nil
}

// EnsureTiers creates the root and both tiers if needed and applies the
// given limits to each tier. It is idempotent.
func (m *Manager) EnsureTiers(online, offline Limits) error {
	if err := m.be.create(m.root, Limits{}); err != nil {
		return err
	}
	if err := m.be.create(m.TierPath(Online), online); err != nil {
		return err
	}
	return m.be.create(m.TierPath(Offline), offline)
}

// SetTier applies limits to a tier.
func (m *Manager) SetTier(t Tier, l Limits) error {
	p, err := m.tierPath(t)
	if err != nil {
		return err
	}
	return m.be.update(p, l)
}

// TierLimits reads a tier's current limits back from the cgroup files.
func (m *Manager) TierLimits(t Tier) (Limits, error) {
	p, err := m.tierPath(t)
	if err != nil {
		return Limits{}, err
	}
	return m.be.limits(p)
}

// TierSample reads a tier's usage (including all its pods).
func (m *Manager) TierSample(t Tier) (Sample, error) {
	p, err := m.tierPath(t)
	if err != nil {
		return Sample{}, err
	}
	return m.be.stat(p)
}

// CreatePod creates a pod's cgroup under its tier (idempotent) and applies l.
func (m *Manager) CreatePod(t Tier, podID string, l Limits) error {
	p, err := m.podPath(t, podID)
	if err != nil {
		return err
	}
	if !m.be.exists(m.TierPath(t)) {
		return &Error{Op: "create", Path: p, Err: fmt.Errorf("tier %s: %w", m.TierPath(t), ErrNotFound)}
	}
	return m.be.create(p, l)
}

// SetPod applies limits to an existing pod cgroup.
func (m *Manager) SetPod(t Tier, podID string, l Limits) error {
	p, err := m.podPath(t, podID)
	if err != nil {
		return err
	}
	return m.be.update(p, l)
}

// PodLimits reads a pod's current limits back from the cgroup files.
func (m *Manager) PodLimits(t Tier, podID string) (Limits, error) {
	p, err := m.podPath(t, podID)
	if err != nil {
		return Limits{}, err
	}
	return m.be.limits(p)
}

// PodSample reads a pod's usage.
func (m *Manager) PodSample(t Tier, podID string) (Sample, error) {
	p, err := m.podPath(t, podID)
	if err != nil {
		return Sample{}, err
	}
	return m.be.stat(p)
}

// AddProc moves a process into a pod's cgroup (in every controller this
// package manages).
func (m *Manager) AddProc(t Tier, podID string, pid int) error {
	p, err := m.podPath(t, podID)
	if err != nil {
		return err
	}
	if pid <= 0 {
		return &Error{Op: "add process", Path: p, Err: fmt.Errorf("invalid pid %d", pid)}
	}
	return m.be.addProc(p, pid)
}

// PodProcs lists the processes in a pod's cgroup and its descendants.
func (m *Manager) PodProcs(t Tier, podID string) ([]int, error) {
	p, err := m.podPath(t, podID)
	if err != nil {
		return nil, err
	}
	return m.be.procs(p)
}

// Pods lists the pod IDs present under a tier, sorted.
func (m *Manager) Pods(t Tier) ([]string, error) {
	p, err := m.tierPath(t)
	if err != nil {
		return nil, err
	}
	return m.be.children(p)
}

// DeletePod removes a pod's cgroup (and any descendants) from every
// hierarchy. It fails, leaving the cgroup in place, if it holds processes,
// and returns ErrNotFound if it exists in none.
func (m *Manager) DeletePod(t Tier, podID string) error {
	p, err := m.podPath(t, podID)
	if err != nil {
		return err
	}
	m.closeUsage(func(q string) bool { return q == p })
	return m.be.remove(p)
}

// Delete removes the whole tree (root, tiers and pods) from every
// hierarchy. It is meant for tests and uninstall; all pods must be empty.
func (m *Manager) Delete() error {
	m.closeUsage(func(string) bool { return true })
	return m.be.remove(m.root)
}
