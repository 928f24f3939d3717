package cni

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/sluicehq/sluice/nodelet/runtime"
)

// Config configures a Network. Zero values mean the documented defaults.
type Config struct {
	// ConfDir is where the network's configuration list is: the first
	// *.conflist file in it (by name), used as it is, or, when there is
	// none, ConfFile, which New writes from PodCIDR and Bridge. Required.
	ConfDir string
	// BinDirs are searched, in order, for the plugins. Default
	// DefaultBinDirs.
	BinDirs []string
	// StateDir holds the pods' pinned network namespaces (netns/), the
	// results of the plugins (cache/) and, for the configuration New
	// writes, host-local's address reservations (ipam/). Required.
	StateDir string
	// PodCIDR is the node's pod subnet, for the configuration New writes:
	// pods get addresses from it, the bridge its first address, which is
	// the pods' gateway. It must not overlap a route or address of the
	// host (other than the bridge's own). Default DefaultPodCIDR.
	PodCIDR netip.Prefix
	// Bridge is the name of the node's pod bridge, for the configuration
	// New writes; the network is named after it, which names its
	// iptables chains and comments. At most 15 bytes. Default
	// DefaultBridge.
	Bridge string
}

// Defaults of Config.
var (
	DefaultBinDirs = []string{"/usr/lib/cni", "/opt/cni/bin"}
	DefaultPodCIDR = netip.MustParsePrefix("10.213.0.0/24")
)

const (
	// DefaultBridge is the default Config.Bridge.
	DefaultBridge = "sluice0"
	// ConfFile is the name of the configuration list New writes.
	ConfFile = "10-sluice.conflist"
	// IfName is the pod's interface on the bridge.
	IfName = "eth0"
	// cniVersion is the version of the spec the configuration speaks:
	// that of Debian's plugins 1.1.1 and later.
	cniVersion = "1.0.0"
)

// Errors callers act on.
var (
	// ErrOverlap: the pod subnet overlaps a route or address of the host.
	ErrOverlap = errors.New("cni: pod subnet overlaps the host's networks")
	// ErrNoPlugins: the plugins are not installed in any BinDirs.
	ErrNoPlugins = errors.New("cni: plugins not installed")
)

// Network attaches pods' network namespaces to the node's pod network
// through the CNI plugins, and detaches them. Its methods are safe for
// concurrent use (for distinct pods).
type Network struct {
	cfg     Config
	cni     *libcni.CNIConfig
	list    *libcni.NetworkConfigList
	noPorts *libcni.NetworkConfigList // list for pods without ports (lean)
	file    string
	subnet  netip.Prefix // invalid when the configuration does not say
	gateway netip.Addr   // invalid when the configuration does not say
	ipv4    bool         // the configuration is New's own: pods have no IPv6
}

// New loads (or writes) the node's network configuration and checks it: the
// plugins it names are installed, and its pod subnet is free on the host.
func New(cfg Config) (*Network, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	for _, d := range []string{cfg.ConfDir, netnsDir(cfg.StateDir), filepath.Join(cfg.StateDir, "cache")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("cni: %w", err)
		}
	}
	// The runner is given rather than left for libcni to make on first
	// use, which it does without a lock: Attach and Detach run at once.
	exec := &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: os.Stderr}, PluginDecoder: version.PluginDecoder{}}
	n := &Network{cfg: cfg, cni: libcni.NewCNIConfigWithCacheDir(cfg.BinDirs, filepath.Join(cfg.StateDir, "cache"), exec)}
	files, err := libcni.ConfFiles(cfg.ConfDir, []string{".conflist"})
	if err != nil {
		return nil, fmt.Errorf("cni: %w", err)
	}
	slices.Sort(files)
	if len(files) == 0 {
		// Checked before it is written, so that a refused subnet leaves
		// no configuration behind to be used the next time.
		if err := checkFree(cfg.PodCIDR, cfg.Bridge); err != nil {
			return nil, fmt.Errorf("%w: pod CIDR %s overlaps the host's %v; choose a free subnet with --pod-cidr", ErrOverlap, cfg.PodCIDR, err)
		}
		n.file = filepath.Join(cfg.ConfDir, ConfFile)
		b, err := DefaultConfList(cfg.Bridge, cfg.PodCIDR, filepath.Join(cfg.StateDir, "ipam"))
		if err != nil {
			return nil, err
		}
		if err := writeFile(n.file, b); err != nil {
			return nil, fmt.Errorf("cni: %w", err)
		}
	} else {
		n.file = files[0]
	}
	if n.list, err = libcni.NetworkConfFromFile(n.file); err != nil {
		return nil, fmt.Errorf("cni: %s: %w", n.file, err)
	}
	n.noPorts = lean(n.list)
	bridge := ""
	for _, p := range n.list.Plugins {
		if _, err := invoke.FindInPath(p.Network.Type, cfg.BinDirs); err != nil {
			return nil, fmt.Errorf("%w: %s (named by %s) is in none of %s; install containernetworking-plugins",
				ErrNoPlugins, p.Network.Type, n.file, strings.Join(cfg.BinDirs, ", "))
		}
		if p.Network.Type == "bridge" {
			bridge, n.subnet, n.gateway = parseBridge(p.Bytes)
		}
	}
	if n.subnet.IsValid() {
		if err := checkFree(n.subnet, bridge); err != nil {
			return nil, fmt.Errorf("%w (the pod subnet of %s): %v; choose a free one with --pod-cidr", ErrOverlap, n.file, err)
		}
	}
	if filepath.Base(n.file) == ConfFile && n.gateway.IsValid() {
		n.ipv4 = true
		// The bridge of the configuration New writes exists, with the
		// gateway's address, from the start rather than from the first
		// pod's ADD, so that the host can serve pods there before any
		// pod runs; its pods' traffic leaving the subnet is masqueraded.
		if err := ensureBridge(bridge, netip.PrefixFrom(n.gateway, n.subnet.Bits())); err != nil {
			return nil, fmt.Errorf("cni: bridge %s: %w", bridge, err)
		}
		if err := Masquerade(n.list.Name, n.subnet, true); err != nil {
			return nil, err
		}
	}
	return n, nil
}

func (c *Config) setDefaults() error {
	var errs []error
	if c.ConfDir == "" {
		errs = append(errs, errors.New("cni: config: ConfDir is required"))
	}
	if c.StateDir == "" {
		errs = append(errs, errors.New("cni: config: StateDir is required"))
	}
	if len(c.BinDirs) == 0 {
		c.BinDirs = DefaultBinDirs
	}
	if !c.PodCIDR.IsValid() {
		c.PodCIDR = DefaultPodCIDR
	}
	if err := CheckPodCIDR(c.PodCIDR); err != nil {
		errs = append(errs, err)
	}
	if c.Bridge == "" {
		c.Bridge = DefaultBridge
	}
	if len(c.Bridge) > 15 || strings.ContainsAny(c.Bridge, "/ \t\n:") {
		errs = append(errs, fmt.Errorf("cni: config: Bridge %q must be an interface name of at most 15 bytes", c.Bridge))
	}
	return errors.Join(errs...)
}

// CheckPodCIDR says what is wrong with p as a node's pod subnet: it must be
// an IPv4 subnet with room for a gateway and a pod (at most a /30), given
// by its network address.
func CheckPodCIDR(p netip.Prefix) error {
	switch {
	case !p.Addr().Is4():
		return fmt.Errorf("cni: pod CIDR %s: want an IPv4 subnet", p)
	case p.Bits() > 30:
		return fmt.Errorf("cni: pod CIDR %s: want a /30 or larger, with room for the gateway and pods", p)
	case p.Masked() != p:
		return fmt.Errorf("cni: pod CIDR %s: give the subnet's network address, %s", p, p.Masked())
	}
	return nil
}

// DefaultConfList is the configuration list New writes: a bridge (the
// pods' gateway, with hairpin mode so a pod reaches itself through a
// mapped port) with host-local addresses from subnet kept in ipamDir,
// portmap for the pods' ports, and loopback. The bridge plugin's ipMasq is
// off: New masquerades the whole subnet with one rule instead (see
// Masquerade), which a pod's start and removal then need not touch.
func DefaultConfList(bridge string, subnet netip.Prefix, ipamDir string) ([]byte, error) {
	if err := CheckPodCIDR(subnet); err != nil {
		return nil, err
	}
	gw := subnet.Addr().Next()
	list := map[string]any{
		"cniVersion": cniVersion,
		"name":       bridge,
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      bridge,
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": ipamDir,
					"ranges":  [][]map[string]string{{{"subnet": subnet.String(), "gateway": gw.String()}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}, "snat": true},
			map[string]any{"type": "loopback"},
		},
	}
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("cni: %w", err)
	}
	return append(b, '\n'), nil
}

// parseBridge reads a bridge plugin's configuration for its bridge name
// and its host-local subnet and gateway (the subnet's first address when
// not given); what it does not find is left zero.
func parseBridge(conf []byte) (bridge string, subnet netip.Prefix, gateway netip.Addr) {
	var c struct {
		Bridge string `json:"bridge"`
		IPAM   struct {
			Type    string `json:"type"`
			Subnet  string `json:"subnet"`
			Gateway string `json:"gateway"`
			Ranges  [][]struct {
				Subnet  string `json:"subnet"`
				Gateway string `json:"gateway"`
			} `json:"ranges"`
		} `json:"ipam"`
	}
	if json.Unmarshal(conf, &c) != nil {
		return "", netip.Prefix{}, netip.Addr{}
	}
	bridge = c.Bridge
	if bridge == "" {
		bridge = "cni0" // the plugin's default
	}
	if c.IPAM.Type != "host-local" {
		return bridge, netip.Prefix{}, netip.Addr{}
	}
	s, g := c.IPAM.Subnet, c.IPAM.Gateway
	if len(c.IPAM.Ranges) > 0 && len(c.IPAM.Ranges[0]) > 0 {
		s, g = c.IPAM.Ranges[0][0].Subnet, c.IPAM.Ranges[0][0].Gateway
	}
	subnet, err := netip.ParsePrefix(s)
	if err != nil {
		return bridge, netip.Prefix{}, netip.Addr{}
	}
	subnet = subnet.Masked()
	gateway, err = netip.ParseAddr(g)
	if err != nil {
		gateway = subnet.Addr().Next()
	}
	return bridge, subnet, gateway
}

// File is the configuration list in use.
func (n *Network) File() string { return n.file }

// Name is the network's name, which its iptables chains and comments carry.
func (n *Network) Name() string { return n.list.Name }

// Subnet is the pod subnet, when the configuration's bridge uses
// host-local addresses; else the zero Prefix.
func (n *Network) Subnet() netip.Prefix { return n.subnet }

// Gateway is the host's address on the pod bridge, which pods reach the
// host at, when the configuration says; else the zero Addr.
func (n *Network) Gateway() netip.Addr { return n.gateway }

// NetnsDir is where pods' network namespaces are pinned.
func (n *Network) NetnsDir() string { return netnsDir(n.cfg.StateDir) }

func netnsDir(stateDir string) string { return filepath.Join(stateDir, "netns") }

// NetnsPath is where pod id's network namespace is pinned.
func (n *Network) NetnsPath(id string) string { return filepath.Join(n.NetnsDir(), id) }

// Attachment is what Attach gave a pod.
type Attachment struct {
	// IP is the pod's address on the bridge.
	IP netip.Addr
}

// Attach pins the network namespace of process pid as pod id's and runs
// the plugins' ADD on it, mapping ports. On failure it undoes what it did
// (DEL, unpin) and returns why; the caller still calls Detach for a pod
// it attached, also one whose Attach failed after pinning, which is then a
// no-op.
func (n *Network) Attach(ctx context.Context, id string, pid int, ports []runtime.PortMapping) (Attachment, error) {
	path := n.NetnsPath(id)
	if err := pin(pid, path); err != nil {
		return Attachment{}, fmt.Errorf("cni: pin network namespace: %w", err)
	}
	var err error
	if n.ipv4 {
		err = disableIPv6In(path)
	}
	var res types.Result
	if err == nil {
		res, err = n.cni.AddNetworkList(ctx, n.listFor(ports), n.rt(id, path, ports))
	}
	if err != nil {
		err = fmt.Errorf("cni: attach pod %q to network %s: %w", id, n.list.Name, err)
		if derr := n.Detach(context.WithoutCancel(ctx), id, ports); derr != nil {
			err = errors.Join(err, fmt.Errorf("undo: %w", derr))
		}
		return Attachment{}, err
	}
	var a Attachment
	if r, err := types100.NewResultFromResult(res); err == nil {
		for _, ip := range r.IPs {
			if addr, ok := netip.AddrFromSlice(ip.Address.IP); ok {
				a.IP = addr.Unmap()
				break
			}
		}
	}
	return a, nil
}

// Detach runs the plugins' DEL for pod id (releasing its address, its
// masquerade and port rules, and its veth) and unpins its network
// namespace. ports are those Attach mapped. It is idempotent: a pod never
// attached, or detached already, is fine.
func (n *Network) Detach(ctx context.Context, id string, ports []runtime.PortMapping) error {
	path := n.NetnsPath(id)
	netns := path
	pinned, err := isPinned(path)
	if err != nil {
		return fmt.Errorf("cni: detach pod %q: %w", id, err)
	}
	if !pinned {
		netns = "" // the plugins then release what is not in the namespace
	}
	if err := n.cni.DelNetworkList(ctx, n.listFor(ports), n.rt(id, netns, ports)); err != nil {
		return fmt.Errorf("cni: detach pod %q from network %s: %w", id, n.list.Name, err)
	}
	if err := unpin(path); err != nil {
		return fmt.Errorf("cni: detach pod %q: %w", id, err)
	}
	return nil
}

// Pinned lists the pods whose network namespace is pinned.
func (n *Network) Pinned() ([]string, error) {
	ents, err := os.ReadDir(n.NetnsDir())
	if err != nil {
		return nil, fmt.Errorf("cni: %w", err)
	}
	var ids []string
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".tmp") {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// CachedPorts returns the ports Attach mapped for pod id, as the plugins'
// cache recorded them, for a Detach of a pod whose own record is lost.
func (n *Network) CachedPorts(id string) []runtime.PortMapping {
	_, rt, err := n.cni.GetNetworkListCachedConfig(n.list, &libcni.RuntimeConf{ContainerID: id, IfName: IfName})
	if err != nil || rt == nil {
		return nil
	}
	b, err := json.Marshal(rt.CapabilityArgs["portMappings"])
	if err != nil {
		return nil
	}
	var pms []portMapping
	if json.Unmarshal(b, &pms) != nil {
		return nil
	}
	out := make([]runtime.PortMapping, 0, len(pms))
	for _, pm := range pms {
		out = append(out, runtime.PortMapping{Port: uint16(pm.HostPort), Protocol: pm.Protocol})
	}
	return out
}

// listFor is the configuration list run for a pod with ports.
func (n *Network) listFor(ports []runtime.PortMapping) *libcni.NetworkConfigList {
	if len(ports) == 0 {
		return n.noPorts
	}
	return n.list
}

// lean is list without the plugins that have nothing to do for a pod
// without ports, since each is a process started for every ADD and DEL:
// those whose only capability is portMappings (portmap, which maps none),
// and loopback (the pod's sandbox brings lo up itself; with a prevResult
// loopback only passes it on).
func lean(list *libcni.NetworkConfigList) *libcni.NetworkConfigList {
	out := *list
	out.Plugins = nil
	for _, p := range list.Plugins {
		caps := p.Network.Capabilities
		if p.Network.Type == "loopback" || len(caps) == 1 && caps["portMappings"] {
			continue
		}
		out.Plugins = append(out.Plugins, p)
	}
	if len(out.Plugins) == 0 {
		return list
	}
	return &out
}

// portMapping is an entry of the portMappings capability.
type portMapping struct {
	HostPort      int    `json:"hostPort"`
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol"`
}

// rt is the runtime configuration of pod id's ADD or DEL.
func (n *Network) rt(id, netns string, ports []runtime.PortMapping) *libcni.RuntimeConf {
	rt := &libcni.RuntimeConf{ContainerID: id, NetNS: netns, IfName: IfName}
	if len(ports) > 0 {
		pms := make([]portMapping, len(ports))
		for i, p := range ports {
			proto := p.Protocol
			if proto == "" {
				proto = "tcp"
			}
			pms[i] = portMapping{HostPort: int(p.Port), ContainerPort: int(p.Port), Protocol: proto}
		}
		rt.CapabilityArgs = map[string]any{"portMappings": pms}
	}
	return rt
}

// writeFile writes b to path through a rename, so that no reader sees it
// half written.
func writeFile(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
