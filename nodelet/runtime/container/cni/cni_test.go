package cni_test

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/sluicehq/sluice/nodelet/runtime/container/cni"
)

// hostSubnet is the subnet of a route of the host that is not a default
// route, or the test skips.
func hostSubnet(t *testing.T) netip.Prefix {
	t.Helper()
	routes, err := netlink.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		t.Skipf("list routes: %v", err)
	}
	for _, r := range routes {
		if r.Dst == nil {
			continue
		}
		ones, _ := r.Dst.Mask.Size()
		if a, ok := netip.AddrFromSlice(r.Dst.IP.To4()); ok && ones > 0 && ones <= 30 && !r.Dst.IP.IsLoopback() {
			return netip.PrefixFrom(a, ones).Masked()
		}
	}
	t.Skip("the host has no route but the default")
	return netip.Prefix{}
}

func TestNewRefusesOverlappingSubnet(t *testing.T) {
	sub := hostSubnet(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "conf")
	_, err := cni.New(cni.Config{ConfDir: conf, StateDir: filepath.Join(dir, "state"), PodCIDR: sub, Bridge: "sltnever0"})
	if !errors.Is(err, cni.ErrOverlap) || !strings.Contains(err.Error(), "--pod-cidr") {
		t.Fatalf("New over %s = %v, want ErrOverlap naming --pod-cidr", sub, err)
	}
	if ents, _ := os.ReadDir(conf); len(ents) != 0 {
		t.Errorf("a refused subnet left %v in the configuration directory", ents)
	}
	if _, err := net.InterfaceByName("sltnever0"); err == nil {
		t.Errorf("a refused subnet made the bridge")
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, c := range []cni.Config{
		{},
		{ConfDir: "c", StateDir: "s", PodCIDR: netip.MustParsePrefix("10.1.2.3/24")},
		{ConfDir: "c", StateDir: "s", PodCIDR: netip.MustParsePrefix("10.1.2.0/31")},
		{ConfDir: "c", StateDir: "s", PodCIDR: netip.MustParsePrefix("fd00::/64")},
		{ConfDir: "c", StateDir: "s", Bridge: "a-name-longer-than-15"},
	} {
		if _, err := cni.New(c); err == nil {
			t.Errorf("New(%+v) = nil error", c)
		}
	}
}

func TestNewRefusesMissingPlugins(t *testing.T) {
	dir := t.TempDir()
	_, err := cni.New(cni.Config{ConfDir: filepath.Join(dir, "conf"), StateDir: filepath.Join(dir, "state"), BinDirs: []string{filepath.Join(dir, "nobin")},
		PodCIDR: netip.MustParsePrefix("10.254.254.0/24"), Bridge: "sltnever1"})
	if !errors.Is(err, cni.ErrNoPlugins) {
		t.Fatalf("New = %v, want ErrNoPlugins", err)
	}
}

func TestNewUsesExistingConfList(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "conf")
	if err := os.MkdirAll(conf, 0o700); err != nil {
		t.Fatal(err)
	}
	// A list of the operator's: loopback alone, no bridge to check.
	own := `{"cniVersion":"1.0.0","name":"mine","plugins":[{"type":"loopback"}]}`
	if err := os.WriteFile(filepath.Join(conf, "50-mine.conflist"), []byte(own), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := cni.New(cni.Config{ConfDir: conf, StateDir: filepath.Join(dir, "state")})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if n.Name() != "mine" || filepath.Base(n.File()) != "50-mine.conflist" || n.Gateway().IsValid() {
		t.Errorf("network %s from %s, gateway %v; want the operator's, without a gateway", n.Name(), n.File(), n.Gateway())
	}
	if _, err := os.Stat(filepath.Join(conf, cni.ConfFile)); err == nil {
		t.Errorf("New wrote %s beside the operator's list", cni.ConfFile)
	}
}

func TestDefaultConfList(t *testing.T) {
	b, err := cni.DefaultConfList("br9", netip.MustParsePrefix("10.9.8.0/24"), "/x/ipam")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"type": "bridge"`, `"isGateway": true`, `"ipMasq": false`, `"hairpinMode": true`,
		`"type": "host-local"`, `"subnet": "10.9.8.0/24"`, `"gateway": "10.9.8.1"`, `"dataDir": "/x/ipam"`,
		`"type": "portmap"`, `"portMappings": true`, `"type": "loopback"`, `"cniVersion": "1.0.0"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("conflist lacks %s:\n%s", want, b)
		}
	}
}

// TestNewRefusesAnotherNetworksBridge: a bridge of the configured name
// that carries another subnet's address is another network's; New does
// not take it.
func TestNewRefusesAnotherNetworksBridge(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	name := fmt.Sprintf("sltb%d", os.Getpid()%10000000)
	br := &netlink.Bridge{LinkAttrs: netlink.NewLinkAttrs()}
	br.Name = name
	if err := netlink.LinkAdd(br); err != nil {
		t.Fatalf("add bridge: %v", err)
	}
	defer func() { _ = cni.RemoveNetwork(name, netip.MustParsePrefix("10.253.254.0/24")) }()
	other := &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(10, 253, 253, 1), Mask: net.CIDRMask(24, 32)}}
	if err := netlink.AddrAdd(br, other); err != nil {
		t.Fatalf("address the bridge: %v", err)
	}
	dir := t.TempDir()
	_, err := cni.New(cni.Config{ConfDir: filepath.Join(dir, "conf"), StateDir: filepath.Join(dir, "state"),
		PodCIDR: netip.MustParsePrefix("10.253.254.0/24"), Bridge: name})
	if err == nil || !strings.Contains(err.Error(), "of another subnet") {
		t.Fatalf("New over another network's bridge = %v, want a refusal", err)
	}
}
