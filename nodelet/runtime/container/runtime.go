package container

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	"golang.org/x/sys/unix"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/nodelet/runtime"
	"github.com/sluicehq/sluice/nodelet/runtime/container/cni"
	"github.com/sluicehq/sluice/nodelet/runtime/container/shim"
)

// Config configures a Runtime. Zero values mean the documented defaults.
type Config struct {
	// StateDir holds one directory per pod: its record, libcontainer
	// state and logs. Keep it outside the binary's directory: inside it,
	// libcontainer cannot seal the binary with an overlay and copies it
	// whole into memory for every container start (New logs a warning).
	// Default
	// /run/sluice/containers.
	StateDir string
	// CgroupParent is used for pods whose spec names none. Default
	// "sluice".
	CgroupParent string
	// LogMaxBytes caps each container's log file; past it the log
	// rotates to one previous file, checked every second of Clock.
	// Default 16 MiB.
	LogMaxBytes int64
	// DefaultPids is the pids limit of a container that asks for none.
	// Default 4096.
	DefaultPids int64
	// ImageDir caches OCI layout images, unpacked once per manifest
	// digest. Default /var/lib/sluice/images.
	ImageDir string
	// ImageRoots are the directories a pod's images (Rootfs and OCILayout
	// paths) must lie below, named so and after symbolic links
	// (runtime.ConfineImage); Start refuses others with an
	// runtime.ErrImageDenied error. Each is a clean absolute path other
	// than "/" (runtime.CheckImageRoots). Default: ImageDir alone.
	ImageRoots []string
	// ScratchDir holds the filesystem image of each scratch volume,
	// ScratchDir/<pod ID>/<volume>.img, allocated in full: put it on the
	// disk the node advertises. A Runtime removes what it finds there of
	// pods its StateDir does not have, so every Runtime needs its own.
	// Default StateDir/.scratch.
	ScratchDir string
	// Logger receives what the runtime does in the background. Default:
	// discarded.
	Logger *slog.Logger
	// Network, when set, configures the node's pod network, which
	// bridge-mode pods (runtime.NetworkBridge) are attached to through
	// the CNI plugins (package cni); nil: bridge-mode pods are refused
	// as a bad spec. Default nil.
	Network *cni.Config
	// Shim is the sluice-shim binary (cmd/sluice-shim) that creates each
	// container, so that the container's init, which re-executes the
	// binary that created it, boots that small program instead of this
	// process's. Default: sluice-shim in the directory of this process's
	// binary if it is there, else none: containers are created in this
	// process.
	Shim string
	// Clock times the log cap's rounds. The waits that stand for the
	// processes (a stop's grace, an exit, a sandbox's answer) stay on real
	// time. Default the system clock.
	Clock clock.Clock
}

// Defaults.
const (
	DefaultStateDir     = "/run/sluice/containers"
	DefaultCgroupParent = "sluice"
	DefaultLogMaxBytes  = 16 << 20
	DefaultPids         = 4096
	DefaultImageDir     = "/var/lib/sluice/images"
)

func (c *Config) setDefaults() {
	if c.StateDir == "" {
		c.StateDir = DefaultStateDir
	}
	if c.CgroupParent == "" {
		c.CgroupParent = DefaultCgroupParent
	}
	if c.LogMaxBytes == 0 {
		c.LogMaxBytes = DefaultLogMaxBytes
	}
	if c.DefaultPids == 0 {
		c.DefaultPids = DefaultPids
	}
	if c.ImageDir == "" {
		c.ImageDir = DefaultImageDir
	}
	if c.ScratchDir == "" {
		c.ScratchDir = filepath.Join(c.StateDir, ".scratch")
	}
	if len(c.ImageRoots) == 0 {
		c.ImageRoots = []string{c.ImageDir}
	}
	c.Clock = clock.OrSystem(c.Clock)
	if c.Shim == "" {
		c.Shim = shimBesideBinary()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Runtime runs pods as libcontainer containers. See the package comment.
type Runtime struct {
	cfg     Config
	images  *imageCache
	cpusets *cpusetParents
	mkfs    string       // mkfs.ext4, "" if the host has none
	net     *cni.Network // nil without Config.Network
	shimMu  sync.Mutex
	shim    *shimClient   // guarded by shimMu; nil: containers are created in this process
	stop    chan struct{} // closed by Close
	wg      sync.WaitGroup
	mu      struct {
		sync.Mutex
		closed   bool
		pods     map[string]*pod
		starting map[string]bool
	}
}

var _ runtime.Runtime = (*Runtime)(nil)

// New returns a Runtime over cfg.StateDir, adopting the pods an earlier
// Runtime left there: running ones are watched again, ended ones are
// reported, half-started ones are cleaned away.
func New(cfg Config) (*Runtime, error) {
	cfg.setDefaults()
	if err := runtime.CheckImageRoots(cfg.ImageRoots); err != nil {
		return nil, fmt.Errorf("container runtime: %w", err)
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("container runtime: must run as root")
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("container runtime: %w", err)
	}
	if exe, ok := stateUnderBinary(cfg.StateDir); ok {
		cfg.Logger.Warn("state directory is inside the binary's directory: every container start copies the binary",
			"state_dir", cfg.StateDir, "binary", exe)
	}
	r := &Runtime{cfg: cfg, stop: make(chan struct{}), images: &imageCache{root: cfg.ImageDir}, cpusets: newCpusetParents(), mkfs: findMkfs()}
	if cfg.Network != nil {
		n, err := cni.New(*cfg.Network)
		if err != nil {
			return nil, fmt.Errorf("container runtime: %w", err)
		}
		r.net = n
	}
	if cfg.Shim != "" {
		sh, err := startShim(cfg.Shim)
		if err != nil {
			return nil, fmt.Errorf("container runtime: %w", err)
		}
		r.shim = sh
	} else {
		cfg.Logger.Warn("no sluice-shim beside the binary: containers are created in this process, and each container's init boots the whole binary")
	}
	r.mu.pods = map[string]*pod{}
	r.mu.starting = map[string]bool{}
	ents, err := os.ReadDir(cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("container runtime: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() || runtime.CheckName(e.Name()) != "" {
			continue
		}
		p, err := r.adopt(e.Name())
		if err != nil {
			r.cfg.Logger.Warn("cannot adopt pod; cleaning it away", "pod", e.Name(), "err", err)
			r.cleanup(e.Name(), nil)
			continue
		}
		r.mu.pods[p.id] = p
	}
	r.removeOrphanScratch(r.mu.pods)
	r.detachOrphans()
	r.wg.Add(1)
	go r.janitor()
	return r, nil
}

// stateUnderBinary reports whether dir lies within the directory of this
// process's binary. libcontainer seals the binary it re-executes as a
// container's init with an overlay of that directory and the container's
// state directory, which the kernel refuses when one contains the other;
// it then falls back to copying the binary.
func stateUnderBinary(dir string) (exe string, ok bool) {
	exe, err := os.Executable()
	if err != nil {
		return "", false
	}
	bin, err1 := filepath.EvalSymlinks(filepath.Dir(exe))
	state, err2 := filepath.EvalSymlinks(dir)
	if err1 != nil || err2 != nil {
		return exe, false
	}
	rel, err := filepath.Rel(bin, state)
	return exe, err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// pod is one pod the Runtime knows. Its record is immutable; mu guards
// the rest.
type pod struct {
	id      string
	dir     string
	rec     record
	sandbox *pidWatch // nil once gone, and for a pod inside a capbox
	// nsPid is the process whose namespaces the containers join: the
	// sandbox's, or its capbox's sandbox's. Set by Start only.
	nsPid      int
	containers []*ctr
	done       chan struct{} // closed after exit is set
	mu         struct {
		sync.Mutex
		left     int // containers still running
		exit     *runtime.Exit
		finished time.Time
	}
}

type ctr struct {
	name  string
	lc    *libcontainer.Container // nil if its state is gone
	watch *pidWatch               // nil unless running when watched
	shim  *shimClient             // the shim that started it; nil: this process
	exit  *runtime.ContainerExit  // guarded by pod.mu
}

// reap collects the exit of c's init once it has ended.
func (c *ctr) reap() (code int, known bool) {
	if c.shim != nil {
		return c.shim.reap(c.watch.pid)
	}
	return shim.Reap(c.watch.pid)
}

// record is a pod's pod.json.
type record struct {
	Spec         runtime.PodSpec
	CgroupParent string // the parent in effect (the spec's or the default)
	StartedAt    time.Time
}

// sandboxRecord is a pod's sandbox.json.
type sandboxRecord struct {
	Pid       int
	StartTime uint64
}

// exitRecord is a pod's exit.json, or a container's exit-NAME.json.
type exitRecord struct {
	Exit       runtime.Exit
	Unknown    bool
	FinishedAt time.Time
}

const (
	recordFile  = "pod.json"
	sandboxFile = "sandbox.json"
	startedFile = "started"
	exitFile    = "exit.json"
	lcDir       = "libcontainer"
	logsDir     = "logs"
	sandboxName = "_sandbox" // cgroup of the sandbox; no container name starts with '_'
)

func (r *Runtime) podDir(id string) string { return filepath.Join(r.cfg.StateDir, id) }

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// validate adds the checks of this runtime and this host to spec's own.
// It returns each container's image path (its Rootfs or OCILayout) as
// runtime.ConfineImage resolved it below the image roots: Start uses those,
// not the spec's, so that what was checked is what runs.
func (r *Runtime) validate(spec *runtime.PodSpec) ([]string, error) {
	var e runtime.SpecError
	if err := spec.Validate(); err != nil {
		var se *runtime.SpecError
		if !errors.As(err, &se) {
			return nil, err
		}
		e.Problems = append(e.Problems, se.Problems...)
	}
	var si unix.Sysinfo_t
	_ = unix.Sysinfo(&si)
	hostMem := int64(si.Totalram) * int64(si.Unit)
	cores := int64(goruntime.NumCPU())
	if spec.SharePID && spec.InPod != "" {
		// The namespace's holder is the pod's sandbox, and a pod inside a
		// capbox has none: it uses the capbox's.
		e.Add("share_pid", "a shared PID namespace is not supported for a pod inside a capbox")
	}
	switch {
	case spec.InPod != "" && len(spec.Ports) > 0:
		// The capbox's network namespace was attached, with its ports,
		// when it started.
		e.Add("ports", "a pod inside a capbox shares the capbox's network, whose ports are mapped when it starts: it maps none of its own")
	case spec.InPod == "" && spec.Network == runtime.NetworkBridge && r.net == nil:
		e.Add("network", "bridge mode needs the node's pod network, and this runtime has none configured")
	}
	if d := spec.ResourceDir; d != "" {
		if st, err := os.Stat(d); err != nil {
			e.Add("resource_dir", "%v", err)
		} else if !st.IsDir() {
			e.Add("resource_dir", "%s is not a directory", d)
		}
	}
	for i := range spec.Volumes {
		if spec.Volumes[i].IsScratch() && r.mkfs == "" {
			e.Add(fmt.Sprintf("volumes[%d].scratch", i), "scratch volumes need mkfs.ext4, which this host lacks")
		}
	}
	images := make([]string, len(spec.Containers))
	for i := range spec.Containers {
		c := &spec.Containers[i]
		f := fmt.Sprintf("containers[%d]", i)
		switch {
		case c.Image.OCILayout != "":
			layout, ok := r.confine(&e, f+".image.oci_layout", c.Image.OCILayout)
			if !ok {
				break
			}
			if _, err := resolveManifest(layout, imageRef(c.Image.Ref)); err != nil {
				e.Add(f+".image.oci_layout", "%v", err)
			}
			images[i] = layout
		case c.Image.Rootfs != "":
			rootfs, ok := r.confine(&e, f+".image.rootfs", c.Image.Rootfs)
			if !ok {
				break
			}
			if st, err := os.Stat(rootfs); err != nil {
				e.Add(f+".image.rootfs", "%v", err)
			} else if !st.IsDir() {
				e.Add(f+".image.rootfs", "%s is not a directory", c.Image.Rootfs)
			} else if len(c.Args) > 0 && filepath.IsAbs(c.Args[0]) {
				if _, err := os.Lstat(filepath.Join(rootfs, c.Args[0])); err != nil {
					e.Add(f+".args[0]", "program %s is not in the image", c.Args[0])
				}
			}
			images[i] = rootfs
		}
		m := c.Resources.MemoryBytes
		switch {
		case m > 0 && m < minMemory:
			e.Add(f+".resources.memory", "%d bytes is below the minimum of %d a container needs", m, minMemory)
		case hostMem > 0 && m > hostMem:
			e.Add(f+".resources.memory", "%d bytes is more than the host's %d", m, hostMem)
		}
		if c.Resources.MilliCPU > cores*1000 {
			e.Add(f+".resources.cpu", "%d millicores is more than the host's %d cores", c.Resources.MilliCPU, cores)
		}
	}
	return images, e.Err()
}

// confine resolves image path p below the image roots, recording a
// problem of field in e if it is not there; ok is false then.
func (r *Runtime) confine(e *runtime.SpecError, field, p string) (resolved string, ok bool) {
	resolved, err := runtime.ConfineImage(r.cfg.ImageRoots, p)
	switch {
	case errors.Is(err, runtime.ErrImageDenied):
		e.AddErr(runtime.ErrImageDenied, field, "%v", err)
	case err != nil:
		e.Add(field, "%v", err)
	}
	return resolved, err == nil
}

// Start implements runtime.Runtime.
func (r *Runtime) Start(ctx context.Context, spec runtime.PodSpec) (err error) {
	images, err := r.validate(&spec)
	if err != nil {
		return fmt.Errorf("start pod %q: %w", spec.ID, err)
	}
	id := spec.ID
	r.mu.Lock()
	switch {
	case r.mu.closed:
		r.mu.Unlock()
		return runtime.ErrClosed
	case r.mu.pods[id] != nil || r.mu.starting[id]:
		r.mu.Unlock()
		return fmt.Errorf("start pod %q: %w", id, runtime.ErrExists)
	}
	r.mu.starting[id] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.mu.starting, id)
		r.mu.Unlock()
	}()
	dir := r.podDir(id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("start pod %q: %w", id, runtime.ErrExists)
		}
		return fmt.Errorf("start pod %q: %w", id, err)
	}
	parent := spec.CgroupParent
	if parent == "" {
		parent = r.cfg.CgroupParent
	}
	var host *pod
	if spec.InPod != "" {
		// Inside a capbox: in its cgroup, joining its sandbox.
		if host, err = r.hostPod(spec.InPod); err != nil {
			os.Remove(dir)
			return fmt.Errorf("start pod %q: %w", id, err)
		}
		parent = path.Join(host.rec.CgroupParent, host.id)
	}
	if err := r.cpusets.prepare(parent); err != nil {
		r.cfg.Logger.Warn("cpuset parent not prepared; libcontainer will fill each new cpuset", "err", err)
	}
	p := &pod{id: id, dir: dir, done: make(chan struct{}), rec: record{Spec: spec, CgroupParent: parent, StartedAt: time.Now()}}
	started := false
	defer func() {
		if err != nil && !started {
			r.abort(p)
			err = fmt.Errorf("start pod %q: %w", id, err)
		}
	}()
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, d := range []string{lcDir, logsDir} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			return err
		}
	}
	if err := writeJSON(filepath.Join(dir, recordFile), p.rec); err != nil {
		return err
	}
	if err := r.setupVolumes(p); err != nil {
		return err
	}
	rootfs := make([]string, len(spec.Containers))
	for i, c := range podContainers(&spec) {
		if rootfs[i] = images[i]; c.Image.Rootfs == "" {
			lower, err := r.images.rootfs(images[i], imageRef(c.Image.Ref))
			if err != nil {
				return fmt.Errorf("container %q: image %s: %w", c.Name, c.Image.OCILayout, err)
			}
			if rootfs[i], err = mountOverlay(dir, c.Name, lower); err != nil {
				return fmt.Errorf("container %q: %w", c.Name, err)
			}
		}
	}
	if err := r.startContainers(ctx, p, host, rootfs); err != nil {
		return err
	}
	if spec.Placeholder {
		if err := limitPod(p); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, startedFile), nil, 0o600); err != nil {
		return err
	}
	started = true
	p.mu.left = len(p.containers)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.closed {
		// Close ran meanwhile: the pod runs and is recorded, so the next
		// Runtime over the state directory adopts it.
		for _, c := range p.containers {
			c.watch.close()
		}
		p.sandbox.close()
		return fmt.Errorf("start pod %q: started, but %w before it was watched", id, runtime.ErrClosed)
	}
	r.mu.pods[id] = p
	r.watch(p) // under mu, so that Close waits for its goroutines
	return nil
}

// abort undoes a failed Start: it kills what started and removes the rest.
func (r *Runtime) abort(p *pod) {
	for _, c := range p.containers {
		if c.watch != nil {
			_ = c.watch.signal(unix.SIGKILL)
			c.reap()
			c.watch.close()
		}
		if c.lc != nil {
			_ = c.lc.Destroy()
		}
	}
	if p.sandbox != nil {
		_ = p.sandbox.signal(unix.SIGKILL)
		shim.Reap(p.sandbox.pid)
		p.sandbox.close()
	}
	r.cleanup(p.id, &p.rec)
}

// startContainers starts p's sandbox and then its containers, and
// returns once every container's program runs; p.containers holds the
// containers created, also on failure, for abort.
//
// A start overlaps what does not depend on each other: the containers are
// created in parallel, each up to its init process waiting to exec the
// program, while the pause process sets up the namespaces they joined and
// is moved into its cgroup. Only once the sandbox is ready are the
// programs let run, so that they find the hostname set and lo up.
//
// A pod inside a capbox (host not nil) has no sandbox of its own: its
// containers join host's.
func (r *Runtime) startContainers(ctx context.Context, p *pod, host *pod, rootfs []string) error {
	var ready <-chan error
	if host != nil {
		p.nsPid = host.sandbox.pid
		done := make(chan error, 1)
		done <- nil
		ready = done
	} else {
		var err error
		if ready, err = r.startSandbox(p); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		p.nsPid = p.sandbox.pid
		if p.rec.Spec.Network == runtime.NetworkBridge {
			ready = r.attach(ctx, p, ready)
		}
	}
	specs := podContainers(&p.rec.Spec)
	cts := make([]*ctr, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i := range specs {
		wg.Go(func() { cts[i], errs[i] = r.createContainer(p, &specs[i], rootfs[i]) })
	}
	wg.Wait()
	sbErr := <-ready
	for _, ct := range cts {
		if ct != nil {
			p.containers = append(p.containers, ct)
		}
	}
	if sbErr != nil {
		// Containers may have failed too, for want of the sandbox (or its
		// network); its error is the cause.
		return sbErr
	}
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("container %q: %w", specs[i].Name, err)
		}
	}
	for i, ct := range cts {
		wg.Go(func() { errs[i] = ct.lc.Exec() })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("container %q: exec: %w", specs[i].Name, err)
		}
	}
	return nil
}

// createContainer creates container c of p and starts its init process,
// which waits for Exec to run the program: through the shim when the
// Runtime has one, else in this process.
func (r *Runtime) createContainer(p *pod, c *runtime.ContainerSpec, rootfs string) (*ctr, error) {
	if err := notHostRoot(rootfs); err != nil {
		return nil, err
	}
	req := shim.Request{
		Root:   filepath.Join(p.dir, lcDir),
		ID:     c.Name,
		Config: containerConfig(&p.rec.Spec, p.rec.CgroupParent, c, rootfs, p.dir, p.nsPid, r.cfg.DefaultPids),
		Args:   c.Args,
		Env:    withDefaultEnv(slices.Concat(c.Env, p.rec.Spec.Env)),
		Cwd:    c.WorkingDir,
	}
	if req.Cwd == "" {
		req.Cwd = "/"
	}
	if c.User != nil {
		req.UID, req.GID = c.User.UID, c.User.GID
	}
	logf, err := openLog(filepath.Join(p.dir, logsDir, c.Name+".log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the container holds its own descriptor
	sh, err := r.currentShim()
	if err != nil {
		return nil, err
	}
	var lc *libcontainer.Container
	var pid int
	if sh != nil {
		lc, pid, err = createInShim(sh, &req, logf)
	} else {
		lc, pid, err = shim.Start(&req, logf)
	}
	ct := &ctr{name: c.Name, lc: lc, shim: sh}
	if err != nil {
		return ct, err
	}
	if ct.watch, err = watchPid(pid); err != nil {
		return ct, err
	}
	return ct, nil
}

// notHostRoot refuses rootfs as a container's root when it is the host's
// root directory "/" (under any name: a bind mount of it, a link to it),
// whatever the image roots allowed: a container there would run on the
// host's own filesystem.
func notHostRoot(rootfs string) error {
	st, err := os.Stat(rootfs)
	if err != nil {
		return fmt.Errorf("rootfs: %w", err)
	}
	host, err := os.Stat("/")
	if err != nil {
		return fmt.Errorf("rootfs: host root: %w", err)
	}
	if os.SameFile(st, host) {
		return fmt.Errorf("rootfs %s: %w: it is the host's root", rootfs, runtime.ErrImageDenied)
	}
	return nil
}

// currentShim returns the Runtime's shim, nil if it has none; if the shim
// has died it starts a new one (the old one's containers are left to this
// process, which reaps them).
func (r *Runtime) currentShim() (*shimClient, error) {
	r.shimMu.Lock()
	defer r.shimMu.Unlock()
	if r.shim == nil || r.shim.alive() {
		return r.shim, nil
	}
	err := r.shim.close()
	r.cfg.Logger.Warn("container shim died; starting a new one", "shim", r.cfg.Shim, "err", err)
	sh, err := startShim(r.cfg.Shim)
	if err != nil {
		return nil, fmt.Errorf("restart shim: %w", err)
	}
	r.shim = sh
	return sh, nil
}

// createInShim has the shim create and start the container of req, and
// loads it. A container the shim created but could not start is left in
// req.Root for the caller's cleanup.
func createInShim(sh *shimClient, req *shim.Request, logf *os.File) (*libcontainer.Container, int, error) {
	pid, err := sh.create(req, logf)
	if err != nil {
		return nil, 0, err
	}
	lc, err := libcontainer.Load(req.Root, req.ID)
	if err != nil {
		_ = unix.Kill(pid, unix.SIGKILL)
		sh.reap(pid)
		return nil, 0, fmt.Errorf("load the shim's container: %w", err)
	}
	return lc, pid, nil
}

// shimBesideBinary is the path of sluice-shim in the directory of this
// process's binary, or "" when there is none.
func shimBesideBinary() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	p := filepath.Join(filepath.Dir(exe), "sluice-shim")
	if CheckShim(p) != nil {
		return ""
	}
	return p
}

// CheckShim says why path cannot be Config.Shim (it is missing, or not an
// executable file), or returns nil.
func CheckShim(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", path)
	}
	return nil
}

// imageRef is the ref of an OCI layout image, "latest" when empty.
func imageRef(ref string) string {
	if ref == "" {
		return "latest"
	}
	return ref
}

func withDefaultEnv(env []string) []string {
	out := slices.Clone(env)
	has := func(k string) bool {
		return slices.ContainsFunc(env, func(kv string) bool { return len(kv) > len(k) && kv[:len(k)+1] == k+"=" })
	}
	if !has("PATH") {
		out = append(out, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	if !has("HOME") {
		out = append(out, "HOME=/")
	}
	return out
}

// watch starts the goroutines that wait for p's running containers, and
// finishes p if none runs.
func (r *Runtime) watch(p *pod) {
	running := 0
	for _, c := range p.containers {
		if c.watch != nil {
			running++
			r.wg.Add(1)
			go r.watchContainer(p, c)
		}
	}
	switch {
	case p.rec.Spec.Placeholder && p.sandbox != nil:
		// A capbox's placeholder lives as long as its sandbox.
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			if err := p.sandbox.wait(); err != nil {
				return // the Runtime was closed
			}
			r.finish(p)
		}()
	case running == 0:
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.finish(p)
		}()
	}
}

// watchContainer waits for c to exit, records how, and finishes p after
// its last container.
func (r *Runtime) watchContainer(p *pod, c *ctr) {
	defer r.wg.Done()
	if err := c.watch.wait(); err != nil {
		return // the Runtime was closed
	}
	code, known := c.reap()
	ce := runtime.ContainerExit{Name: c.name, Code: code, OOMKilled: oomKilled(c.lc)}
	if p.rec.Spec.SharePID && c.lc != nil {
		// In a shared PID namespace the end of the container's first
		// process does not end the others it started: they are killed
		// through its cgroup, the other containers' processes are not.
		if err := c.lc.Signal(unix.SIGKILL); err != nil && !errors.Is(err, libcontainer.ErrNotRunning) {
			r.cfg.Logger.Warn("kill the rest of a container", "pod", p.id, "container", c.name, "err", err)
		}
	}
	if !known {
		ce.Code = -1
	}
	if err := writeJSON(filepath.Join(p.dir, "exit-"+c.name+".json"), exitRecord{Exit: runtime.Exit{Containers: []runtime.ContainerExit{ce}}, Unknown: !known}); err != nil {
		r.cfg.Logger.Warn("record container exit", "pod", p.id, "container", c.name, "err", err)
	}
	p.mu.Lock()
	c.exit = &ce
	p.mu.left--
	last := p.mu.left == 0
	p.mu.Unlock()
	if last {
		r.finish(p)
	}
}

// finish ends p after its containers: it kills the sandbox, destroys the
// containers (and so their cgroups), records the exit and closes done.
func (r *Runtime) finish(p *pod) {
	e := runtime.Exit{Code: -1}
	if sb := p.sandbox; sb != nil {
		_ = sb.signal(unix.SIGKILL)
		if err := sb.wait(); err != nil {
			return // the Runtime was closed
		}
		if code, known := shim.Reap(sb.pid); known && p.rec.Spec.Placeholder {
			e.Code = code // a placeholder's exit is its sandbox's
		}
	}
	p.mu.Lock()
	for _, c := range p.containers {
		ce := runtime.ContainerExit{Name: c.name, Code: -1}
		if c.exit != nil {
			ce = *c.exit
		}
		e.Containers = append(e.Containers, ce)
		e.OOMKilled = e.OOMKilled || ce.OOMKilled
	}
	p.mu.Unlock()
	if len(e.Containers) > 0 {
		e.Code = e.Containers[0].Code
	}
	if e.Code < 0 {
		e.Err = runtime.ErrExitUnknown
	}
	e.ScratchFull = scratchFull(p, e.Code)
	for _, c := range p.containers {
		if c.lc != nil {
			if err := c.lc.Destroy(); err != nil {
				r.cfg.Logger.Warn("destroy container", "pod", p.id, "container", c.name, "err", err)
			}
		}
	}
	now := time.Now()
	if err := writeJSON(filepath.Join(p.dir, exitFile), exitRecord{Exit: e, Unknown: e.Err != nil, FinishedAt: now}); err != nil {
		r.cfg.Logger.Warn("record pod exit", "pod", p.id, "err", err)
	}
	p.mu.Lock()
	p.mu.exit, p.mu.finished = &e, now
	p.mu.Unlock()
	close(p.done)
}

// oomKilled reports whether the OOM killer killed a process in lc's
// memory cgroup.
func oomKilled(lc *libcontainer.Container) bool {
	if lc == nil {
		return false
	}
	st, err := lc.State()
	if err != nil {
		return false
	}
	if dir, ok := st.CgroupPaths["memory"]; ok {
		return counter(filepath.Join(dir, "memory.oom_control"), "oom_kill") > 0
	}
	if dir, ok := st.CgroupPaths[""]; ok {
		return counter(filepath.Join(dir, "memory.events"), "oom_kill") > 0
	}
	return false
}

// counter reads "name value" from a cgroup file of such lines; 0 if absent.
func counter(path, name string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	var v int64
	for _, line := range splitLines(string(b)) {
		if n, _ := fmt.Sscanf(line, name+" %d", &v); n == 1 {
			return v
		}
	}
	return 0
}

func splitLines(s string) []string {
	var out []string
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != '\n' {
			i++
		}
		out = append(out, s[:i])
		if i < len(s) {
			i++
		}
		s = s[i:]
	}
	return out
}

func (r *Runtime) get(op, id string) (*pod, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.closed {
		return nil, runtime.ErrClosed
	}
	p := r.mu.pods[id]
	if p == nil {
		return nil, fmt.Errorf("%s pod %q: %w", op, id, runtime.ErrNotFound)
	}
	return p, nil
}

// Wait implements runtime.Runtime.
func (r *Runtime) Wait(ctx context.Context, id string) (runtime.Exit, error) {
	p, err := r.get("wait", id)
	if err != nil {
		return runtime.Exit{}, err
	}
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		e := *p.mu.exit
		e.Containers = slices.Clone(e.Containers)
		return e, nil
	case <-ctx.Done():
		return runtime.Exit{}, fmt.Errorf("wait pod %q: %w", id, ctx.Err())
	case <-r.stop:
		return runtime.Exit{}, fmt.Errorf("wait pod %q: %w", id, runtime.ErrClosed)
	}
}

// signalAll sends sig to every running container of p, or to the
// sandbox of a placeholder. A container's first process gets it; SIGKILL
// in a shared PID namespace goes to every process of the container's
// cgroup, as the first one's end does not end the others there.
func (p *pod) signalAll(sig unix.Signal) {
	for _, c := range p.containers {
		if c.watch == nil {
			continue
		}
		if sig == unix.SIGKILL && p.rec.Spec.SharePID && c.lc != nil {
			if c.lc.Signal(sig) == nil {
				continue
			}
		}
		_ = c.watch.signal(sig)
	}
	if p.rec.Spec.Placeholder && p.sandbox != nil {
		_ = p.sandbox.signal(sig)
	}
}

// podContainers are the containers of spec the runtime runs: none for a
// placeholder, whose one container only says what it holds.
func podContainers(spec *runtime.PodSpec) []runtime.ContainerSpec {
	if spec.Placeholder {
		return nil
	}
	return spec.Containers
}

// hostPod returns the running placeholder pod id, for a pod to start
// inside.
func (r *Runtime) hostPod(id string) (*pod, error) {
	r.mu.Lock()
	h := r.mu.pods[id]
	r.mu.Unlock()
	if h == nil || !h.rec.Spec.Placeholder || h.sandbox == nil {
		return nil, fmt.Errorf("in pod %q: no running capbox placeholder of that ID: %w", id, runtime.ErrNotFound)
	}
	select {
	case <-h.done:
		return nil, fmt.Errorf("in pod %q: the capbox placeholder has ended: %w", id, runtime.ErrNotFound)
	default:
	}
	return h, nil
}

// Stop implements runtime.Runtime.
func (r *Runtime) Stop(ctx context.Context, id string, grace time.Duration) error {
	p, err := r.get("stop", id)
	if err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	default:
	}
	if grace > 0 {
		p.signalAll(unix.SIGTERM)
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.done:
			return nil
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("stop pod %q: %w", id, ctx.Err())
		case <-r.stop:
			return fmt.Errorf("stop pod %q: %w", id, runtime.ErrClosed)
		}
	}
	p.signalAll(unix.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop pod %q: %w", id, ctx.Err())
	case <-r.stop:
		return fmt.Errorf("stop pod %q: %w", id, runtime.ErrClosed)
	}
}

// Remove implements runtime.Runtime.
func (r *Runtime) Remove(ctx context.Context, id string) error {
	p, err := r.get("remove", id)
	if err != nil {
		return err
	}
	select {
	case <-p.done:
	default:
		return fmt.Errorf("remove pod %q: %w", id, runtime.ErrRunning)
	}
	r.mu.Lock()
	if r.mu.pods[id] != p {
		r.mu.Unlock()
		return fmt.Errorf("remove pod %q: %w", id, runtime.ErrNotFound)
	}
	delete(r.mu.pods, id)
	r.mu.Unlock()
	for _, c := range p.containers {
		if c.watch != nil {
			c.watch.close()
		}
	}
	if p.sandbox != nil {
		p.sandbox.close()
	}
	if err := r.cleanup(id, &p.rec); err != nil {
		return fmt.Errorf("remove pod %q: %w", id, err)
	}
	return nil
}

// List implements runtime.Runtime.
func (r *Runtime) List(ctx context.Context) ([]runtime.PodStatus, error) {
	r.mu.Lock()
	if r.mu.closed {
		r.mu.Unlock()
		return nil, runtime.ErrClosed
	}
	pods := slices.Collect(maps.Values(r.mu.pods))
	r.mu.Unlock()
	out := make([]runtime.PodStatus, 0, len(pods))
	for _, p := range pods {
		st := runtime.PodStatus{
			ID: p.id, Generation: p.rec.Spec.Generation, CgroupParent: p.rec.Spec.CgroupParent,
			State: runtime.StateRunning, StartedAt: p.rec.StartedAt,
		}
		p.mu.Lock()
		if p.mu.exit != nil {
			e := *p.mu.exit
			e.Containers = slices.Clone(e.Containers)
			st.State, st.Exit, st.FinishedAt = runtime.StateExited, &e, p.mu.finished
		}
		p.mu.Unlock()
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b runtime.PodStatus) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out, nil
}

// Logs implements runtime.Runtime.
func (r *Runtime) Logs(ctx context.Context, id, container string, opts runtime.LogOptions) (io.ReadCloser, error) {
	p, err := r.get("logs", id)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(podContainers(&p.rec.Spec), func(c runtime.ContainerSpec) bool { return c.Name == container }) {
		return nil, fmt.Errorf("logs pod %q container %q: %w", id, container, runtime.ErrNotFound)
	}
	f, err := os.Open(filepath.Join(p.dir, logsDir, container+".log"))
	if err != nil {
		return nil, fmt.Errorf("logs pod %q container %q: %w", id, container, err)
	}
	if !opts.Follow {
		return f, nil
	}
	return &followReader{ctx: ctx, f: f, done: p.done}, nil
}

// Close implements runtime.Runtime: it stops watching, leaving pods
// running for the next Runtime over the state directory.
func (r *Runtime) Close() error {
	r.mu.Lock()
	if r.mu.closed {
		r.mu.Unlock()
		return nil
	}
	r.mu.closed = true
	pods := slices.Collect(maps.Values(r.mu.pods))
	r.mu.Unlock()
	close(r.stop)
	for _, p := range pods {
		for _, c := range p.containers {
			if c.watch != nil {
				c.watch.close()
			}
		}
		if p.sandbox != nil {
			p.sandbox.close()
		}
	}
	r.wg.Wait()
	r.shimMu.Lock()
	defer r.shimMu.Unlock()
	if r.shim != nil {
		if err := r.shim.close(); err != nil {
			return fmt.Errorf("container runtime: shim: %w", err)
		}
	}
	return nil
}

// janitor caps the log files of running pods every second until Close.
func (r *Runtime) janitor() {
	defer r.wg.Done()
	t := clock.NewTicker(r.cfg.Clock, time.Second)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		r.mu.Lock()
		pods := slices.Collect(maps.Values(r.mu.pods))
		r.mu.Unlock()
		for _, p := range pods {
			select {
			case <-p.done:
				continue
			default:
			}
			for _, c := range p.containers {
				if err := capLog(filepath.Join(p.dir, logsDir, c.name+".log"), r.cfg.LogMaxBytes); err != nil {
					r.cfg.Logger.Warn("cap log", "pod", p.id, "container", c.name, "err", err)
				}
			}
		}
	}
}
