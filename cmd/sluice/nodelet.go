package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet"
	"github.com/sluicehq/sluice/nodelet/cgroup"
	nodeletmetrics "github.com/sluicehq/sluice/nodelet/metrics"
	"github.com/sluicehq/sluice/nodelet/overcommit"
	"github.com/sluicehq/sluice/nodelet/remote"
	"github.com/sluicehq/sluice/nodelet/runtime"
	"github.com/sluicehq/sluice/nodelet/runtime/container"
	"github.com/sluicehq/sluice/nodelet/runtime/container/cni"
	"github.com/sluicehq/sluice/nodelet/runtime/sim"
)

// nodeletConfig is what startNodelet needs to run one nodelet. Zero values
// mean the documented defaults.
type nodeletConfig struct {
	// dispatchers are the dispatcher replicas' base URLs. Default
	// defaultDispatcher.
	dispatchers []string
	// token is the node's credential, sent to the dispatcher (a nodelet
	// token of this node's name). Default: read from tokenFile, or none.
	token, tokenFile string
	// name is the node's name. Default: the host name.
	name string
	// runtime is "container" or "sim". Default: container when running as
	// root, sim otherwise.
	runtime string
	// shim is the sluice-shim binary the container runtime creates
	// containers through. Default: sluice-shim beside this binary, if
	// there is one (see container.Config.Shim).
	shim string
	// stateDir holds the container runtime's pod state (stateDir/pods)
	// and image cache (stateDir/images), and, with overcommit, the
	// resource files of offline pods (stateDir/resources, see
	// nodelet.Config.ResourceDir). Default defaultNodeletStateDir.
	stateDir string
	// imageRoots are the directories the container runtime runs images
	// (rootfs and oci_layout paths) from: an image must lie below one,
	// after symbolic links, or its task fails with api.ReasonImageDenied.
	// Container runtime only. Default stateDir/images.
	imageRoots []string
	// volumeRoots are the host directories pods may mount host paths
	// from, each "PATH" (read-only) or "PATH:rw" (writable); see
	// nodelet.Config.VolumeRoots. Default none: host paths are refused.
	// resolve parses them into roots.
	volumeRoots []string
	roots       []runtime.VolumeRoot
	// disk is the node's disk capacity in bytes, which scratch volumes
	// and containers' disk requests are placed against. Default: the free
	// space of stateDir's filesystem when the nodelet starts.
	disk int64
	// listen is the log server's address. Default "127.0.0.1:0".
	listen string
	// advertise is the address advertised as NodeSpec.Address. Default:
	// the log server's, with the host name for an unspecified IP.
	advertise string
	// pool and labels are advertised as they are.
	pool   string
	labels map[string]string
	// cpu (millicores) and memory (bytes) are the node's capacity.
	// Default: remote.HostCapacity's.
	cpu, memory int64
	// ports is the range the node assigns pods' dynamic ports from,
	// advertised as NodeSpec.Ports (and its size as the ports of its
	// capacity and both tiers). Default api.DefaultPortRange, 20000-32767.
	ports api.PortRange
	// offlineOvercommit is the offline tier's allocatable as a multiple
	// of the capacity, at most api.MaxOvercommit. Default 1.
	offlineOvercommit float64
	// pollWait is the longest wait of one target long-poll. While one is
	// open the leader counts the node alive, so a node cut off from the
	// network is marked down only after up to pollWait plus the node TTL.
	// Default remote.DefaultPollWait.
	pollWait time.Duration
	// maxStarts bounds the pod starts in flight. Default
	// nodelet.DefaultMaxConcurrentStarts.
	maxStarts int
	// retainExited keeps ended pods (and their logs) this long. Default
	// 0: removed once reported.
	retainExited time.Duration
	// onExit, when set, is called (once, from another goroutine) if the
	// agent stops before stop is called, with why.
	onExit func(error)
	// removePods makes stop end and remove every pod of the runtime, so
	// that nothing outlives the nodelet (sluice dev).
	removePods bool
	// cgroupRoot is the cgroup (relative to each hierarchy's root) that
	// holds the online and offline tiers. Default nodelet.DefaultCgroupRoot.
	cgroupRoot string
	// overcommit runs the overcommit controller (offline CPU quota under a
	// watermark, memory lending, the memory-pressure killer) on the
	// tiers. Container runtime only.
	overcommit bool
	// noPodNetwork runs the container runtime without a pod network:
	// pods default to the none network mode, and bridge-mode pods fail
	// to start. Default false: bridge-mode pods, the default, are
	// attached to the pod network.
	noPodNetwork bool
	// podCIDR is the node's pod subnet, which must be free on the host.
	// Container runtime only. Default cni.DefaultPodCIDR.
	podCIDR string
	// podBridge is the pod network's bridge. Default cni.DefaultBridge.
	podBridge string
	// cniConfDir holds the pod network's CNI configuration list: the
	// first *.conflist there, or one the nodelet writes from podCIDR and
	// podBridge. Default stateDir/cni/net.d.
	cniConfDir string
	// cniBinDirs are searched for the CNI plugins. Default
	// cni.DefaultBinDirs.
	cniBinDirs []string
	// allowHostNetwork lets pods run in the host's network namespace;
	// without it they fail as network_denied.
	allowHostNetwork bool
	// hostIP is the node's address as other hosts and its pods reach it
	// (SLUICE_HOST_IP, and the host of a bridge-mode pod's SLUICE_ADDR
	// instead of loopback). Default: the advertised address's IP when it
	// is not loopback, else the pod network's gateway, else none.
	hostIP string
	// podPrefix is podCIDR parsed, set by resolve.
	podPrefix netip.Prefix
	// noMetrics turns the nodelet's Prometheus metrics off. Default
	// false: the log server serves them at api.PathMetrics.
	noMetrics bool
	// metricsToken, when set, is required of requests for the metrics
	// (remote.LogServerConfig.MetricsToken). Default: read from
	// metricsTokenFile, or none (the metrics are open to whoever reaches
	// the log server's address).
	metricsToken, metricsTokenFile string
}

// Defaults of nodeletConfig.
const (
	defaultDispatcher      = "http://127.0.0.1:8080"
	defaultNodeletStateDir = "/var/lib/sluice/nodelet"
)

func defaultRuntime() string {
	if os.Geteuid() == 0 {
		return "container"
	}
	return "sim"
}

// resolve fills the defaults of c (reading the token file and detecting
// the host's capacity where needed) and reports every problem at once.
func (c *nodeletConfig) resolve() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(c.dispatchers) == 0 {
		c.dispatchers = []string{defaultDispatcher}
	}
	if c.token == "" && c.tokenFile != "" {
		b, err := os.ReadFile(c.tokenFile)
		if err != nil {
			bad("token file: %w", err)
		}
		c.token = strings.TrimSpace(string(b))
	}
	if c.metricsToken == "" && c.metricsTokenFile != "" {
		b, err := os.ReadFile(c.metricsTokenFile)
		if err != nil {
			bad("metrics token file: %w", err)
		}
		if c.metricsToken = strings.TrimSpace(string(b)); c.metricsToken == "" && err == nil {
			bad("metrics token file %s is empty", c.metricsTokenFile)
		}
	}
	if c.name == "" {
		h, err := os.Hostname()
		if err != nil {
			bad("name: no host name to default to: %w", err)
		}
		c.name = h
	}
	if c.runtime == "" {
		c.runtime = defaultRuntime()
	}
	if c.runtime != "container" && c.runtime != "sim" {
		bad("runtime: want container or sim, got %q", c.runtime)
	}
	if c.stateDir == "" {
		c.stateDir = defaultNodeletStateDir
	}
	if abs, err := filepath.Abs(c.stateDir); err != nil {
		bad("state dir: %w", err)
	} else {
		c.stateDir = abs // the paths made from it are given to containers
	}
	switch {
	case len(c.imageRoots) > 0 && c.runtime == "sim":
		bad("image roots: need the container runtime (simulated pods read no images)")
	case len(c.imageRoots) > 0:
		if err := runtime.CheckImageRoots(c.imageRoots); err != nil {
			bad("%w", err)
		}
	case c.runtime == "container":
		c.imageRoots = []string{filepath.Join(c.stateDir, "images")}
	}
	roots, err := runtime.ParseVolumeRoots(c.volumeRoots)
	if err != nil {
		bad("volume roots: %w", err)
	}
	c.roots = roots
	switch {
	case c.disk < 0:
		bad("disk: must not be negative, got %d", c.disk)
	case c.disk == 0:
		free, err := freeSpace(c.stateDir)
		if err != nil {
			bad("disk: give it, reading the free space of the state dir failed: %w", err)
		}
		c.disk = free
	}
	if c.listen == "" {
		c.listen = remote.DefaultLogAddr
	}
	if c.offlineOvercommit == 0 {
		c.offlineOvercommit = 1
	}
	if c.ports == (api.PortRange{}) {
		c.ports = api.DefaultPortRange
	}
	if c.ports.Size() == 0 {
		bad("ports: want a range LO-HI within 1-65535, got %d-%d", c.ports.Lo, c.ports.Hi)
	}
	if r := c.offlineOvercommit; r < 0 || r > api.MaxOvercommit || math.IsNaN(r) {
		bad("offline overcommit: want a ratio above 0 and at most %d, got %v", api.MaxOvercommit, r)
	}
	if c.cgroupRoot == "" {
		c.cgroupRoot = nodelet.DefaultCgroupRoot
	}
	if c.overcommit && c.runtime == "sim" {
		bad("overcommit: needs the container runtime (simulated pods use no cgroups)")
	}
	if c.shim != "" {
		if c.runtime == "sim" {
			bad("shim: needs the container runtime (simulated pods run no containers)")
		} else if err := container.CheckShim(c.shim); err != nil {
			bad("shim: %w", err)
		}
	}
	c.resolveNetwork(bad)
	if c.retainExited < 0 {
		bad("retain exited: must not be negative, got %v", c.retainExited)
	}
	if c.maxStarts < 0 {
		bad("max starts: must not be negative, got %d", c.maxStarts)
	}
	if c.cpu < 0 || c.memory < 0 {
		bad("capacity: cpu and memory must not be negative")
	}
	if c.cpu == 0 || c.memory == 0 {
		host, err := remote.HostCapacity()
		if err != nil {
			bad("capacity: give cpu and memory, detecting them failed: %w", err)
		}
		if c.cpu == 0 {
			c.cpu = host.CPU
		}
		if c.memory == 0 {
			c.memory = host.Memory
		}
	}
	return errors.Join(errs...)
}

// resolveNetwork fills the defaults of the pod network's settings and
// reports their problems to bad.
func (c *nodeletConfig) resolveNetwork(bad func(string, ...any)) {
	if c.hostIP != "" {
		if ip, err := netip.ParseAddr(c.hostIP); err != nil || ip.IsLoopback() || ip.IsUnspecified() {
			bad("host ip: want an IP address pods and other hosts reach (not loopback), got %q", c.hostIP)
		}
	}
	if c.runtime != "container" || c.noPodNetwork {
		if c.podCIDR != "" || c.podBridge != "" || c.cniConfDir != "" || len(c.cniBinDirs) > 0 {
			bad("pod network (pod cidr, pod bridge, cni dirs): needs the container runtime with its pod network")
		}
		return
	}
	c.podPrefix = cni.DefaultPodCIDR
	if c.podCIDR != "" {
		p, err := netip.ParsePrefix(c.podCIDR)
		if err != nil {
			bad("pod cidr: want a subnet such as %s, got %q", cni.DefaultPodCIDR, c.podCIDR)
		} else if err := cni.CheckPodCIDR(p); err != nil {
			bad("pod cidr: %w", err)
		}
		c.podPrefix = p
	}
	if c.podBridge == "" {
		c.podBridge = cni.DefaultBridge
	}
	if c.cniConfDir == "" {
		c.cniConfDir = filepath.Join(c.stateDir, "cni", "net.d")
	}
	if len(c.cniBinDirs) == 0 {
		c.cniBinDirs = cni.DefaultBinDirs
	}
}

// defaultNetwork is the network mode of pods whose spec names none.
func (c *nodeletConfig) defaultNetwork() string {
	if c.runtime == "container" && c.noPodNetwork {
		return runtime.NetworkNone
	}
	return runtime.NetworkBridge
}

// nodeHostIP is nodelet.Config.HostIP: the configured one, else the
// advertised address's IP when it is one and not loopback, else the
// gateway of the runtime's pod network, else "".
func (c *nodeletConfig) nodeHostIP(advertised string, rt runtime.Runtime) string {
	if c.hostIP != "" {
		return c.hostIP
	}
	if host, _, err := net.SplitHostPort(advertised); err == nil {
		if ip, err := netip.ParseAddr(host); err == nil && !ip.IsLoopback() && !ip.IsUnspecified() {
			return ip.String()
		}
	}
	if crt, ok := rt.(*container.Runtime); ok && crt.Network() != nil && crt.Network().Gateway().IsValid() {
		return crt.Network().Gateway().String()
	}
	return ""
}

// spec is the NodeSpec the nodelet registers, advertising addr.
func (c *nodeletConfig) spec(addr string) api.NodeSpec {
	// Ports are the node's, not a tier's: each tier may use the whole
	// range, and the dispatcher counts what both use against it.
	ports := c.ports.Size()
	capacity := api.Capacity{CPU: c.cpu, Memory: c.memory, Disk: c.disk, Ports: ports}
	scale := func(v int64) int64 { return int64(float64(v) * c.offlineOvercommit) }
	// Disk is not overcommitted: what a pod writes stays until it ends.
	return api.NodeSpec{
		Name: c.name, Address: addr, Pool: c.pool, Labels: c.labels,
		Capacity: capacity,
		Allocatable: api.Allocatable{
			Online:  capacity,
			Offline: api.Capacity{CPU: scale(c.cpu), Memory: scale(c.memory), Disk: c.disk, Ports: ports},
		},
		Ports: c.ports,
	}
}

// freeSpace is the space unprivileged writers have free on the filesystem
// of dir, or of its nearest existing ancestor when dir is not there yet.
func freeSpace(dir string) (int64, error) {
	for {
		var st unix.Statfs_t
		err := unix.Statfs(dir, &st)
		if err == nil {
			return int64(st.Bavail) * st.Bsize, nil
		}
		parent := filepath.Dir(dir)
		if !errors.Is(err, unix.ENOENT) || parent == dir {
			return 0, fmt.Errorf("statfs %s: %w", dir, err)
		}
		dir = parent
	}
}

// advertised is the address to advertise for a log server listening on
// addr: the configured one, or addr with the host name for an
// unspecified IP.
func (c *nodeletConfig) advertised(addr string) string {
	if c.advertise != "" {
		return c.advertise
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil {
			return net.JoinHostPort(h, port)
		}
	}
	return addr
}

// newRuntime builds the pod runtime the config names. The sim runtime
// comes with its own host, which close ends.
func (c *nodeletConfig) newRuntime(logger *slog.Logger) (rt runtime.Runtime, closeHost func(), err error) {
	if c.runtime == "sim" {
		h := sim.NewHost()
		return sim.New(h), h.Close, nil
	}
	var network *cni.Config
	if !c.noPodNetwork {
		network = &cni.Config{
			ConfDir: c.cniConfDir, BinDirs: c.cniBinDirs, StateDir: filepath.Join(c.stateDir, "cni"),
			PodCIDR: c.podPrefix, Bridge: c.podBridge,
		}
	}
	crt, err := container.New(container.Config{
		StateDir:   filepath.Join(c.stateDir, "pods"),
		ImageDir:   filepath.Join(c.stateDir, "images"),
		ImageRoots: c.imageRoots,
		ScratchDir: filepath.Join(c.stateDir, "scratch"),
		Network:    network,
		Logger:     logger,
		Shim:       c.shim,
	})
	if err != nil {
		return nil, nil, err
	}
	return crt, func() {}, nil
}

// startNodelet starts one nodelet in this process: its runtime, its log
// server, its connection to the dispatcher (registering the node, which
// it retries until ctx ends) and its agent, which runs until ctx ends or
// stop is called. stop stops them all in order (the agent, the log
// server, the runtime, the client) and returns the first error; pods of
// the container runtime keep running for the next nodelet. On an error
// startNodelet has stopped what it started.
func startNodelet(ctx context.Context, cfg nodeletConfig, logger *slog.Logger) (stop func() error, err error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := cfg.resolve(); err != nil {
		return nil, usageError{fmt.Errorf("nodelet: %w", err)}
	}

	// Everything started so far, stopped in reverse on failure.
	var undo []func() error
	cleanup := func() error {
		var errs []error
		for i := len(undo) - 1; i >= 0; i-- {
			errs = append(errs, undo[i]())
		}
		undo = nil
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			_ = cleanup()
		}
	}()

	rt, closeHost, err := cfg.newRuntime(logger)
	if err != nil {
		return nil, fmt.Errorf("nodelet: runtime: %w", err)
	}
	undo = append(undo, func() error {
		var errs []error
		if cfg.removePods {
			errs = append(errs, removeAllPods(rt))
		}
		errs = append(errs, rt.Close())
		closeHost()
		return errors.Join(errs...)
	})
	client, err := api.NewClient(api.ClientConfig{Addrs: cfg.dispatchers, Token: cfg.token})
	if err != nil {
		return nil, usageError{fmt.Errorf("nodelet: dispatcher: %w", err)}
	}
	undo = append(undo, func() error { client.Close(); return nil })
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return nil, fmt.Errorf("nodelet: log server: %w", err)
	}
	// The log server takes only the dispatcher, which learns this secret
	// from the node's registration.
	spec := cfg.spec(cfg.advertised(ln.Addr().String()))
	spec.LogToken = api.NewLogToken()
	// The task listing shows clients the host IP, which its pods get as
	// SLUICE_HOST_IP, rather than an advertised loopback address.
	spec.HostIP = cfg.nodeHostIP(spec.Address, rt)
	d, err := remote.New(remote.Config{Client: client, Node: spec, Logger: logger, PollWait: cfg.pollWait})
	if err != nil {
		_ = ln.Close()
		return nil, usageError{fmt.Errorf("nodelet: %w", err)}
	}
	var metrics *nodeletmetrics.Metrics
	lcfg := remote.LogServerConfig{
		Runtime: rt, Listener: ln, Token: spec.LogToken, FirstContainer: d.FirstContainer, Logger: logger,
	}
	if !cfg.noMetrics {
		metrics = nodeletmetrics.New(nodeletmetrics.Config{Process: true})
		lcfg.Metrics, lcfg.MetricsToken = metrics, cfg.metricsToken
	}
	logs, err := remote.NewLogServer(lcfg)
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("nodelet: %w", err)
	}
	undo = append(undo, logs.Close)

	if err := d.Join(ctx); err != nil {
		return nil, fmt.Errorf("nodelet: %w", err)
	}
	oc, cgroups, err := cfg.overcommitConfig(logger)
	if err != nil {
		return nil, fmt.Errorf("nodelet: %w", err)
	}
	if cgroups != nil {
		undo = append(undo, func() error { cgroups.Close(); return nil })
	}
	acfg := nodelet.Config{
		Node: cfg.name, Runtime: rt, Dispatcher: d, Addr: strings.Join(cfg.dispatchers, ","),
		DefaultNetwork: cfg.defaultNetwork(), AllowHostNetwork: cfg.allowHostNetwork, HostIP: spec.HostIP,
		MaxConcurrentStarts: cfg.maxStarts, RetainExited: cfg.retainExited,
		CgroupRoot: cfg.cgroupRoot, Overcommit: oc, ResourceDir: cfg.resourceDir(), VolumeRoots: cfg.roots, Logger: logger,
		// Simulated pods use what their specs say: the node reports it
		// as a real node reports what its cgroups measure.
		RuntimeUsage: cfg.runtime == "sim",
	}
	if metrics != nil {
		acfg.Observer = metrics
	}
	agent, err := nodelet.New(acfg)
	if err != nil {
		return nil, fmt.Errorf("nodelet: %w", err)
	}
	if metrics != nil {
		metrics.Attach(agent)
	}
	var (
		mu      sync.Mutex
		stopped bool
		runErr  error
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := agent.Run(ctx)
		mu.Lock()
		runErr = err
		early := !stopped
		mu.Unlock()
		if early && cfg.onExit != nil {
			if err == nil {
				err = ctx.Err()
			}
			cfg.onExit(err)
		}
	}()
	logger.Info("nodelet: running", "runtime", cfg.runtime, "logs", d.Node().Address, "dispatcher", strings.Join(cfg.dispatchers, ","))
	var once sync.Once
	var stopErr error
	return func() error {
		once.Do(func() {
			mu.Lock()
			stopped = true
			mu.Unlock()
			_ = agent.Close()
			<-done
			mu.Lock()
			err := runErr
			mu.Unlock()
			stopErr = errors.Join(err, cleanup())
			if stopErr != nil {
				stopErr = fmt.Errorf("nodelet: stop: %w", stopErr)
			}
		})
		return stopErr
	}, nil
}

// resourceDir is nodelet.Config.ResourceDir: stateDir/resources when the
// overcommit loop runs (with the container runtime, which shows the files
// to containers), which writes the files; else "".
func (c *nodeletConfig) resourceDir() string {
	if !c.overcommit {
		return ""
	}
	return filepath.Join(c.stateDir, "resources")
}

// overcommitConfig prepares the cgroup tiers and returns the overcommit
// controller's configuration and its cgroup manager (to be closed when the
// nodelet stops), or nils when it is off.
func (c *nodeletConfig) overcommitConfig(logger *slog.Logger) (*overcommit.Config, *cgroup.Manager, error) {
	if !c.overcommit {
		return nil, nil, nil
	}
	mgr, err := cgroup.New(cgroup.Config{Root: "/" + c.cgroupRoot})
	if err != nil {
		return nil, nil, fmt.Errorf("overcommit: cgroups: %w", err)
	}
	idle, err := nodelet.EnsureTiers(mgr)
	if err != nil {
		return nil, nil, fmt.Errorf("overcommit: %w", err)
	}
	if !idle {
		logger.Info("nodelet: no cpu.idle on this kernel: offline pods run at a low weight, not idle", "cgroup", mgr.Root())
	}
	return &overcommit.Config{Cgroups: mgr, Logger: logger}, mgr, nil
}

// removeAllPods stops (with a short grace) and removes every pod of rt.
func removeAllPods(rt runtime.Runtime) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods, err := rt.List(ctx)
	if err != nil {
		return fmt.Errorf("remove pods: %w", err)
	}
	var errs []error
	for _, p := range pods {
		if err := rt.Stop(ctx, p.ID, 2*time.Second); err != nil {
			errs = append(errs, fmt.Errorf("stop pod %s: %w", p.ID, err))
			continue
		}
		if err := rt.Remove(ctx, p.ID); err != nil {
			errs = append(errs, fmt.Errorf("remove pod %s: %w", p.ID, err))
		}
	}
	return errors.Join(errs...)
}

// nodeletFlags are the flags of `sluice nodelet` that need parsing into
// nodeletConfig.
type nodeletFlags struct {
	cfg               nodeletConfig
	podNetwork        bool
	metrics           bool
	cpu, memory, disk string
	ports             string
	logLevel          string
}

func newNodeletCmd() *cobra.Command {
	var f nodeletFlags
	c := &cobra.Command{
		Use:   "nodelet",
		Short: "Run this host's agent: run the pods the dispatcher places here",
		Long: `Nodelet registers this host with the dispatcher, long-polls the set of pods
the dispatcher wants on it and converges the host to it, running pods with
the container runtime (root) or simulating them, and reports every state
change. It serves the pods' logs at --listen for the dispatcher to proxy.
With the container runtime it also runs the overcommit controller on the
online and offline cgroup tiers under --cgroup-root (unless
--overcommit=false): offline pods borrow the CPU and memory online pods
leave idle, under watermarks, and are killed when host memory runs short.
The container runtime runs a pod's images (rootfs and oci_layout paths)
only from below --image-roots, after symbolic links, and never the host's
root; a pod naming another image fails as image_denied without starting.
Pods mount host paths only from below --volume-roots (none by default),
read-only unless the root is given as PATH:rw; any other host path fails
its task as volume_denied. Scratch volumes are filesystem images in
--state-dir, placed against --disk (default: the free space there).

Pods run in the network mode their spec names, bridge by default: with the
container runtime each bridge-mode pod gets its own network namespace on the
node's pod bridge (--pod-bridge) with an address of --pod-cidr (which must
be free on the host: the nodelet refuses to start otherwise), through the
CNI plugins in --cni-bin-dir and the first *.conflist in --cni-conf-dir (the
nodelet writes one when there is none); its ports are mapped from the host.
Mode none is loopback only; mode host is the host's network, only with
--allow-host-network (else the task fails as network_denied). Every
container gets SLUICE_HOST_IP (--host-ip), and a bridge-mode pod's
SLUICE_ADDR names it instead of loopback.

It runs until interrupted; pods of the container runtime keep running for
the next nodelet to adopt.

Every flag can also be set by its SLUICE_* environment variable
(--offline-overcommit is SLUICE_OFFLINE_OVERCOMMIT).`,
		Example: `  sluice nodelet --dispatcher http://10.0.0.1:8080 --listen :7070 --pool batch
  sluice nodelet --image-roots /srv/images,/var/lib/sluice/images
  sluice nodelet --volume-roots /srv/data,/srv/out:rw --disk 500Gi
  sluice nodelet --pod-cidr 10.213.7.0/24 --allow-host-network
  sluice nodelet --runtime sim --name sim-1 --cpu 64 --memory 256Gi`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := applyEnv(c); err != nil {
				return err
			}
			if f.cfg.runtime == "sim" && !c.Flags().Changed("overcommit") {
				f.cfg.overcommit = false // on by default for containers only
			}
			return runNodelet(c.Context(), f, c.ErrOrStderr())
		},
	}
	fl := c.Flags()
	fl.StringSliceVar(&f.cfg.dispatchers, "dispatcher", []string{defaultDispatcher}, "dispatcher replicas' base URLs, comma-separated")
	fl.StringVar(&f.cfg.token, "token", "", "this node's credential: a nodelet token the dispatcher binds to --name")
	fl.StringVar(&f.cfg.tokenFile, "token-file", "", "file holding the token (when --token is not given)")
	fl.StringVar(&f.cfg.name, "name", "", "node name (default: the host name)")
	fl.StringVar(&f.cfg.runtime, "runtime", defaultRuntime(), "pod runtime: container or sim")
	fl.StringVar(&f.cfg.stateDir, "state-dir", defaultNodeletStateDir, "directory of the container runtime's pod state and images")
	fl.StringSliceVar(&f.cfg.imageRoots, "image-roots", nil, "directories pods' images (rootfs and oci_layout paths) must lie below, after symbolic links, comma-separated; others fail as image_denied (default: --state-dir's images; container runtime)")
	fl.StringSliceVar(&f.cfg.volumeRoots, "volume-roots", nil, "host directories pods may mount host paths from, comma-separated: PATH read-only, PATH:rw writable; others fail as volume_denied (default: none, every host path refused)")
	fl.StringVar(&f.disk, "disk", "", `disk capacity for scratch volumes and disk requests, such as "500Gi" (default: the free space of --state-dir's filesystem)`)
	fl.StringVar(&f.cfg.shim, "shim", "", "sluice-shim binary to create containers through (default: sluice-shim beside this binary; without one, containers are created in this process)")
	fl.StringVar(&f.cfg.listen, "listen", remote.DefaultLogAddr, "address the log server listens on")
	fl.StringVar(&f.cfg.advertise, "advertise", "", "log server address to advertise, host:port (default: --listen's)")
	fl.StringVar(&f.cfg.pool, "pool", "", "node pool (default: the default pool)")
	fl.StringToStringVar(&f.cfg.labels, "labels", nil, "node labels, k=v,...")
	fl.StringVar(&f.cpu, "cpu", "", `CPU capacity such as "4" or "3500m" (default: the host's)`)
	fl.StringVar(&f.memory, "memory", "", `memory capacity such as "8Gi" (default: the host's)`)
	fl.Float64Var(&f.cfg.offlineOvercommit, "offline-overcommit", 1, "offline allocatable as a multiple of the capacity")
	fl.StringVar(&f.ports, "ports", api.DefaultPortRange.String(), "range LO-HI the node assigns pods' dynamic ports from; static ports may lie outside it")
	fl.DurationVar(&f.cfg.pollWait, "poll-wait", remote.DefaultPollWait, "longest wait of one target long-poll: while one is open the dispatcher counts the node alive, so a node cut off is marked down only after up to this plus the node TTL")
	fl.IntVar(&f.cfg.maxStarts, "max-starts", nodelet.DefaultMaxConcurrentStarts, "most pod starts in flight")
	fl.DurationVar(&f.cfg.retainExited, "retain-exited", 10*time.Minute, "keep ended pods and their logs this long")
	fl.StringVar(&f.cfg.cgroupRoot, "cgroup-root", nodelet.DefaultCgroupRoot, "cgroup holding the online and offline tiers")
	fl.BoolVar(&f.cfg.overcommit, "overcommit", true, "run the overcommit controller: lend idle online CPU and memory to offline pods under watermarks, kill offline pods when memory runs short (container runtime)")
	fl.BoolVar(&f.podNetwork, "pod-network", true, "attach bridge-mode pods (the default mode) to the node's pod network through the CNI plugins; when false, pods default to none and bridge-mode pods fail to start (container runtime)")
	fl.StringVar(&f.cfg.podCIDR, "pod-cidr", "", "the node's pod subnet, free on the host (checked at start) (default "+cni.DefaultPodCIDR.String()+"; container runtime)")
	fl.StringVar(&f.cfg.podBridge, "pod-bridge", "", "the pod network's bridge (default "+cni.DefaultBridge+"; container runtime)")
	fl.StringVar(&f.cfg.cniConfDir, "cni-conf-dir", "", "directory of the pod network's CNI configuration: its first *.conflist, or one the nodelet writes there from --pod-cidr (default: --state-dir's cni/net.d)")
	fl.StringSliceVar(&f.cfg.cniBinDirs, "cni-bin-dir", nil, "directories searched for the CNI plugins, comma-separated (default "+strings.Join(cni.DefaultBinDirs, ",")+")")
	fl.BoolVar(&f.cfg.allowHostNetwork, "allow-host-network", false, "let pods run in the host's network namespace (network mode host); without it they fail as network_denied")
	fl.StringVar(&f.cfg.hostIP, "host-ip", "", "the node's address as other hosts and its pods reach it, given to pods as SLUICE_HOST_IP and registered as the host the job task listing shows for the node's tasks (default: --advertise's IP if not loopback, else the pod bridge's gateway)")
	fl.BoolVar(&f.metrics, "metrics", true, "serve Prometheus metrics at /metrics on the log server's address (--listen); false counts nothing")
	fl.StringVar(&f.cfg.metricsTokenFile, "metrics-token-file", "", "file holding a bearer token that requests for /metrics must carry (default: none, the metrics are served to whoever reaches --listen)")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	return c
}

// parse turns the quantity flags into f.cfg.
func (f *nodeletFlags) parse() error {
	var errs []error
	f.cfg.noPodNetwork = !f.podNetwork
	f.cfg.noMetrics = !f.metrics
	var err error
	if f.cpu != "" {
		if f.cfg.cpu, err = api.ParseCPU(f.cpu); err != nil || f.cfg.cpu == 0 {
			errs = append(errs, fmt.Errorf("--cpu: want a positive CPU quantity such as 4 or 500m, got %q", f.cpu))
		}
	}
	if f.memory != "" {
		if f.cfg.memory, err = api.ParseBytes(f.memory); err != nil || f.cfg.memory == 0 {
			errs = append(errs, fmt.Errorf("--memory: want a positive byte quantity such as 8Gi, got %q", f.memory))
		}
	}
	if f.disk != "" {
		if f.cfg.disk, err = api.ParseBytes(f.disk); err != nil || f.cfg.disk == 0 {
			errs = append(errs, fmt.Errorf("--disk: want a positive byte quantity such as 500Gi, got %q", f.disk))
		}
	}
	if f.cfg.offlineOvercommit <= 0 {
		errs = append(errs, fmt.Errorf("--offline-overcommit: want a positive ratio, got %v", f.cfg.offlineOvercommit))
	}
	if f.ports != "" {
		if f.cfg.ports, err = api.ParsePortRange(f.ports); err != nil {
			errs = append(errs, fmt.Errorf("--ports: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return usageError{err}
	}
	return nil
}

func runNodelet(ctx context.Context, f nodeletFlags, stderr io.Writer) error {
	if err := f.parse(); err != nil {
		return err
	}
	logger, err := newTextLogger(stderr, f.logLevel)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	f.cfg.onExit = func(err error) { cancel(fmt.Errorf("nodelet: agent stopped: %w", err)) }
	stop, err := startNodelet(ctx, f.cfg, logger)
	if err != nil {
		return err
	}
	<-ctx.Done()
	err = stop()
	if cause := context.Cause(ctx); !errors.Is(cause, context.Canceled) {
		// The agent stopped on its own; stop's error repeats why.
		return cause
	}
	if err != nil {
		return err
	}
	return ctx.Err() // interrupted
}

// newTextLogger returns a text logger at the named level writing to w.
func newTextLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError{fmt.Errorf("--log-level: %w", err)}
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}
