package chaosbench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/api"
)

// Nodelets is how many real nodelets a run has where they can run.
const Nodelets = 2

// NodeletPool is the pool of the real nodelets and of their job.
const NodeletPool = "chaos-real"

// realTasks is the number of tasks of the real job: each holds 500m of a
// node's 2 CPUs, so that the tasks of a node cut off fit on the other.
const realTasks = 4

// nodeletPollWait is the real nodelets' --poll-wait. The dispatcher
// counts a node with a target long-poll open as alive, and it does not
// see the poll's connection drop when the node is cut off: the node is
// marked down only after the poll's wait ends and then the TTL. The
// nodelet's default wait (30 s) would make a cut last 45 s.
const nodeletPollWait = 2 * time.Second

// modulePath is this module's path, looked for in go.mod when the shim
// must be built.
const modulePath = "github.com/sluicehq/sluice"

// payload is the real pods' program: it appends "start UNIXNS NODE POD"
// to /evidence/pods.log when it starts and "end UNIXNS NODE POD" when
// SIGTERM or SIGINT stops it (POD is the attempt's task ID with dots),
// the lines bench/fleet's pod log has. A pod run twice by its node (a
// container started again after the node was restarted) shows as two
// starts of the same pod on the same node.
const payload = `package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	node, pod := os.Getenv("SLUICE_NODE"), strings.ReplaceAll(os.Getenv("SLUICE_TASK_ID"), "/", ".")
	if err := note("start", node, pod); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	<-sigs
	if err := note("end", node, pod); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func note(what, node, pod string) error {
	f, err := os.OpenFile("/evidence/pods.log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(f, "%s %d %s %s\n", what, time.Now().UnixNano(), node, pod); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
`

// nodeletProc is one real `sluice nodelet` process and the proxies it
// reaches the replicas through (see cutProxy).
type nodeletProc struct {
	idx     int
	name    string
	args    []string
	proxies []*cutProxy // one per replica, in replica order
	p       *proc
}

// realNodes is what a run with real nodelets owns besides the cluster:
// the payload image, the shim, the evidence directory the pods write to,
// the nodelets and the job whose pods they run.
type realNodes struct {
	dir        string
	image      string // the payload's rootfs
	evidence   string // host directory mounted at /evidence in every pod
	shim       string // this run's own copy of sluice-shim
	cgroupRoot string // parent of both nodelets' cgroup roots
	nodes      []*nodeletProc
	jobID      string
}

// podLog is the path of the pods' evidence log.
func (rn *realNodes) podLog() string { return filepath.Join(rn.evidence, "pods.log") }

// errNoRealNodes is wrapped by the errors that make a run go without
// real nodelets (the kinds that need them are skipped, with the reason).
var errNoRealNodes = errors.New("no real nodelets")

// startNodelets prepares the image and the shim, starts the nodelets
// behind their proxies, submits the real job and waits until each of its
// tasks runs. An error wrapping errNoRealNodes means nodelets cannot run
// here; the caller skips their faults.
func (cl *cluster) startNodelets(ctx context.Context, runID string, client *api.Client) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: the container runtime needs root", errNoRealNodes)
	}
	rn := &realNodes{dir: filepath.Join(cl.dir, "real"), cgroupRoot: "sluice-" + runID}
	cl.real = rn
	rn.image = filepath.Join(rn.dir, "images", "payload")
	rn.evidence = filepath.Join(rn.dir, "evidence")
	for _, d := range []string{rn.evidence, filepath.Join(rn.image, "evidence")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("chaosbench: %w", err)
		}
	}
	if err := buildPayload(ctx, rn.image); err != nil {
		return fmt.Errorf("%w: %v", errNoRealNodes, err)
	}
	shim, err := cl.ownShim(ctx, rn.dir)
	if err != nil {
		return fmt.Errorf("%w: %v", errNoRealNodes, err)
	}
	rn.shim = shim
	for i := range Nodelets {
		n := &nodeletProc{idx: i + 1, name: fmt.Sprintf("chaos-nodelet-%d", i+1)}
		rewrite := map[string]string{}
		var bases []string
		for _, r := range cl.reps {
			p, err := newCutProxy(cl.cfg.Host, r.base)
			if err != nil {
				return err
			}
			n.proxies = append(n.proxies, p)
			rewrite[r.base] = p.base()
			bases = append(bases, p.base())
		}
		for _, p := range n.proxies {
			p.setRewrite(rewrite)
		}
		n.args = []string{"nodelet", "--dispatcher", strings.Join(bases, ","), "--name", n.name,
			"--runtime", "container", "--shim", rn.shim, "--state-dir", filepath.Join(rn.dir, n.name),
			"--image-roots", filepath.Dir(rn.image), "--volume-roots", rn.evidence + ":rw",
			"--listen", cl.cfg.Host + ":0", "--pool", NodeletPool, "--cpu", "2", "--memory", "2Gi",
			"--pod-network=false", "--overcommit=false", "--cgroup-root", rn.cgroupRoot + "/" + n.name,
			"--poll-wait", nodeletPollWait.String(), "--log-level", "info"}
		rn.nodes = append(rn.nodes, n)
		if err := cl.startNodelet(n); err != nil {
			return err
		}
	}
	spec := api.JobSpec{
		Name: "chaos-real", Pool: NodeletPool, Labels: map[string]string{"chaos-real": runID},
		Tasks: []api.TaskGroupSpec{{Name: "hold", Count: realTasks, Pod: api.PodSpec{
			Volumes: []api.Volume{{Name: "evidence", HostPath: &api.HostPathVolume{Path: rn.evidence}}},
			Containers: []api.ContainerSpec{{Name: "main", Image: api.Image{Rootfs: rn.image}, Command: []string{"/payload"},
				Mounts:    []api.Mount{{Volume: "evidence", Path: "/evidence"}},
				Resources: api.Resources{CPU: 500, Memory: 32 << 20}}},
		}}},
	}
	sctx, cancel := context.WithTimeout(ctx, cl.cfg.ReadyTimeout)
	defer cancel()
	res, err := client.Submit(sctx, []api.JobSpec{spec}, api.SubmitOptions{IdempotencyKey: runID + "-real"})
	if err != nil {
		return fmt.Errorf("chaosbench: submit the real job: %w", err)
	}
	if len(res.Jobs) != 1 {
		return fmt.Errorf("chaosbench: submit the real job: %d jobs answered", len(res.Jobs))
	}
	rn.jobID = res.Jobs[0]
	for {
		now := time.Now()
		runs, _, err := readEvidence(rn.podLog(), now)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if open := openRuns(runs, now); len(open) >= realTasks {
			return nil
		}
		if sctx.Err() != nil {
			st, _ := client.Job(ctx, rn.jobID)
			return fmt.Errorf("%w: the real job's %d pods did not all start within %v (job %s: %s; see %s/nodelet-*.log)",
				errNoRealNodes, realTasks, cl.cfg.ReadyTimeout, rn.jobID, st.State, cl.dir)
		}
		sleepCtx(sctx, 100*time.Millisecond)
	}
}

func (cl *cluster) startNodelet(n *nodeletProc) error {
	p, err := startProc(cl.cfg.Exe, n.args, cl.env, filepath.Join(cl.dir, fmt.Sprintf("nodelet-%d.log", n.idx)), nil)
	if err != nil {
		return err
	}
	n.p = p
	return nil
}

// ownShim copies the shim (Config.Shim, else sluice-shim beside Exe)
// into dir, or builds it there from this module's source: the run owns
// its copy, so that it can end every shim process of its own and none
// other.
func (cl *cluster) ownShim(ctx context.Context, dir string) (string, error) {
	dst := filepath.Join(dir, "sluice-shim")
	src := cl.cfg.Shim
	if src == "" {
		if s := filepath.Join(filepath.Dir(cl.cfg.Exe), "sluice-shim"); fileExists(s) {
			src = s
		}
	}
	if src != "" {
		if err := copyFile(src, dst, 0o755); err != nil {
			return "", fmt.Errorf("shim: %w", err)
		}
		return dst, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", fmt.Errorf("no sluice-shim given or beside %s, and no source to build one: %w", cl.cfg.Exe, err)
	}
	if err := goBuild(ctx, root, dst, "./cmd/sluice-shim", nil); err != nil {
		return "", fmt.Errorf("no sluice-shim given or beside %s: %w", cl.cfg.Exe, err)
	}
	return dst, nil
}

// buildPayload builds the payload, static, into dir/payload.
func buildPayload(ctx context.Context, dir string) error {
	src, err := os.MkdirTemp("", "sluice-chaos-payload-")
	if err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	defer os.RemoveAll(src)
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(payload), 0o644); err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module payload\n\ngo 1.22\n"), 0o644); err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	for _, d := range []string{"proc", "dev", "sys", "tmp", "etc"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return fmt.Errorf("payload: %w", err)
		}
	}
	return goBuild(ctx, src, filepath.Join(dir, "payload"), ".", []string{"CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOWORK=off"})
}

// goBuild builds pkg in dir into out, with env added to this process's
// environment.
func goBuild(ctx context.Context, dir, out, pkg string, env []string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s (the go command is needed): %v\n%s", pkg, err, b)
	}
	return nil
}

// moduleRoot is the nearest directory at or above the working directory
// whose go.mod declares this module.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			sc := bufio.NewScanner(strings.NewReader(string(b)))
			for sc.Scan() {
				if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "module" && f[1] == modulePath {
					return dir, nil
				}
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s at or above the working directory", modulePath)
		}
		dir = parent
	}
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// readEvidence reads the pods' evidence log: their runs (a run still
// open ends at now) and the pods started again on the same node while a
// start of theirs was open (pods run twice by their node).
func readEvidence(path string, now time.Time) ([]podRun, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("chaosbench: evidence: %w", err)
	}
	defer f.Close()
	var runs []podRun
	var twice []string
	open := map[string][]int{} // node+" "+pod → indexes in runs
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 4 {
			continue
		}
		var at int64
		if _, err := fmt.Sscan(fs[1], &at); err != nil {
			return nil, nil, fmt.Errorf("chaosbench: evidence %s: line %q: %w", path, sc.Text(), err)
		}
		key := fs[2] + " " + fs[3]
		switch fs[0] {
		case "start":
			if len(open[key]) > 0 {
				twice = append(twice, key)
			}
			open[key] = append(open[key], len(runs))
			runs = append(runs, podRun{node: fs[2], pod: fs[3], start: at, end: -1})
		case "end":
			for _, i := range open[key] {
				runs[i].end = at
			}
			delete(open, key)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("chaosbench: evidence %s: %w", path, err)
	}
	for _, is := range open {
		for _, i := range is {
			runs[i].end = now.UnixNano()
		}
	}
	return runs, twice, nil
}

// openRuns returns the runs still open at now (as readEvidence closed
// them).
func openRuns(runs []podRun, now time.Time) []podRun {
	var out []podRun
	for _, r := range runs {
		if r.end == now.UnixNano() {
			out = append(out, r)
		}
	}
	return out
}

// busiestNodelet returns the nodelet running the most real pods now;
// among equals, the one at pick modulo their number.
func (rn *realNodes) busiestNodelet(pick int) (*nodeletProc, error) {
	now := time.Now()
	runs, _, err := readEvidence(rn.podLog(), now)
	if err != nil {
		return nil, err
	}
	count := map[string]int{}
	for _, r := range openRuns(runs, now) {
		count[r.node]++
	}
	var best []*nodeletProc
	most := -1
	for _, n := range rn.nodes {
		switch c := count[n.name]; {
		case c > most:
			best, most = []*nodeletProc{n}, c
		case c == most:
			best = append(best, n)
		}
	}
	return best[pick%len(best)], nil
}

// setCut cuts or heals every proxy of n.
func (n *nodeletProc) setCut(cut bool) {
	for _, p := range n.proxies {
		p.setCut(cut)
	}
}

// NodeletResult is what the real nodelets' pods showed.
type NodeletResult struct {
	// Pods counts the pod runs in the evidence.
	Pods int `json:"pods"`
	// StartedTwice lists the pods (node and attempt) a node started
	// again while they ran: a pod run twice after its node was
	// restarted.
	StartedTwice []string `json:"started_twice,omitempty"`
	// Cuts counts the CutNodelet faults injected.
	Cuts int `json:"cuts"`
	// Moved counts the tasks of a node cut off that started on the other
	// while the cut lasted.
	Moved int `json:"moved"`
	// StaleStopMs is the longest time from a cut's heal to its node
	// stopping a pod it ran when it was cut off: how long a node back
	// takes to stop its stale pods.
	StaleStopMs int64 `json:"stale_stop_ms"`
	// DoubleRun is how long a task ran on both nodes at once.
	DoubleRun DoubleRun `json:"double_run"`
	// StalePods lists the pods still running after their job was
	// cancelled and the drain: pods a node never stopped.
	StalePods []string `json:"stale_pods,omitempty"`
}

// finishReal cancels the real job, waits until its pods ended (or ctx
// ends), and reads what the evidence shows; cuts are the [from, to)
// intervals of the CutNodelet faults, victims their nodes.
func (cl *cluster) finishReal(ctx context.Context, client *api.Client, cuts [][2]time.Time, victims []string) (NodeletResult, error) {
	rn := cl.real
	var out NodeletResult
	if _, err := client.Cancel(ctx, rn.jobID); err != nil {
		return out, fmt.Errorf("chaosbench: cancel the real job: %w", err)
	}
	var runs []podRun
	for {
		now := time.Now()
		rs, twice, err := readEvidence(rn.podLog(), now)
		if err != nil {
			return out, err
		}
		runs, out.StartedTwice = rs, twice
		open := openRuns(rs, now)
		out.StalePods = nil
		for _, r := range open {
			out.StalePods = append(out.StalePods, r.node+" "+r.pod)
		}
		if len(open) == 0 || ctx.Err() != nil {
			break
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
	out.Pods = len(runs)
	out.DoubleRun = doubleRuns(runs)
	moved := map[string]bool{}
	for i, c := range cuts {
		on := map[string]bool{} // tasks running on the victim at the cut
		for _, r := range runs {
			if r.node == victims[i] && r.start < c[0].UnixNano() && r.end >= c[0].UnixNano() {
				on[taskOf(r.pod)] = true
				if r.end >= c[1].UnixNano() {
					out.StaleStopMs = max(out.StaleStopMs, time.Duration(r.end-c[1].UnixNano()).Milliseconds())
				}
			}
		}
		for _, r := range runs {
			if r.node != victims[i] && on[taskOf(r.pod)] && r.start >= c[0].UnixNano() && r.start < c[1].UnixNano() {
				moved[taskOf(r.pod)] = true
			}
		}
	}
	out.Moved, out.Cuts = len(moved), len(cuts)
	return out, nil
}

// close stops the nodelets and their proxies, then ends whatever of the
// run's pods and shims outlived them: the processes in the run's cgroups
// and those running the run's own shim, and the pods' volume mounts.
func (rn *realNodes) close() {
	for _, n := range rn.nodes {
		if n.p != nil && !n.p.exited() {
			n.p.stop(10 * time.Second)
		}
		for _, p := range n.proxies {
			_ = p.Close()
		}
	}
	killCgroupTree(rn.cgroupRoot)
	if rn.shim != "" {
		killExe(rn.shim)
	}
	unmountBelow(rn.dir)
	rn.nodes = nil
}

// unmountBelow detaches every mount point below dir (the pods' volumes
// of pods ended without their runtime), deepest first.
func unmountBelow(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			points = append(points, f[4])
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	for _, p := range points {
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
	}
}

// killCgroupTree kills every process in the cgroup rel (relative to each
// hierarchy's root) and below it, in every hierarchy of /sys/fs/cgroup,
// and removes the emptied cgroups.
func killCgroupTree(rel string) {
	roots := []string{filepath.Join("/sys/fs/cgroup", rel)}
	if hs, err := os.ReadDir("/sys/fs/cgroup"); err == nil {
		for _, h := range hs {
			if h.IsDir() {
				roots = append(roots, filepath.Join("/sys/fs/cgroup", h.Name(), rel))
			}
		}
	}
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			dirs = append(dirs, p)
			for _, f := range []string{"cgroup.procs", "tasks"} {
				b, err := os.ReadFile(filepath.Join(p, f))
				if err != nil {
					continue
				}
				for _, s := range strings.Fields(string(b)) {
					var pid int
					if _, err := fmt.Sscan(s, &pid); err == nil && pid > 1 {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, d := range dirs {
			for range 20 { // the killed processes leave the cgroup shortly
				if err := os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}

// killExe kills every process whose executable is exe.
func killExe(exe string) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil || pid <= 1 {
			continue
		}
		if p, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && p == exe {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
