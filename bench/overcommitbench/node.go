package overcommitbench

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet"
	"github.com/sluicehq/sluice/nodelet/cgroup"
	"github.com/sluicehq/sluice/nodelet/overcommit"
	"github.com/sluicehq/sluice/nodelet/remote"
	"github.com/sluicehq/sluice/nodelet/runtime"
	"github.com/sluicehq/sluice/nodelet/runtime/container"
	"github.com/sluicehq/sluice/nodelet/runtime/container/cni"
)

// nodeName is the benchmark's node.
const nodeName = "ocbench"

// portRange is the node's range of mapped ports: away from the nodelet's
// default (api.DefaultPortRange), so that a run beside a dev cluster maps
// no port of the same number, and above Linux's default ephemeral range
// (32768-60999), whose ports the host's own connections use.
var portRange = api.PortRange{Lo: 61000, Hi: 61999}

// cniPlugins are the plugins the pod network runs.
var cniPlugins = []string{"bridge", "host-local", "portmap", "loopback"}

// checkCNI reports ErrNoCNI when a plugin is in none of cni.DefaultBinDirs.
func checkCNI() error {
	for _, p := range cniPlugins {
		found := false
		for _, d := range cni.DefaultBinDirs {
			if st, err := os.Stat(filepath.Join(d, p)); err == nil && st.Mode().IsRegular() {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("%w (no %s in %v)", ErrNoCNI, p, cni.DefaultBinDirs)
		}
	}
	return nil
}

// node is the benchmark's nodelet, in this process: the container
// runtime, the pod network, the cgroup tiers and the agent with its
// overcommit loop.
type node struct {
	rt     *container.Runtime
	mgr    *cgroup.Manager
	agent  *nodelet.Agent
	client *api.Client
	net    *cni.Config
	hostIP string
	cancel context.CancelFunc
	done   chan error // the agent's Run result; nil before it runs
}

// cgroupRoot is the run's cgroup tree, one per process, so that two runs
// at once (a test and a benchmark) share nothing.
func cgroupRoot() string { return fmt.Sprintf("sluice-ocbench-%d", os.Getpid()) }

// startNode starts the nodelet of cfg, its state in work and its images
// below imageRoot, registered with the dispatcher at addrs. On an error
// it has stopped what it started.
func startNode(ctx context.Context, cfg Config, work, imageRoot string, addrs []string) (n *node, err error) {
	n = &node{}
	defer func() {
		if err != nil {
			_ = n.stop()
		}
	}()
	if n.net, err = podNetwork(work); err != nil {
		return nil, err
	}
	n.rt, err = container.New(container.Config{
		StateDir: filepath.Join(work, "pods"), ImageDir: filepath.Join(work, "image-cache"), ImageRoots: []string{imageRoot},
		ScratchDir: filepath.Join(work, "scratch"), Network: n.net, Logger: cfg.Logger, Shim: cfg.Shim,
	})
	if err != nil {
		return nil, fmt.Errorf("overcommitbench: container runtime: %w", err)
	}
	n.hostIP = n.rt.Network().Gateway().String()
	if n.mgr, err = cgroup.New(cgroup.Config{Root: "/" + cgroupRoot()}); err != nil {
		return nil, fmt.Errorf("overcommitbench: cgroups: %w", err)
	}
	// As the nodelet sets them.
	if _, err := nodelet.EnsureTiers(n.mgr); err != nil {
		return nil, fmt.Errorf("overcommitbench: %w", err)
	}
	if n.client, err = api.NewClient(api.ClientConfig{Addrs: addrs}); err != nil {
		return nil, fmt.Errorf("overcommitbench: %w", err)
	}
	capacity := api.Capacity{CPU: cfg.NodeCPU, Memory: cfg.NodeMemory, Ports: portRange.Size()}
	spec := api.NodeSpec{
		Name: nodeName, Capacity: capacity, Allocatable: api.Allocatable{Online: capacity, Offline: capacity},
		Ports: portRange, HostIP: n.hostIP,
	}
	d, err := remote.New(remote.Config{Client: n.client, Node: spec, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("overcommitbench: %w", err)
	}
	joinCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := d.Join(joinCtx); err != nil {
		return nil, fmt.Errorf("overcommitbench: register the node: %w", err)
	}
	n.agent, err = nodelet.New(nodelet.Config{
		Node: nodeName, Runtime: n.rt, Dispatcher: d, Addr: addrs[0], DefaultNetwork: runtime.NetworkBridge, HostIP: n.hostIP,
		CgroupRoot: cgroupRoot(), StopGrace: 2 * time.Second, HeartbeatPeriod: time.Second,
		Overcommit: &overcommit.Config{Cgroups: n.mgr, Logger: cfg.Logger}, ResourceDir: filepath.Join(work, "resources"),
		Logger: cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("overcommitbench: %w", err)
	}
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	n.cancel, n.done = cancelRun, make(chan error, 1)
	go func() { n.done <- n.agent.Run(runCtx) }()
	return n, nil
}

// podNetwork picks the run's pod network: a bridge named after this
// process and the first /24 of 10.216.0.0/16 free on the host, its
// configuration and state in work.
func podNetwork(work string) (*cni.Config, error) {
	for third := range 256 {
		cfg := &cni.Config{
			ConfDir:  filepath.Join(work, "cni", "net.d"),
			StateDir: filepath.Join(work, "cni"),
			PodCIDR:  netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 216, byte(third), 0}), 24),
			Bridge:   fmt.Sprintf("slocb%d", os.Getpid()%100000000),
		}
		// New writes the configuration only for a free subnet.
		_, err := cni.New(*cfg)
		if errors.Is(err, cni.ErrOverlap) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("overcommitbench: pod network: %w", err)
		}
		return cfg, nil
	}
	return nil, errors.New("overcommitbench: no free /24 of 10.216.0.0/16 for the pod network")
}

// stop stops the agent, then ends and removes every pod, closes the
// runtime, and removes the cgroup tree and the pod network.
func (n *node) stop() error {
	var errs []error
	if n.agent != nil {
		errs = append(errs, n.agent.Close())
		n.cancel()
		if n.done != nil {
			if err := <-n.done; err != nil && !errors.Is(err, context.Canceled) {
				errs = append(errs, err)
			}
		}
	}
	if n.rt != nil {
		errs = append(errs, removePods(n.rt), n.rt.Close())
	}
	if n.mgr != nil {
		n.mgr.Close()
		removeCgroupTree(cgroupRoot())
	}
	if n.client != nil {
		n.client.Close()
	}
	if n.net != nil {
		errs = append(errs, cni.RemoveNetwork(n.net.Bridge, n.net.PodCIDR))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("overcommitbench: stop the node: %w", err)
	}
	return nil
}

// removePods stops (with a short grace) and removes every pod of rt.
func removePods(rt runtime.Runtime) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods, err := rt.List(ctx)
	if err != nil {
		return fmt.Errorf("remove pods: %w", err)
	}
	var errs []error
	for _, p := range pods {
		if err := rt.Stop(ctx, p.ID, time.Second); err != nil {
			errs = append(errs, fmt.Errorf("stop pod %s: %w", p.ID, err))
			continue
		}
		if err := rt.Remove(ctx, p.ID); err != nil {
			errs = append(errs, fmt.Errorf("remove pod %s: %w", p.ID, err))
		}
	}
	return errors.Join(errs...)
}

// removeCgroupTree removes the run's cgroup tree, emptied of pods: the
// tiers, then the root, in every hierarchy.
func removeCgroupTree(root string) {
	for _, p := range []string{filepath.Join(root, string(cgroup.Online)), filepath.Join(root, string(cgroup.Offline)), root} {
		dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", p))
		dirs = append(dirs, filepath.Join("/sys/fs/cgroup", p))
		for _, d := range dirs {
			_ = os.Remove(d)
		}
	}
}
