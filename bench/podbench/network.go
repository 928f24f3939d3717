package podbench

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"os"
	"path/filepath"
	goruntime "runtime"

	"golang.org/x/sys/unix"

	"github.com/sluicehq/sluice/nodelet/runtime/container/cni"
)

// benchNetwork makes the pod network of a bridge run of pods pods at once:
// a bridge named after this process and the first subnet of 10.215.0.0/16
// large enough and free on the host, with its configuration and state in
// work. It returns the network's configuration, for the Sluice runtime,
// and the network, which runc's pods are attached to.
func benchNetwork(work string, pods int) (*cni.Config, *cni.Network, error) {
	// The smallest subnet, of /24 at most, with room for the pods, the
	// gateway, and the network and broadcast addresses.
	size := min(24, 32-bits.Len(uint(pods+3)))
	if size < 16 {
		return nil, nil, fmt.Errorf("podbench: %d pods need more addresses than a /16", pods)
	}
	step := 1 << (24 - size)
	for third := 0; third < 256; third += step {
		cfg := &cni.Config{
			ConfDir:  filepath.Join(work, "cni-conf"),
			StateDir: filepath.Join(work, "cni"),
			PodCIDR:  netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 215, byte(third), 0}), size),
			Bridge:   fmt.Sprintf("slbench%d", os.Getpid()%100000000),
		}
		// New writes the configuration only for a free subnet.
		n, err := cni.New(*cfg)
		if errors.Is(err, cni.ErrOverlap) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("podbench: pod network: %w", err)
		}
		return cfg, n, nil
	}
	return nil, nil, errors.New("podbench: no free subnet of 10.215.0.0/16 for the pod network")
}

// attachNewNetns makes a network namespace, as `ip netns add` would, and
// has n pin it as pod id's and attach it: a thread of this process enters
// a new namespace, stays there while n pins it, and returns to its own.
func attachNewNetns(ctx context.Context, n *cni.Network, id string) error {
	tid := make(chan int, 1)
	errc := make(chan error, 1)
	release := make(chan struct{})
	go func() {
		goruntime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			goruntime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			goruntime.UnlockOSThread()
			errc <- fmt.Errorf("unshare: %w", err)
			return
		}
		tid <- unix.Gettid()
		<-release
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// The thread stays locked, so it ends with the goroutine
			// rather than run others in the wrong namespace.
			errc <- fmt.Errorf("setns back: %w", err)
			return
		}
		goruntime.UnlockOSThread()
		errc <- nil
	}()
	var t int
	select {
	case t = <-tid:
	case err := <-errc:
		return fmt.Errorf("new network namespace: %w", err)
	}
	_, err := n.Attach(ctx, id, t, nil)
	close(release)
	return errors.Join(err, <-errc)
}

// joinNetns makes the runc spec's linux section join the network
// namespace at path.
func joinNetns(linux map[string]any, path string) {
	nss, _ := linux["namespaces"].([]any)
	for _, ns := range nss {
		if m, ok := ns.(map[string]any); ok && m["type"] == "network" {
			m["path"] = path
			return
		}
	}
	linux["namespaces"] = append(nss, map[string]any{"type": "network", "path": path})
}
