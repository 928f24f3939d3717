package overcommit

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/nodelet/cgroup"
)

// Resources is an amount of CPU and memory.
type Resources struct {
	CPUMillis   int64 `json:"cpu_millis"`
	MemoryBytes int64 `json:"memory_bytes"`
}

// HostSample is the host's state over the last period.
type HostSample struct {
	CPUCapacityMillis int64 // CPUs × 1000
	CPUUsedMillis     int64 // average CPU in use over the period, every process
	MemTotal          int64 // bytes
	MemAvailable      int64 // bytes the kernel could hand out (MemAvailable)
}

// PodSample is one pod's description and usage over the last period.
type PodSample struct {
	ID        string
	Tier      cgroup.Tier
	Priority  int       // higher is more important; kills start at the lowest
	StartedAt time.Time // kills prefer the shortest run time
	Request   Resources // what the dispatcher allocated: the pod's guaranteed share
	// CPUUsedMillis is the average CPU used over the period; MemoryBytes the
	// working set at the end of it.
	CPUUsedMillis int64
	MemoryBytes   int64
}

// CPUAction says what the CPU rule did.
type CPUAction uint8

const (
	CPUHold CPUAction = iota
	CPUGrow
	CPUShrink
)

func (a CPUAction) String() string {
	return [...]string{"hold", "grow", "shrink"}[a]
}

// CPUDecision is the CPU rule's outcome.
type CPUDecision struct {
	Util               float64 // host utilization, 0..1
	Action             CPUAction
	OfflineQuotaMillis int64 // the offline tier's new quota
	MinMillis          int64 // the floor in force
	MaxMillis          int64 // the ceiling in force
}

// MemDecision is the memory rule's outcome.
type MemDecision struct {
	OnlineIdleBytes     int64   // online requests minus online working set
	LendableBytes       int64   // what may be lent out of the idle memory
	BorrowRatio         float64 // LendableBytes / OnlineIdleBytes
	GuaranteedBytes     int64   // offline's guarantee
	OfflineLimitBytes   int64   // the offline tier's new memory limit
	AvailableBytes      int64   // host MemAvailable
	KillThresholdBytes  int64
	PressureSince       time.Time // zero when there is no pressure
	UnrelievedByKilling bool      // killing every offline pod would not reach the threshold
}

// PodResources is what one offline pod is guaranteed and may use now.
type PodResources struct {
	ID         string    `json:"pod"`
	Guaranteed Resources `json:"guaranteed"`
	Limit      Resources `json:"limit"`
}

// Kill asks for one offline pod to be killed.
type Kill struct {
	ID     string
	Reason string
}

// Usage is a smoothed (EWMA) and a last usage.
type Usage struct {
	CPUMillis       int64 `json:"cpu_millis"`   // EWMA
	MemoryBytes     int64 `json:"memory_bytes"` // EWMA
	LastCPUMillis   int64 `json:"last_cpu_millis"`
	LastMemoryBytes int64 `json:"last_memory_bytes"`
}

// PodUsage is one pod's usage report.
type PodUsage struct {
	ID   string      `json:"pod"`
	Tier cgroup.Tier `json:"tier"`
	Usage
}

// Report is the usage report for the dispatcher's estimation.
type Report struct {
	Time    time.Time  `json:"time"`
	Pods    []PodUsage `json:"pods"`
	Online  Usage      `json:"online"`
	Offline Usage      `json:"offline"`
}

// Clone returns a deep copy of r.
func (r Report) Clone() Report {
	r.Pods = slices.Clone(r.Pods)
	return r
}

// Decision is the outcome of one Step. Its slices are owned by the
// Controller and reused by the next Step: copy what must outlive it.
type Decision struct {
	Now    time.Time
	CPU    CPUDecision
	Memory MemDecision
	// Pods holds one entry per offline pod, in input order.
	Pods []PodResources
	// Kills lists offline pods to kill now, in kill order. Never an online
	// pod.
	Kills  []Kill
	Report Report
}

type ewma struct {
	cpu, mem    float64
	lastCPU     int64
	lastMem     int64
	seen        uint64
	initialized bool
}

func (e *ewma) add(alpha float64, cpu, mem int64) {
	if !e.initialized {
		e.cpu, e.mem, e.initialized = float64(cpu), float64(mem), true
	} else {
		e.cpu += alpha * (float64(cpu) - e.cpu)
		e.mem += alpha * (float64(mem) - e.mem)
	}
	e.lastCPU, e.lastMem = cpu, mem
}

func (e *ewma) usage() Usage {
	return Usage{CPUMillis: int64(math.Round(e.cpu)), MemoryBytes: int64(math.Round(e.mem)),
		LastCPUMillis: e.lastCPU, LastMemoryBytes: e.lastMem}
}

// Controller is Hippo's overcommit model as a deterministic state machine:
// no I/O, no clock, no goroutines. Its outputs depend only on Params and
// the sequence of Step inputs. It is not safe for concurrent use.
type Controller struct {
	p             Params
	quota         int64 // current offline CPU quota, 0 before the first step
	pressureSince time.Time
	step          uint64
	pods          map[string]*ewma
	online        ewma
	offline       ewma

	// buffers reused across steps
	podBuf  []PodResources
	kills   []Kill
	report  []PodUsage
	victims []int
}

// New returns a controller, or the problems with p.
func New(p Params) (*Controller, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Controller{p: p.withDefaults(), pods: map[string]*ewma{}}, nil
}

// Params returns the parameters in force, defaults filled in.
func (c *Controller) Params() Params { return c.p }

// cpuBounds returns the offline quota floor and ceiling for a host.
func (c *Controller) cpuBounds(capacity int64) (lo, hi int64) {
	hi = c.p.OfflineCPUMaxMillis
	if hi == 0 {
		hi = capacity
	}
	lo = c.p.OfflineCPUMinMillis
	if lo == 0 {
		lo = max(100, capacity/20)
	}
	hi = max(hi, 1)
	lo = min(max(lo, 1), hi)
	return lo, hi
}

// Step takes the host and pod samples of one period and decides the
// offline tier's limits, each offline pod's resources, which offline pods
// to kill, and the usage report. Invalid inputs (negative or missing
// values) are clamped, never trusted to panic.
func (c *Controller) Step(now time.Time, host HostSample, pods []PodSample) Decision {
	c.step++
	d := Decision{Now: now}
	d.CPU = c.stepCPU(host)

	// Aggregate per tier.
	var onReq, onUse, offReq, offUse, offCPU, offCPUReq int64
	for i := range pods {
		p := &pods[i]
		use := max(p.MemoryBytes, 0)
		switch p.Tier {
		case cgroup.Online:
			onReq += max(p.Request.MemoryBytes, 0)
			onUse += use
		case cgroup.Offline:
			offReq += max(p.Request.MemoryBytes, 0)
			offUse += use
			offCPU += max(p.CPUUsedMillis, 0)
			offCPUReq += max(p.Request.CPUMillis, 0)
		}
	}
	d.Memory = c.stepMemory(now, host, onReq, onUse, offReq, offUse)
	d.Kills = c.chooseKills(now, host, pods, &d.Memory, offUse)
	d.Pods = c.podResources(pods, d.CPU, d.Memory, offCPU, offCPUReq, offUse, offReq)
	d.Report = c.reportUsage(now, pods)
	return d
}

func (c *Controller) stepCPU(host HostSample) CPUDecision {
	capacity := max(host.CPUCapacityMillis, 1)
	lo, hi := c.cpuBounds(capacity)
	if c.quota == 0 {
		c.quota = c.p.OfflineCPUInitMillis
		if c.quota == 0 {
			c.quota = lo
		}
	}
	used := min(max(host.CPUUsedMillis, 0), capacity)
	util := float64(used) / float64(capacity)
	mark := c.p.CPUWatermark * float64(capacity)
	q := float64(c.quota)
	action := CPUHold
	switch {
	case util > c.p.CPUWatermark:
		excess := float64(used) - mark
		q = min(q*c.p.CPUShrinkFactor, q-excess)
		action = CPUShrink
	case util < c.p.CPUWatermark-c.p.CPUDeadband:
		headroom := mark - float64(used)
		q += min(max(q*(c.p.CPUGrowFactor-1), float64(c.p.CPUGrowStepMillis)), headroom)
		action = CPUGrow
	}
	c.quota = min(max(int64(q), lo), hi)
	return CPUDecision{Util: util, Action: action, OfflineQuotaMillis: c.quota, MinMillis: lo, MaxMillis: hi}
}

// lendable is the piecewise-linear, concave lending curve: ratio up to the
// knee, ratioAbove beyond it.
func (c *Controller) lendable(idle, total int64) int64 {
	knee := int64(math.Round(c.p.MemLendKnee * float64(total)))
	below := min(idle, knee)
	above := idle - below
	return int64(math.Round(c.p.MemLendRatio*float64(below) + c.p.MemLendRatioAbove*float64(above)))
}

func (c *Controller) stepMemory(now time.Time, host HostSample, onReq, onUse, offReq, offUse int64) MemDecision {
	total := max(host.MemTotal, 0)
	avail := min(max(host.MemAvailable, 0), total)
	g := c.p.OfflineMemGuaranteedBytes
	if g == 0 {
		g = offReq
	}
	idle := max(onReq-onUse, 0)
	lend := c.lendable(idle, total)
	// Projected use by everything but offline must leave offline under the
	// watermark.
	nonOffline := max(total-avail-offUse, 0)
	capW := int64(math.Round(c.p.MemWatermark*float64(total))) - nonOffline
	limit := min(g+lend, max(capW, g))
	m := MemDecision{
		OnlineIdleBytes: idle, LendableBytes: lend, GuaranteedBytes: g,
		OfflineLimitBytes: max(limit, g), AvailableBytes: avail,
		KillThresholdBytes: int64(math.Round(c.p.KillFreeFraction * float64(total))),
	}
	if idle > 0 {
		m.BorrowRatio = float64(lend) / float64(idle)
	}
	if avail < m.KillThresholdBytes {
		if c.pressureSince.IsZero() {
			c.pressureSince = now
		}
	} else {
		c.pressureSince = time.Time{}
	}
	m.PressureSince = c.pressureSince
	return m
}

// chooseKills picks offline victims once pressure has lasted KillGrace:
// lowest priority first, then shortest run time, then largest working set
// (share of offline memory), then ID; until the projected available memory
// reaches the threshold. A kill round re-arms the grace period.
func (c *Controller) chooseKills(now time.Time, host HostSample, pods []PodSample, m *MemDecision, offUse int64) []Kill {
	c.kills = c.kills[:0]
	if m.PressureSince.IsZero() || now.Sub(m.PressureSince) < c.p.KillGrace {
		return c.kills
	}
	c.victims = c.victims[:0]
	for i := range pods {
		if pods[i].Tier == cgroup.Offline {
			c.victims = append(c.victims, i)
		}
	}
	slices.SortFunc(c.victims, func(a, b int) int {
		pa, pb := &pods[a], &pods[b]
		if pa.Priority != pb.Priority {
			return cmpInt(pa.Priority, pb.Priority)
		}
		if !pa.StartedAt.Equal(pb.StartedAt) {
			return -pa.StartedAt.Compare(pb.StartedAt) // later start = shorter run first
		}
		if pa.MemoryBytes != pb.MemoryBytes {
			return cmpInt(pb.MemoryBytes, pa.MemoryBytes)
		}
		return strings.Compare(pa.ID, pb.ID)
	})
	projected := m.AvailableBytes
	for _, i := range c.victims {
		if projected >= m.KillThresholdBytes {
			break
		}
		p := &pods[i]
		share := 0.0
		if offUse > 0 {
			share = 100 * float64(max(p.MemoryBytes, 0)) / float64(offUse)
		}
		c.kills = append(c.kills, Kill{ID: p.ID, Reason: fmt.Sprintf(
			"memory pressure: %d MiB available < %d MiB threshold for %v (grace %v); offline pod priority %d, running %v, working set %d MiB (%.0f%% of offline)",
			m.AvailableBytes>>20, m.KillThresholdBytes>>20, now.Sub(m.PressureSince), c.p.KillGrace,
			p.Priority, now.Sub(p.StartedAt).Round(time.Second), max(p.MemoryBytes, 0)>>20, share)})
		projected += max(p.MemoryBytes, 0)
	}
	m.UnrelievedByKilling = projected < m.KillThresholdBytes
	c.pressureSince = now
	m.PressureSince = now
	return c.kills
}

func cmpInt[T int | int64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// share scales a request down proportionally when the requests of the tier
// exceed what the tier guarantees.
func share(req, sumReq, tierGuarantee int64) int64 {
	req = max(req, 0)
	if sumReq <= tierGuarantee || sumReq == 0 {
		return req
	}
	return int64(float64(req) * float64(tierGuarantee) / float64(sumReq))
}

func (c *Controller) podResources(pods []PodSample, cpu CPUDecision, m MemDecision, offCPU, offCPUReq, offUse, offReq int64) []PodResources {
	c.podBuf = c.podBuf[:0]
	for i := range pods {
		p := &pods[i]
		if p.Tier != cgroup.Offline {
			continue
		}
		var r PodResources
		r.ID = p.ID
		r.Guaranteed.CPUMillis = share(p.Request.CPUMillis, offCPUReq, cpu.MinMillis)
		r.Guaranteed.MemoryBytes = share(p.Request.MemoryBytes, offReq, m.GuaranteedBytes)
		others := offCPU - max(p.CPUUsedMillis, 0)
		r.Limit.CPUMillis = min(max(cpu.OfflineQuotaMillis-others, r.Guaranteed.CPUMillis), cpu.OfflineQuotaMillis)
		othersMem := offUse - max(p.MemoryBytes, 0)
		r.Limit.MemoryBytes = max(m.OfflineLimitBytes-othersMem, r.Guaranteed.MemoryBytes)
		r.Guaranteed.CPUMillis = min(r.Guaranteed.CPUMillis, r.Limit.CPUMillis)
		c.podBuf = append(c.podBuf, r)
	}
	return c.podBuf
}

func (c *Controller) reportUsage(now time.Time, pods []PodSample) Report {
	a := c.p.EWMAAlpha
	c.report = c.report[:0]
	var onCPU, onMem, offCPU, offMem int64
	for i := range pods {
		p := &pods[i]
		e := c.pods[p.ID]
		if e == nil {
			e = &ewma{}
			c.pods[p.ID] = e
		}
		cpu, mem := max(p.CPUUsedMillis, 0), max(p.MemoryBytes, 0)
		if e.seen != c.step {
			e.add(a, cpu, mem)
			e.seen = c.step
		}
		c.report = append(c.report, PodUsage{ID: p.ID, Tier: p.Tier, Usage: e.usage()})
		switch p.Tier {
		case cgroup.Online:
			onCPU, onMem = onCPU+cpu, onMem+mem
		case cgroup.Offline:
			offCPU, offMem = offCPU+cpu, offMem+mem
		}
	}
	for id, e := range c.pods {
		if e.seen != c.step {
			delete(c.pods, id)
		}
	}
	c.online.add(a, onCPU, onMem)
	c.offline.add(a, offCPU, offMem)
	return Report{Time: now, Pods: c.report, Online: c.online.usage(), Offline: c.offline.usage()}
}
