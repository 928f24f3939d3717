package cni

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// pin bind-mounts the network namespace of process pid on path, as `ip
// netns` does, so that the namespace outlives the process and has a name
// the plugins can enter, for DEL too.
func pin(pid int, path string) error {
	pinned, err := isPinned(path)
	if err != nil {
		return err
	}
	if pinned {
		return fmt.Errorf("%s: %w", path, os.ErrExist)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	src := "/proc/" + strconv.Itoa(pid) + "/ns/net"
	if err := unix.Mount(src, path, "", unix.MS_BIND, ""); err != nil {
		os.Remove(path)
		return fmt.Errorf("bind %s on %s: %w", src, path, err)
	}
	return nil
}

// unpin undoes pin; a path not pinned, or missing, is fine.
func unpin(path string) error {
	pinned, err := isPinned(path)
	if err != nil {
		return err
	}
	if pinned {
		if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount %s: %w", path, err)
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// isPinned reports whether a network namespace is mounted on path.
func isPinned(path string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, fmt.Errorf("statfs %s: %w", path, err)
	}
	return st.Type == unix.NSFS_MAGIC, nil
}

// checkFree reports a route or address of the host that overlaps subnet,
// other than those on the interface named bridge (the pod bridge itself,
// left by an earlier run). Default routes overlap everything and are
// skipped.
func checkFree(subnet netip.Prefix, bridge string) error {
	name := func(index int) string {
		if l, err := netlink.LinkByIndex(index); err == nil {
			return l.Attrs().Name
		}
		return "interface " + strconv.Itoa(index)
	}
	routes, err := netlink.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("list routes: %w", err)
	}
	for _, r := range routes {
		p, ok := prefix(r.Dst)
		if !ok || p.Bits() == 0 || !p.Overlaps(subnet) {
			continue
		}
		if dev := name(r.LinkIndex); dev != bridge {
			return fmt.Errorf("route %s dev %s", p, dev)
		}
	}
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("list addresses: %w", err)
	}
	for _, a := range addrs {
		p, ok := prefix(a.IPNet)
		if !ok || !p.Overlaps(subnet) {
			continue
		}
		if dev := name(a.LinkIndex); dev != bridge {
			return fmt.Errorf("address %s dev %s", a.IPNet, dev)
		}
	}
	return nil
}

// prefix converts n to a masked netip.Prefix.
func prefix(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	addr, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(addr.Unmap(), ones).Masked(), true
}

// ensureBridge makes the bridge named name, up, with the address gw (the
// pods' gateway) where it lacks them; the bridge plugin then takes it as
// it is.
func ensureBridge(name string, gw netip.Prefix) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		if _, ok := err.(netlink.LinkNotFoundError); !ok {
			return err
		}
		br := &netlink.Bridge{LinkAttrs: netlink.NewLinkAttrs()}
		br.Name = name
		if err := netlink.LinkAdd(br); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("add: %w", err)
		}
		if l, err = netlink.LinkByName(name); err != nil {
			return err
		}
	}
	if _, ok := l.(*netlink.Bridge); !ok {
		return fmt.Errorf("%s is a %s, not a bridge", name, l.Type())
	}
	addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		// Another network's bridge of the same name: taking it would
		// join the two networks, and removing it would end the other.
		if p, ok := prefix(a.IPNet); ok && p != gw.Masked() {
			return fmt.Errorf("%s exists with the address %s, of another subnet than %s; choose another bridge name", name, a.IPNet, gw.Masked())
		}
	}
	if !slices.ContainsFunc(addrs, func(a netlink.Addr) bool {
		p, ok := prefix(a.IPNet)
		return ok && a.IP.Equal(gw.Addr().AsSlice()) && p.Bits() == gw.Bits()
	}) {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: gw.Addr().AsSlice(), Mask: net.CIDRMask(gw.Bits(), 32)}}
		if err := netlink.AddrAdd(l, a); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("address %s: %w", gw, err)
		}
	}
	// The pod network is IPv4: the bridge's own IPv6 (a link-local
	// address, its neighbour discovery and multicast reports) would only
	// be flooded to every pod.
	if err := disableIPv6(filepath.Join("/proc/sys/net/ipv6/conf", name)); err != nil {
		return err
	}
	if err := netlink.LinkSetUp(l); err != nil {
		return fmt.Errorf("up: %w", err)
	}
	return nil
}

// disableIPv6 turns IPv6 off in the configuration directory dir (under
// /proc/sys/net/ipv6/conf); a kernel without IPv6 is fine.
func disableIPv6(dir string) error {
	err := os.WriteFile(filepath.Join(dir, "disable_ipv6"), []byte("1"), 0)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("disable IPv6: %w", err)
	}
	return nil
}

// disableIPv6In turns IPv6 off for the interfaces made from now on in the
// network namespace pinned at path (its default configuration; its
// loopback keeps ::1). The pod network is IPv4, and each pod interface's
// IPv6 start (duplicate address detection, multicast reports, router
// solicitations) is flooded through the bridge to every other pod, which
// made a pod's start cost grow with the pods on the node.
func disableIPv6In(path string) error {
	ns, err := os.Open(path)
	if err != nil {
		return err
	}
	defer ns.Close()
	errc := make(chan error, 1)
	// A goroutine of its own, whose thread ends with it should it fail to
	// return to the host's namespace.
	go func() {
		goruntime.LockOSThread()
		host, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			goruntime.UnlockOSThread()
			errc <- err
			return
		}
		defer host.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			goruntime.UnlockOSThread()
			errc <- fmt.Errorf("enter %s: %w", path, err)
			return
		}
		werr := disableIPv6("/proc/sys/net/ipv6/conf/default")
		if err := unix.Setns(int(host.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("return from %s: %w", path, err)
			return // the thread stays locked and ends with the goroutine
		}
		goruntime.UnlockOSThread()
		errc <- werr
	}()
	return <-errc
}

// RemoveNetwork undoes what New made on the host for the configuration
// it writes: the bridge named bridge (with its address and route), if
// there is one, and the masquerade rule of subnet. It is for a pod
// network that goes away for good (a temporary cluster at its end), once
// no pod is attached to it.
func RemoveNetwork(bridge string, subnet netip.Prefix) error {
	var errs []error
	l, err := netlink.LinkByName(bridge)
	switch {
	case err == nil:
		if _, ok := l.(*netlink.Bridge); !ok {
			errs = append(errs, fmt.Errorf("cni: %s is a %s, not a bridge", bridge, l.Type()))
		} else if err := netlink.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("cni: delete bridge %s: %w", bridge, err))
		}
	case !errors.As(err, new(netlink.LinkNotFoundError)):
		errs = append(errs, fmt.Errorf("cni: bridge %s: %w", bridge, err))
	}
	if err := Masquerade(bridge, subnet, false); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Masquerade adds (on) or removes the rule of network name that
// masquerades the traffic of subnet's pods leaving the subnet, as the
// bridge plugin's ipMasq does per pod: one rule in the nat table's
// POSTROUTING chain, commented with the network's name. Adding a rule
// there already, or removing one that is not, is fine.
func Masquerade(name string, subnet netip.Prefix, on bool) error {
	rule := []string{"-s", subnet.String(), "!", "-d", subnet.String(), "-m", "comment", "--comment", "sluice pod network " + name, "-j", "MASQUERADE"}
	ipt := func(op string) error {
		out, err := exec.Command("iptables", append([]string{"-w", "-t", "nat", op, "POSTROUTING"}, rule...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	exists := ipt("-C") == nil
	switch {
	case on && !exists:
		if err := ipt("-A"); err != nil {
			return fmt.Errorf("cni: masquerade %s: %w", subnet, err)
		}
	case !on && exists:
		if err := ipt("-D"); err != nil {
			return fmt.Errorf("cni: remove the masquerade of %s: %w", subnet, err)
		}
	}
	return nil
}
