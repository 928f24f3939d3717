package overcommit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/nodelet/cgroup"
)

// Pod describes one pod the agent runs. Its cgroup is at
// <root>/<Tier>/<ID>.
type Pod struct {
	ID        string
	Tier      cgroup.Tier
	Priority  int
	StartedAt time.Time
	Request   Resources
	// ResourceFile is where the pod's guaranteed and limit resources are
	// written (offline pods only), as a PodResources JSON object, replaced
	// by a rename at each write; "" writes nothing. The nodelet gives
	// <Config.ResourceDir>/<pod ID>/resources.json, which the pod's
	// containers see at /run/sluice/resources.json.
	ResourceFile string
}

// PodSource lists the pods the agent runs. Pods is called once per period
// from the Loop's goroutine; it must return quickly and must not retain or
// modify the returned slice afterwards.
type PodSource interface {
	Pods() []Pod
}

// PodSourceFunc adapts a function to PodSource.
type PodSourceFunc func() []Pod

func (f PodSourceFunc) Pods() []Pod { return f() }

// Killer kills a pod in user space. Kill must be idempotent (a pod that is
// still present after another grace period may be named again) and should
// return promptly; the reason is meant for the pod's status and logs.
type Killer interface {
	Kill(ctx context.Context, podID, reason string) error
}

// KillerFunc adapts a function to Killer.
type KillerFunc func(ctx context.Context, podID, reason string) error

func (f KillerFunc) Kill(ctx context.Context, podID, reason string) error {
	return f(ctx, podID, reason)
}

// Cgroups is what the Loop needs from nodelet/cgroup; *cgroup.Manager
// implements it. PodUsage returns an error wrapping cgroup.ErrNotFound for
// a pod whose cgroup does not exist (yet, or any more): such pods are left
// out of the step. EndUsageRound follows each tick's readings (the Manager
// then closes the files of the pods it was not asked about).
type Cgroups interface {
	PodUsage(cgroup.Tier, string) (cgroup.Usage, error)
	EndUsageRound()
	SetTier(cgroup.Tier, cgroup.Limits) error
}

// Config configures a Loop. Zero values mean the documented defaults.
type Config struct {
	Params Params
	// Period between steps. Default 1s.
	Period time.Duration
	// CPUPeriodUS is the CFS period written with the offline quota.
	// Default 100000 (100 ms).
	CPUPeriodUS uint64
	// Cgroups, Pods and Killer are required.
	Cgroups Cgroups
	Pods    PodSource
	Killer  Killer
	// ProcRoot is where stat and meminfo are read. Default "/proc".
	ProcRoot string
	// Logger; default discards.
	Logger *slog.Logger
	// Clock times the ticks and stamps the reports and reservations.
	// Default the system clock.
	Clock clock.Clock
}

// Validate reports every problem with c.
func (c Config) Validate() error {
	var errs []error
	if err := c.Params.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Period < 0 {
		errs = append(errs, fmt.Errorf("overcommit: Period %v is negative", c.Period))
	}
	if c.CPUPeriodUS != 0 && (c.CPUPeriodUS < 1000 || c.CPUPeriodUS > 1000000) {
		errs = append(errs, fmt.Errorf("overcommit: CPUPeriodUS %d outside [1000, 1000000]", c.CPUPeriodUS))
	}
	if c.Cgroups == nil {
		errs = append(errs, errors.New("overcommit: Cgroups is required"))
	}
	if c.Pods == nil {
		errs = append(errs, errors.New("overcommit: Pods is required"))
	}
	if c.Killer == nil {
		errs = append(errs, errors.New("overcommit: Killer is required"))
	}
	return errors.Join(errs...)
}

// Stats are the Loop's counters.
type Stats struct {
	Ticks      uint64
	Errors     uint64 // failed samples, limit writes, kills and file writes
	Kills      uint64
	FileWrites uint64
	LastError  string
}

// Loop runs the Controller against the host. Create it with NewLoop and
// run it with Run; Tick runs one iteration (for tests and for callers that
// own the timing). Tick and Run must not run concurrently; the accessors
// may be called from any goroutine.
type Loop struct {
	cfg  Config
	ctl  *Controller
	tick sync.Mutex // held for a whole iteration

	// Owned by the iteration (under tick).
	prevHost cpuTimes
	havePrev bool
	prevPod  map[string]podCPU
	written  map[string]PodResources
	samples  []PodSample
	counted  map[string]bool // the reservations the iteration's step saw
	buf      bytes.Buffer

	// lim orders the writes of the offline tier's limits between Tick and
	// Reserve.
	lim struct {
		sync.Mutex
		applied  cgroup.Limits          // as last written; zero: unknown or never
		reserved map[string]reservation // offline pods about to start, by pod ID
	}

	mu struct {
		sync.Mutex
		report   Report
		have     bool
		decision Decision // CPU and Memory only; slices not kept
		stats    Stats
	}
}

// reservation is an offline pod's request, counted in the offline tier's
// guarantee from before the pod starts until it shows among the pods
// with a cgroup.
type reservation struct {
	req Resources
	at  time.Time
}

// ReservationTTL bounds how long a reservation counts when its pod never
// shows (and its Release is missed).
const ReservationTTL = 5 * time.Minute

type podCPU struct {
	ns   uint64
	at   time.Time
	seen bool
}

// NewLoop copies cfg, fills defaults and validates it.
func NewLoop(cfg Config) (*Loop, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Period == 0 {
		cfg.Period = time.Second
	}
	if cfg.CPUPeriodUS == 0 {
		cfg.CPUPeriodUS = 100000
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg.Clock = clock.OrSystem(cfg.Clock)
	ctl, err := New(cfg.Params)
	if err != nil {
		return nil, err
	}
	l := &Loop{cfg: cfg, ctl: ctl, prevPod: map[string]podCPU{}, written: map[string]PodResources{}, counted: map[string]bool{}}
	l.lim.reserved = map[string]reservation{}
	return l, nil
}

// Reserve makes room in the offline tier for offline pod id, about to
// start, asking for req: its memory request is added at once to the
// tier's memory limit (when the loop has set one), and the pod counts in
// the offline guarantee at every Tick until it shows among the pods with
// a cgroup, Release is called, or ReservationTTL passes. Without it, a pod
// that starts between two ticks runs under a limit made for the pods
// before it, and the kernel kills offline pods at the tier's limit as soon
// as it touches the memory it was promised. Reserving an ID again does
// nothing. It never waits for a Tick.
func (l *Loop) Reserve(id string, req Resources) error {
	now := l.cfg.Clock.Now()
	l.lim.Lock()
	defer l.lim.Unlock()
	if _, ok := l.lim.reserved[id]; ok {
		return nil
	}
	l.lim.reserved[id] = reservation{req: req, at: now}
	if l.lim.applied.MemoryLimit <= 0 || req.MemoryBytes <= 0 {
		return nil // no limit set yet: the tier is not limited
	}
	want := l.lim.applied
	want.MemoryLimit += req.MemoryBytes
	if err := l.cfg.Cgroups.SetTier(cgroup.Offline, want); err != nil {
		l.lim.applied = cgroup.Limits{} // unknown now: rewrite next time
		return fmt.Errorf("overcommit: raise the offline memory limit for pod %s: %w", id, err)
	}
	l.lim.applied = want
	return nil
}

// Release drops pod id's reservation: it will not start (or has ended).
func (l *Loop) Release(id string) {
	l.lim.Lock()
	delete(l.lim.reserved, id)
	l.lim.Unlock()
}

// Run steps every Period until ctx is done, then returns nil. Errors of one
// iteration are logged and counted, never fatal.
func (l *Loop) Run(ctx context.Context) error {
	t := clock.NewTicker(l.cfg.Clock, l.cfg.Period)
	defer t.Stop()
	for {
		if _, err := l.Tick(ctx); err != nil {
			l.cfg.Logger.Warn("overcommit tick", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// LastReport returns a copy of the last usage report.
func (l *Loop) LastReport() (Report, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.report.Clone(), l.mu.have
}

// LastDecision returns the CPU and memory parts of the last decision.
func (l *Loop) LastDecision() (CPUDecision, MemDecision) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.decision.CPU, l.mu.decision.Memory
}

// LastStep returns, of one and the same iteration, the last usage report
// and the CPU and memory parts of the last decision (with its Now; Pods,
// Kills and Report left empty); ok is false before the first.
func (l *Loop) LastStep() (r Report, d Decision, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.report.Clone(), l.mu.decision, l.mu.have
}

// Stats returns the counters.
func (l *Loop) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.stats
}

// Tick samples, steps and applies once. It returns the decision (valid
// until the next Tick) and the joined errors of the iteration; a failure
// to sample the host skips the step.
func (l *Loop) Tick(ctx context.Context) (Decision, error) {
	l.tick.Lock()
	defer l.tick.Unlock()
	now := l.cfg.Clock.Now()
	var errs []error

	host, err := l.sampleHost()
	if err != nil {
		l.countError(err)
		return Decision{}, err
	}
	pods := l.cfg.Pods.Pods()
	l.samples = l.samples[:0]
	for _, p := range pods {
		s, err := l.cfg.Cgroups.PodUsage(p.Tier, p.ID)
		if err != nil {
			if !errors.Is(err, cgroup.ErrNotFound) { // not created yet or gone: skip quietly
				errs = append(errs, err)
			}
			continue
		}
		l.samples = append(l.samples, PodSample{
			ID: p.ID, Tier: p.Tier, Priority: p.Priority, StartedAt: p.StartedAt, Request: p.Request,
			CPUUsedMillis: l.podRate(p.ID, s.CPUUsageNS, now),
			MemoryBytes:   int64(min(s.MemoryWorkingSet, 1<<62)),
		})
	}
	l.cfg.Cgroups.EndUsageRound()
	l.addReserved(now)
	for id, v := range l.prevPod { // forget pods that are gone
		if !v.seen {
			delete(l.prevPod, id)
		} else {
			v.seen = false
			l.prevPod[id] = v
		}
	}

	d := l.ctl.Step(now, host, l.samples)

	// Apply the offline tier limits when they change. The online tier is
	// never written: the controller never throttles it.
	want := cgroup.Limits{
		CPUQuotaUS:  d.CPU.OfflineQuotaMillis * int64(l.cfg.CPUPeriodUS) / 1000,
		CPUPeriodUS: l.cfg.CPUPeriodUS,
		MemoryLimit: d.Memory.OfflineLimitBytes,
	}
	l.lim.Lock()
	// Pods reserved since the step read the reservations keep their room.
	for id, r := range l.lim.reserved {
		if !l.counted[id] {
			want.MemoryLimit += max(r.req.MemoryBytes, 0)
		}
	}
	if want != l.lim.applied {
		if err := l.cfg.Cgroups.SetTier(cgroup.Offline, want); err != nil {
			errs = append(errs, fmt.Errorf("overcommit: apply offline limits: %w", err))
			l.lim.applied = cgroup.Limits{} // unknown now: rewrite next time
		} else {
			l.lim.applied = want
		}
	}
	l.lim.Unlock()
	kills := 0
	for _, k := range d.Kills {
		l.cfg.Logger.Warn("overcommit kill", "pod", k.ID, "reason", k.Reason)
		if err := l.cfg.Killer.Kill(ctx, k.ID, k.Reason); err != nil {
			errs = append(errs, fmt.Errorf("overcommit: kill %s: %w", k.ID, err))
		} else {
			kills++
		}
	}
	writes := 0
	for _, pr := range d.Pods {
		path := fileFor(pods, pr.ID)
		if path == "" || l.counted[pr.ID] {
			// No file, or a reserved pod not measured yet: its file
			// keeps its requests until the loop sees it.
			continue
		}
		wrote, err := l.writeResources(path, pr)
		if err != nil {
			errs = append(errs, err)
		}
		if wrote {
			writes++
		}
	}
	for p := range l.written { // forget files of pods that are gone
		if !hasFile(pods, p) {
			delete(l.written, p)
		}
	}
	err = errors.Join(errs...)
	l.mu.Lock()
	l.mu.report = d.Report.Clone()
	l.mu.have = true
	l.mu.decision = Decision{Now: d.Now, CPU: d.CPU, Memory: d.Memory}
	l.mu.stats.Ticks++
	l.mu.stats.Kills += uint64(kills)
	l.mu.stats.FileWrites += uint64(writes)
	if err != nil {
		l.mu.stats.Errors += uint64(len(errs))
		l.mu.stats.LastError = err.Error()
	}
	l.mu.Unlock()
	return d, err
}

// addReserved adds to the iteration's samples, as offline pods using
// nothing yet, the reserved pods that have none, and drops the
// reservations of pods that have one, or that are older than
// ReservationTTL. It records in l.counted the reservations it added.
func (l *Loop) addReserved(now time.Time) {
	clear(l.counted)
	l.lim.Lock()
	defer l.lim.Unlock()
	if len(l.lim.reserved) == 0 {
		return
	}
	sampled := make(map[string]bool, len(l.samples))
	for _, s := range l.samples {
		sampled[s.ID] = true
	}
	first := len(l.samples)
	for id, r := range l.lim.reserved {
		if sampled[id] || now.Sub(r.at) > ReservationTTL {
			delete(l.lim.reserved, id)
			continue
		}
		l.counted[id] = true
		l.samples = append(l.samples, PodSample{ID: id, Tier: cgroup.Offline, StartedAt: r.at, Request: r.req})
	}
	// In a fixed order, as the step's other inputs.
	slices.SortFunc(l.samples[first:], func(a, b PodSample) int { return strings.Compare(a.ID, b.ID) })
}

func (l *Loop) countError(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.stats.Ticks++
	l.mu.stats.Errors++
	l.mu.stats.LastError = err.Error()
}

// fileFor finds the resource file of pod id.
func fileFor(pods []Pod, id string) string {
	for _, p := range pods {
		if p.ID == id {
			return p.ResourceFile
		}
	}
	return ""
}

func hasFile(pods []Pod, path string) bool {
	for _, p := range pods {
		if p.ResourceFile == path {
			return true
		}
	}
	return false
}

// sampleHost reads /proc/stat and /proc/meminfo and turns the CPU counters
// into the average use since the previous sample (0 on the first).
func (l *Loop) sampleHost() (HostSample, error) {
	st, err := os.ReadFile(filepath.Join(l.cfg.ProcRoot, "stat"))
	if err != nil {
		return HostSample{}, fmt.Errorf("overcommit: sample host: %w", err)
	}
	ct, err := parseProcStat(st)
	if err != nil {
		return HostSample{}, fmt.Errorf("overcommit: sample host: %w", err)
	}
	mi, err := os.ReadFile(filepath.Join(l.cfg.ProcRoot, "meminfo"))
	if err != nil {
		return HostSample{}, fmt.Errorf("overcommit: sample host: %w", err)
	}
	total, avail, err := parseMeminfo(mi)
	if err != nil {
		return HostSample{}, fmt.Errorf("overcommit: sample host: %w", err)
	}
	h := HostSample{CPUCapacityMillis: int64(ct.cpus) * 1000, MemTotal: total, MemAvailable: avail}
	if prev := l.prevHost; l.havePrev && ct.total > prev.total && ct.busy >= prev.busy {
		h.CPUUsedMillis = int64(float64(ct.busy-prev.busy) / float64(ct.total-prev.total) * float64(h.CPUCapacityMillis))
	}
	l.prevHost, l.havePrev = ct, true
	return h, nil
}

// podRate turns a pod's cumulative CPU time into millicores since the
// previous sample (0 on the first, or if the counter went backwards).
func (l *Loop) podRate(id string, ns uint64, now time.Time) int64 {
	prev, ok := l.prevPod[id]
	l.prevPod[id] = podCPU{ns: ns, at: now, seen: true}
	if !ok || ns < prev.ns || !now.After(prev.at) {
		return 0
	}
	return int64(float64(ns-prev.ns) / float64(now.Sub(prev.at)) * 1000)
}

// resourceFileTolerance is how far a pod's limit may move from what its
// resource file says before the file is written again.
const resourceFileTolerance = 0.05

// writeResources writes a pod's resource file atomically (temporary file
// in the same directory, then rename) when it says something new: another
// guarantee, or a limit that moved by resourceFileTolerance or more in CPU
// or memory from the one written. A limit that wanders less (the offline
// quota moves a little every period on a busy host) is not worth the
// writes.
func (l *Loop) writeResources(path string, pr PodResources) (bool, error) {
	if old, ok := l.written[path]; ok && old.ID == pr.ID && old.Guaranteed == pr.Guaranteed &&
		near(old.Limit.CPUMillis, pr.Limit.CPUMillis) && near(old.Limit.MemoryBytes, pr.Limit.MemoryBytes) {
		return false, nil
	}
	if err := writeResourceFile(&l.buf, path, pr); err != nil {
		return false, err
	}
	l.written[path] = pr
	return true, nil
}

// WriteResourceFile writes pr to path as the Loop writes a pod's resource
// file (Pod.ResourceFile), and as atomically: for the file a pod has
// before the Loop's first write.
func WriteResourceFile(path string, pr PodResources) error {
	var buf bytes.Buffer
	return writeResourceFile(&buf, path, pr)
}

func writeResourceFile(buf *bytes.Buffer, path string, pr PodResources) error {
	buf.Reset()
	if err := json.NewEncoder(buf).Encode(pr); err != nil {
		return fmt.Errorf("overcommit: encode resources of %s: %w", pr.ID, err)
	}
	if err := writeAtomic(path, buf.Bytes()); err != nil {
		return fmt.Errorf("overcommit: write resources of %s: %w", pr.ID, err)
	}
	return nil
}

// near reports whether b is within resourceFileTolerance of a.
func near(a, b int64) bool {
	return math.Abs(float64(b-a)) < resourceFileTolerance*math.Abs(float64(a))
}

// writeAtomic replaces path's content with data through a temporary file
// beside it (one name per path: only the loop writes these files), so that
// a reader sees the old content or the new, never a mix. The rename gives
// path a new inode: a container sees the file through a bind mount of its
// directory (runtime.PodSpec.ResourceDir), which shows the new one; a
// bind mount of the file itself would keep showing the old.
func writeAtomic(path string, data []byte) error {
	tmp := filepath.Join(filepath.Dir(path), ".sluice-"+filepath.Base(path)+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	// The mode again: the umask may have taken bits the pod's user needs.
	cherr := f.Chmod(0o644)
	if err := errors.Join(werr, cherr, f.Close()); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
