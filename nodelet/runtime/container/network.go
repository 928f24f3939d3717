package container

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicehq/sluice/nodelet/runtime"
	"github.com/sluicehq/sluice/nodelet/runtime/container/cni"
)

// networkTimeout bounds a pod's attach or detach: the plugins' runs, which
// wait for one another's locks (host-local's, iptables').
const networkTimeout = 30 * time.Second

// networkFile is a pod's network.json: what Attach gave it.
const networkFile = "network.json"

// networkRecord is a pod's network.json.
type networkRecord struct {
	IP netip.Addr
}

// attached reports whether a pod of spec is attached to the pod network:
// a bridge-mode pod with a sandbox of its own.
func attached(spec *runtime.PodSpec) bool {
	return spec.Network == runtime.NetworkBridge && spec.InPod == ""
}

// attach attaches p's sandbox's network namespace to the pod network, in
// the background beside the rest of the start, and returns a channel that
// reports, once, sandbox's outcome (which it receives) and then the
// attach's. The caller must receive from it before it lets a program run
// or cleans the pod away, as for the sandbox's alone.
func (r *Runtime) attach(ctx context.Context, p *pod, sandbox <-chan error) <-chan error {
	pid := p.sandbox.pid
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, networkTimeout)
		defer cancel()
		a, err := r.net.Attach(ctx, p.id, pid, p.rec.Spec.Ports)
		if err == nil {
			err = writeJSON(filepath.Join(p.dir, networkFile), networkRecord{IP: a.IP})
		}
		if sbErr := <-sandbox; sbErr != nil {
			done <- sbErr
			return
		}
		if err != nil {
			done <- fmt.Errorf("network: %w", err)
			return
		}
		done <- nil
	}()
	return done
}

// detach detaches pod id from the pod network (with the ports it mapped).
func (r *Runtime) detach(id string, ports []runtime.PortMapping) error {
	ctx, cancel := context.WithTimeout(context.Background(), networkTimeout)
	defer cancel()
	if err := r.net.Detach(ctx, id, ports); err != nil {
		return fmt.Errorf("network: %w", err)
	}
	return nil
}

// detachOrphans detaches the pods whose network namespace is pinned but
// which the Runtime does not know: their state directory is gone (a
// removal that could not detach them, or a crash in it).
func (r *Runtime) detachOrphans() {
	if r.net == nil {
		return
	}
	ids, err := r.net.Pinned()
	if err != nil {
		r.cfg.Logger.Warn("list pinned network namespaces", "err", err)
		return
	}
	for _, id := range ids {
		r.mu.Lock()
		known := r.mu.pods[id] != nil
		r.mu.Unlock()
		if known {
			continue
		}
		if _, err := os.Stat(r.podDir(id)); err == nil {
			continue
		}
		if err := r.detach(id, r.net.CachedPorts(id)); err != nil {
			r.cfg.Logger.Warn("detach a pod whose state is gone", "pod", id, "err", err)
		}
	}
}

// Network is the node's pod network, or nil when Config.Network is not set.
func (r *Runtime) Network() *cni.Network { return r.net }

// PodIP is the address pod id has on the pod network; ok is false for a
// pod the Runtime does not know or that is not attached.
func (r *Runtime) PodIP(id string) (ip netip.Addr, ok bool) {
	p, err := r.get("ip", id)
	if err != nil {
		return netip.Addr{}, false
	}
	var rec networkRecord
	if err := readJSON(filepath.Join(p.dir, networkFile), &rec); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			r.cfg.Logger.Warn("read network record", "pod", id, "err", err)
		}
		return netip.Addr{}, false
	}
	return rec.IP, rec.IP.IsValid()
}
