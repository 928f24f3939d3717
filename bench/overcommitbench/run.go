package overcommitbench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/bench/submitbench"
	"github.com/sluicehq/sluice/dispatcher"
	"github.com/sluicehq/sluice/dispatcher/server"
	"github.com/sluicehq/sluice/nodelet/cgroup"
	"github.com/sluicehq/sluice/nodelet/remote"
)

// Run measures overcommit on real containers on this host (see the
// package comment). The caller's binary must have called container.Reexec
// first thing in main (a test: in TestMain).
func Run(ctx context.Context, cfg Config) (res Result, err error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if os.Geteuid() != 0 {
		return Result{}, ErrNotRoot
	}
	if err := checkCNI(); err != nil {
		return Result{}, err
	}
	host, err := remote.HostCapacity()
	if err != nil {
		return Result{}, fmt.Errorf("overcommitbench: host capacity: %w", err)
	}
	cfg = cfg.withDefaults(host.CPU, host.Memory)
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	start := time.Now()

	work := cfg.WorkDir
	if work == "" {
		d, err := os.MkdirTemp("", "sluice-ocbench-")
		if err != nil {
			return Result{}, fmt.Errorf("overcommitbench: %w", err)
		}
		defer os.RemoveAll(d)
		work = d
	}
	// The containers' processes read the image through the directory.
	if err := os.Chmod(work, 0o755); err != nil {
		return Result{}, fmt.Errorf("overcommitbench: %w", err)
	}
	image := cfg.Image
	if image == "" {
		image = filepath.Join(work, "images", "workload")
		if err := buildImage(ctx, image); err != nil {
			return Result{}, err
		}
	} else if image, err = filepath.Abs(image); err != nil {
		return Result{}, fmt.Errorf("overcommitbench: image: %w", err)
	}

	cl, err := submitbench.StartCluster(ctx, 1, filepath.Join(work, "dispatcher"), dispatcher.Config{})
	if err != nil {
		return Result{}, fmt.Errorf("overcommitbench: dispatcher: %w", err)
	}
	defer cl.Close()
	n, err := startNode(ctx, cfg, work, filepath.Dir(image), cl.Addrs())
	if err != nil {
		return Result{}, err
	}
	defer func() {
		if serr := n.stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	b := &bench{cfg: cfg, srv: cl.Servers[0], node: n, image: image, start: time.Now()}
	res, err = b.run(ctx)
	res.Seconds = time.Since(start).Seconds()
	return res, err
}

// bench is one run's state.
type bench struct {
	cfg   Config
	srv   *server.Server
	node  *node
	image string
	start time.Time

	mu struct {
		sync.Mutex
		phase       string
		series      []Sample
		offlineJobs []string // the offline jobs submitted, in order
	}
}

func (b *bench) setPhase(p string) {
	b.mu.Lock()
	b.mu.phase = p
	b.mu.Unlock()
	b.cfg.Logger.Info("overcommitbench: phase", "phase", p, "t", time.Since(b.start).Round(time.Millisecond))
}

func (b *bench) run(ctx context.Context) (Result, error) {
	cfg := b.cfg
	res := Result{Mode: "containers", NodeCPU: cfg.NodeCPU, NodeMemory: cfg.NodeMemory, OnlinePods: cfg.OnlinePods,
		OnlineRequestRatio: float64(int64(cfg.OnlinePods)*cfg.OnlineCPU+cfg.ProbeCPU) / float64(cfg.NodeCPU)}
	b.setPhase("online")
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		b.sample(sampleCtx)
	}()
	defer func() {
		stopSampling()
		<-sampled
	}()

	// Online work: the burners and the probe server.
	online, err := b.submit(ctx, b.onlineJob())
	if err != nil {
		return res, err
	}
	tasks, err := b.waitRunning(ctx, online, cfg.OnlinePods+1, 2*time.Minute)
	if err != nil {
		return res, err
	}
	url, err := probeURL(tasks)
	if err != nil {
		return res, err
	}
	onlineAt := time.Now()
	if err := b.waitUsage(ctx, onlineAt.Add(cfg.Warmup), 30*time.Second); err != nil {
		return res, err
	}
	p := newProbe(url)
	defer p.close()
	if err := p.ready(ctx, 30*time.Second); err != nil {
		return res, err
	}

	b.setPhase("unloaded")
	unloaded, err := p.run(ctx, cfg.Unloaded, cfg.ProbeRate)
	if err != nil {
		return res, err
	}
	res.ProbeP50UnloadedMs, res.ProbeP99UnloadedMs = unloaded.p50, unloaded.p99
	res.ProbeRequests, res.ProbeErrors = unloaded.n, unloaded.errors

	b.setPhase("fill")
	if err := b.fill(ctx, &res); err != nil {
		return res, err
	}

	b.setPhase("loaded")
	loaded, err := p.run(ctx, cfg.Loaded, cfg.ProbeRate)
	if err != nil {
		return res, err
	}
	res.ProbeP50Ms, res.ProbeP99Ms = loaded.p50, loaded.p99
	res.ProbeRequests += loaded.n
	res.ProbeErrors += loaded.errors
	b.setPhase("stop")
	stopSampling()
	<-sampled

	if err := b.throttled(&res); err != nil {
		return res, err
	}
	b.killed(&res)
	b.summarize(&res)
	return res, nil
}

// submit submits one job through the API and returns its ID.
func (b *bench) submit(ctx context.Context, job api.JobSpec) (string, error) {
	c := b.node.client
	r, err := c.Submit(ctx, []api.JobSpec{job}, api.SubmitOptions{})
	if err != nil {
		return "", fmt.Errorf("overcommitbench: submit %s: %w", job.Name, err)
	}
	if len(r.Jobs) != 1 {
		return "", fmt.Errorf("overcommitbench: submit %s: %d job IDs back, want 1", job.Name, len(r.Jobs))
	}
	return r.Jobs[0], nil
}

// workloadPod is a pod running the workload program with args, asking
// for cpu and memory, in network mode mode.
func (b *bench) workloadPod(cpu, memory int64, mode string, ports []api.Port, args ...string) api.PodSpec {
	return api.PodSpec{
		Network: api.NetworkSpec{Mode: mode},
		Containers: []api.ContainerSpec{{
			Name: "main", Image: api.Image{Rootfs: b.image}, Command: []string{"/workload"}, Args: args,
			Resources: api.Resources{CPU: cpu, Memory: memory, Ports: ports},
		}},
	}
}

// onlineJob is the online burners and the probe server.
func (b *bench) onlineJob() api.JobSpec {
	cfg := b.cfg
	return api.JobSpec{Name: "ocbench-online", QoS: api.QoSOnline, Tasks: []api.TaskGroupSpec{
		{Name: "burn", Count: int64(cfg.OnlinePods), Pod: b.workloadPod(cfg.OnlineCPU, cfg.OnlineMemory, api.NetworkNone, nil,
			"burn", "-duty", strconv.FormatFloat(cfg.OnlineDuty, 'f', -1, 64), "-period", cfg.OnlinePeriod.String(),
			"-memory", strconv.FormatInt(cfg.OnlineTouch, 10))},
		{Name: "probe", Count: 1, Pod: b.workloadPod(cfg.ProbeCPU, cfg.ProbeMemory, api.NetworkBridge, []api.Port{{Name: "http"}},
			"http-serve", "-requests", "1000000000", "-timeout", "24h")},
	}}
}

// offlineJob is count offline pods that burn a whole CPU each and keep
// memory resident.
func (b *bench) offlineJob(i, count int) api.JobSpec {
	cfg := b.cfg
	return api.JobSpec{Name: fmt.Sprintf("ocbench-offline-%d", i), QoS: api.QoSOffline, Tasks: []api.TaskGroupSpec{
		{Name: "burn", Count: int64(count), Pod: b.workloadPod(cfg.OfflineCPU, cfg.OfflineMemory, api.NetworkNone, nil,
			"burn", "-duty", "1", "-memory", strconv.FormatInt(cfg.OfflineTouch, 10))},
	}}
}

// pollEvery is the step of the waits that poll the dispatcher's state.
const pollEvery = 100 * time.Millisecond

// waitRunning waits up to timeout for want tasks of job to run and
// returns them. A task that ends first fails the wait.
func (b *bench) waitRunning(ctx context.Context, job string, want int, timeout time.Duration) ([]api.TaskStatus, error) {
	deadline := time.Now().Add(timeout)
	for {
		list, err := b.node.client.Tasks(ctx, job, "", 0)
		if err != nil {
			return nil, fmt.Errorf("overcommitbench: list job %s's tasks: %w", job, err)
		}
		running := 0
		var states []string
		for _, t := range list.Tasks {
			switch {
			case t.State == api.TaskRunning:
				running++
			case t.State.Done():
				return nil, fmt.Errorf("overcommitbench: task %s of job %s ended %s (%s) before the run", t.ID, job, t.State, t.Reason)
			}
			states = append(states, t.ID+" "+t.State.String())
		}
		if running >= want {
			return list.Tasks, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("overcommitbench: %d of %d tasks of job %s run after %s: %s", running, want, job, timeout, strings.Join(states, ", "))
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return nil, err
		}
	}
}

// waitUsage waits until the dispatcher holds a heartbeat of the node sent
// after since, so that its estimates see the online pods running.
func (b *bench) waitUsage(ctx context.Context, since time.Time, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, at, ok := b.srv.Dispatcher().NodeUsage(nodeName); ok && at.After(since) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("overcommitbench: no heartbeat with usage from the node within %s", timeout)
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return err
		}
	}
}

// probeURL is the probe server's URL, at its node's host IP and its mapped
// port.
func probeURL(tasks []api.TaskStatus) (string, error) {
	for _, t := range tasks {
		if t.Group != "probe" {
			continue
		}
		for _, p := range t.Ports {
			if p.Name == "http" && p.Port > 0 && t.Host != "" {
				return "http://" + net.JoinHostPort(t.Host, strconv.Itoa(int(p.Port))) + "/", nil
			}
		}
		return "", fmt.Errorf("overcommitbench: the probe task %s lists no host and port http (host %q, ports %v)", t.ID, t.Host, t.Ports)
	}
	return "", errors.New("overcommitbench: no probe task")
}

// fill submits offline jobs of OfflineStep pods until placement leaves
// some pending for RefuseWait, or MaxOffline pods were submitted, and
// records the placed and pending counts and the reason.
func (b *bench) fill(ctx context.Context, res *Result) error {
	cfg := b.cfg
	for submitted := 0; submitted < cfg.MaxOffline; {
		count := min(cfg.OfflineStep, cfg.MaxOffline-submitted)
		id, err := b.submit(ctx, b.offlineJob(len(b.offlineJobs()), count))
		if err != nil {
			return err
		}
		b.mu.Lock()
		b.mu.offlineJobs = append(b.mu.offlineJobs, id)
		b.mu.Unlock()
		submitted += count
		refused, err := b.settle(ctx, id, count)
		if err != nil {
			return err
		}
		if refused {
			break
		}
	}
	running, pending := b.offlineCounts()
	res.OfflinePlaced, res.OfflinePending = running, pending
	for _, p := range b.srv.Dispatcher().Diagnosis() {
		if p.Reason != "" {
			res.RefusedReason = p.Reason
			break
		}
	}
	b.cfg.Logger.Info("overcommitbench: fill done", "placed", running, "pending", pending, "reason", res.RefusedReason)
	return nil
}

// settle waits until the count tasks of offline job id all run (false), or
// RefuseWait passes with some of them not placed (true). Placed tasks
// that are starting get up to a minute more to run.
func (b *bench) settle(ctx context.Context, id string, count int) (refused bool, err error) {
	refuseAt := time.Now().Add(b.cfg.RefuseWait)
	deadline := time.Now().Add(time.Minute)
	for {
		list, err := b.node.client.Tasks(ctx, id, "", 0)
		if err != nil {
			return false, fmt.Errorf("overcommitbench: list job %s's tasks: %w", id, err)
		}
		running := 0
		for _, t := range list.Tasks {
			if t.State == api.TaskRunning {
				running++
			}
		}
		placed := len(list.Tasks) // JobTasks lists placed tasks only
		switch {
		case running == count:
			return false, nil
		case placed < count && time.Now().After(refuseAt) && running == placed:
			return true, nil
		case time.Now().After(deadline):
			return false, fmt.Errorf("overcommitbench: offline job %s: %d of %d tasks placed, %d running after a minute", id, placed, count, running)
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return false, err
		}
	}
}

// offlineCounts counts the offline tasks placed (assigned, starting or
// running) and pending in the dispatcher's state.
func (b *bench) offlineCounts() (running, pending int) {
	for _, id := range b.offlineJobs() {
		js, ok := b.srv.FSM().Job(id)
		if !ok {
			continue
		}
		for _, g := range js.Groups {
			running += int(g.Active)
			pending += int(g.Pending)
		}
	}
	return running, pending
}

// throttled reads the online tier's and its pods' CPU throttling.
func (b *bench) throttled(res *Result) error {
	mgr := b.node.mgr
	s, err := mgr.TierSample(cgroup.Online)
	if err != nil {
		return fmt.Errorf("overcommitbench: online tier cpu.stat: %w", err)
	}
	ns, periods := s.CPUThrottledNS, s.CPUThrottled
	pods, err := mgr.Pods(cgroup.Online)
	if err != nil {
		return fmt.Errorf("overcommitbench: online pods: %w", err)
	}
	for _, p := range pods {
		ps, err := mgr.PodSample(cgroup.Online, p)
		if err != nil {
			return fmt.Errorf("overcommitbench: online pod %s cpu.stat: %w", p, err)
		}
		ns += ps.CPUThrottledNS
		periods += ps.CPUThrottled
	}
	res.OnlineThrottledMs = float64(ns) / 1e6
	res.OnlineThrottledPeriods = periods
	return nil
}

// killed counts the offline pods killed for memory: by the nodelet's
// memory killer (the overcommit loop's count of its kills) and by the
// kernel at a pod's limit (the current attempts that ended so), and the
// earlier attempts of offline tasks, whatever ended them.
func (b *bench) killed(res *Result) {
	by := map[string]int{}
	if k := b.node.agent.Overcommit().Stats().Kills; k > 0 {
		by[string(api.ReasonMemoryKiller)] = int(k)
	}
	for _, id := range b.offlineJobs() {
		tasks, _ := b.srv.FSM().JobTasks(id, "", 0)
		for _, t := range tasks {
			res.OfflineRetried += int(max(t.Attempt-1, 0)) // attempts count from 1
			if t.Reason == api.ReasonOOMKilled {
				by[string(t.Reason)]++
			}
		}
	}
	for _, n := range by {
		res.OfflineKilled += n
	}
	if len(by) > 0 {
		res.OfflineKilledBy = by
	}
}

// offlineJobs returns the offline jobs submitted so far.
func (b *bench) offlineJobs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.mu.offlineJobs...)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("overcommitbench: %w", ctx.Err())
	case <-t.C:
		return nil
	}
}
