package container_test

import (
	"bufio"
	"context"
	"crypto/sha512"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/sluicehq/sluice/nodelet/runtime"
	"github.com/sluicehq/sluice/nodelet/runtime/container"
	"github.com/sluicehq/sluice/nodelet/runtime/container/cni"
)

// netEnv is a runtime with a pod network of its own: a bridge and a
// subnet no one else on the host uses, state in a temporary directory.
type netEnv struct {
	rt     *container.Runtime
	dir    string
	bridge string
	cidr   netip.Prefix
	cfg    container.Config
}

var bridgeSeq atomic.Int64

// newNetEnv starts a runtime whose pod network has a bridge named after
// this process and a /bits subnet chosen at random (the seed is logged)
// among those free on the host. Cleanup closes it and deletes the bridge.
func newNetEnv(t testing.TB, bits int) *netEnv {
	t.Helper()
	needRoot(t)
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		t.Skip("needs the CNI plugins in /usr/lib/cni (scripts/install-cni.sh)")
	}
	dir := t.TempDir()
	e := &netEnv{dir: dir, bridge: fmt.Sprintf("slt%d-%d", os.Getpid(), bridgeSeq.Add(1))}
	if len(e.bridge) > 15 {
		e.bridge = e.bridge[:15]
	}
	seed := time.Now().UnixNano()
	t.Logf("subnet seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Cleanup(func() {
		if err := cni.RemoveNetwork(e.bridge, e.cidr); err != nil {
			t.Errorf("RemoveNetwork: %v", err)
		}
		if r := masqueradeRules(t, e.bridge); len(r) > 0 {
			t.Errorf("masquerade rules after RemoveNetwork: %q", r)
		}
		if _, err := netlink.LinkByName(e.bridge); err == nil {
			t.Errorf("bridge %s after RemoveNetwork", e.bridge)
		}
	})
	for range 20 {
		// 10.128.0.0/9, away from the defaults of Sluice and others.
		a := netip.AddrFrom4([4]byte{10, byte(128 + rng.IntN(127)), byte(rng.IntN(256)), 0})
		e.cidr = netip.PrefixFrom(a, bits).Masked()
		e.cfg = container.Config{
			StateDir: filepath.Join(dir, "pods"), CgroupParent: cgroupParent, LogMaxBytes: 1 << 20,
			ImageDir: filepath.Join(dir, ".images"), ImageRoots: []string{imageRoot},
			Network: &cni.Config{ConfDir: filepath.Join(dir, "cni-conf"), StateDir: filepath.Join(dir, "cni"), PodCIDR: e.cidr, Bridge: e.bridge},
		}
		rt, err := container.New(e.cfg)
		if errors.Is(err, cni.ErrOverlap) {
			continue
		}
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		e.rt = rt
		t.Cleanup(func() { e.rt.Close() })
		return e
	}
	t.Fatal("no free subnet found in 20 tries")
	return nil
}

func (e *netEnv) gateway() netip.Addr { return e.rt.Network().Gateway() }

// wait waits for pod id and returns its exit and its first container's log.
func (e *netEnv) wait(t *testing.T, ctx context.Context, id string) (runtime.Exit, string) {
	t.Helper()
	ex, err := e.rt.Wait(ctx, id)
	if err != nil {
		t.Fatalf("Wait %s: %v", id, err)
	}
	return ex, logsOf(ctx, t, e.rt, id, "c0")
}

// leaks lists what the pod network holds for pods: veths on the bridge,
// address reservations, iptables rules naming the network or pods' chains
// (ids are the pods that were attached), and pinned namespaces.
func (e *netEnv) leaks(t *testing.T, ids []string) []string {
	t.Helper()
	var out []string
	if br, err := netlink.LinkByName(e.bridge); err == nil {
		links, err := netlink.LinkList()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			if l.Attrs().MasterIndex == br.Attrs().Index {
				out = append(out, "veth "+l.Attrs().Name)
			}
		}
	}
	ipam := filepath.Join(e.dir, "cni", "ipam", e.bridge)
	ents, _ := os.ReadDir(ipam)
	for _, en := range ents {
		if n := en.Name(); n != "lock" && !strings.HasPrefix(n, "last_reserved_ip") {
			out = append(out, "reservation "+n)
		}
	}
	out = append(out, e.rules(t, ids)...)
	pins, _ := os.ReadDir(e.rt.Network().NetnsDir())
	for _, p := range pins {
		out = append(out, "netns "+p.Name())
	}
	return out
}

// rules lists the iptables lines (all tables) that name the network, or
// the chains the bridge plugin (masquerade) or portmap (DNAT) make for the
// pods ids.
func (e *netEnv) rules(t *testing.T, ids []string) []string {
	t.Helper()
	b, err := exec.Command("iptables-save").Output()
	if err != nil {
		t.Fatalf("iptables-save: %v", err)
	}
	chains := map[string]bool{}
	for _, id := range ids {
		chains[chainName(e.bridge, id, "")] = true
		chains[chainName(e.bridge, id, "DN-")] = true
	}
	var out []string
	name := `"` + e.bridge + `"`
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		switch {
		case strings.Contains(l, name):
			out = append(out, "rule "+l)
		case len(f) > 0 && chains[strings.TrimPrefix(f[0], ":")]:
			out = append(out, "chain "+l)
		case len(f) > 1 && f[0] == "-A" && chains[f[1]]:
			out = append(out, "rule "+l)
		}
	}
	return out
}

// masqueradeRules are the iptables lines of the masquerade rule of the
// pod network named name.
func masqueradeRules(t testing.TB, name string) []string {
	t.Helper()
	b, err := exec.Command("iptables-save", "-t", "nat").Output()
	if err != nil {
		t.Fatalf("iptables-save: %v", err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, `"sluice pod network `+name+`"`) {
			out = append(out, l)
		}
	}
	return out
}

// chainName is the plugins' name of a pod's chain: CNI-, prefix and the
// SHA-512 of network and container ID, 28 bytes in all.
func chainName(network, id, prefix string) string {
	return fmt.Sprintf("CNI-%s%x", prefix, sha512.Sum512([]byte(network+id)))[:28]
}

func netPod(id, mode string, args []string) runtime.PodSpec {
	s := pod(id, args)
	s.Network = mode
	return s
}

func TestBridgePodToPod(t *testing.T) {
	e := newNetEnv(t, 24)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	startPod(t, ctx, e.rt, netPod("server", runtime.NetworkBridge, []string{"/payload", "listenon", "0.0.0.0:7000", "exit", "0"}))
	ip, ok := e.rt.PodIP("server")
	if !ok || !e.cidr.Contains(ip) || ip == e.gateway() {
		t.Fatalf("PodIP = %v, %v; want an address of %s other than the gateway", ip, ok, e.cidr)
	}
	startPod(t, ctx, e.rt, netPod("client", runtime.NetworkBridge,
		[]string{"/payload", "dialto", netip.AddrPortFrom(ip, 7000).String(), "hello from a pod", "exit", "0"}))
	if ex, log := e.wait(t, ctx, "client"); ex.Code != 0 {
		t.Fatalf("client exit = %+v, log %q", ex, log)
	}
	if ex, log := e.wait(t, ctx, "server"); ex.Code != 0 || log != "got: hello from a pod\n" {
		t.Errorf("server exit = %+v, log %q; want it to have got the client's line", ex, log)
	}
	if cip, _ := e.rt.PodIP("client"); cip == ip {
		t.Errorf("both pods have %v", ip)
	}
}

func TestBridgePodToHost(t *testing.T) {
	e := newNetEnv(t, 24)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The network has its bridge, with the gateway's address, before the
	// first pod.
	ln, err := net.Listen("tcp", netip.AddrPortFrom(e.gateway(), 0).String())
	if err != nil {
		t.Fatalf("listen on the gateway: %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "host saw %s", r.RemoteAddr[:strings.LastIndexByte(r.RemoteAddr, ':')])
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	startPod(t, ctx, e.rt, netPod("p", runtime.NetworkBridge, []string{"/payload", "get", "http://" + ln.Addr().String() + "/", "exit", "0"}))
	ex, log := e.wait(t, ctx, "p")
	ip, _ := e.rt.PodIP("p")
	if want := "host saw " + ip.String() + "\n"; ex.Code != 0 || log != want {
		t.Errorf("exit = %+v, log %q; want %q", ex, log, want)
	}
}

func TestBridgeHostToMappedPort(t *testing.T) {
	e := newNetEnv(t, 24)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	port := freePort(t)
	spec := netPod("srv", runtime.NetworkBridge, []string{"/payload", "listenon", "0.0.0.0:" + strconv.Itoa(int(port)), "exit", "0"})
	spec.Ports = []runtime.PortMapping{{Name: "http", Port: port}}
	startPod(t, ctx, e.rt, spec)
	if r := e.rules(t, []string{"srv"}); !slices.ContainsFunc(r, func(l string) bool { return strings.Contains(l, chainName(e.bridge, "srv", "DN-")) }) {
		t.Fatalf("no portmap chain %s among the pod's rules %q", chainName(e.bridge, "srv", "DN-"), r)
	}
	// The node's address on the bridge, where the pod is not listening:
	// only the mapping takes the connection to the pod.
	addr := netip.AddrPortFrom(e.gateway(), port).String()
	var c net.Conn
	var err error
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if c, err = net.DialTimeout("tcp", addr, time.Second); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	fmt.Fprintln(c, "hello from the host")
	c.Close()
	if ex, log := e.wait(t, ctx, "srv"); ex.Code != 0 || log != "got: hello from the host\n" {
		t.Errorf("exit = %+v, log %q", ex, log)
	}
	if err := e.rt.Remove(ctx, "srv"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if l := e.leaks(t, []string{"srv"}); len(l) > 0 {
		t.Errorf("left after Remove: %q", l)
	}
}

// freePort is a TCP port in the nodes' default range no one listens on.
func freePort(t *testing.T) uint16 {
	t.Helper()
	for range 100 {
		p := uint16(20000 + rand.IntN(12768))
		ln, err := net.Listen("tcp", ":"+strconv.Itoa(int(p)))
		if err == nil {
			ln.Close()
			return p
		}
	}
	t.Fatal("no free port")
	return 0
}

// ifaces parses the payload's ifaces output: name to addresses.
func ifaces(log string) map[string][]string {
	out := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			out[f[0]] = f[1:]
		}
	}
	return out
}

func TestNetworkModesInterfaces(t *testing.T) {
	e := newNetEnv(t, 24)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, mode := range []string{runtime.NetworkNone, "", runtime.NetworkBridge, runtime.NetworkHost} {
		id := "m-" + mode
		if mode == "" {
			id = "m-default"
		}
		startPod(t, ctx, e.rt, netPod(id, mode, []string{"/payload", "ifaces", "exit", "0"}))
		ex, log := e.wait(t, ctx, id)
		if ex.Code != 0 {
			t.Fatalf("%s: exit %+v, log %q", id, ex, log)
		}
		got := ifaces(log)
		switch mode {
		case runtime.NetworkNone, "":
			if len(got) != 1 || !slices.Contains(got["lo"], "127.0.0.1/8") {
				t.Errorf("%s: interfaces %v, want lo alone, up", id, got)
			}
		case runtime.NetworkBridge:
			ip, _ := e.rt.PodIP(id)
			want := netip.PrefixFrom(ip, e.cidr.Bits()).String()
			if len(got) != 2 || !slices.Contains(got["lo"], "127.0.0.1/8") || !slices.Contains(got[cni.IfName], want) {
				t.Errorf("%s: interfaces %v, want lo and %s with %s", id, got, cni.IfName, want)
			}
			// The pod network is IPv4: no pod interface starts IPv6,
			// whose neighbour discovery the bridge floods to every pod.
			if len(got[cni.IfName]) != 1 {
				t.Errorf("%s: %s has %v, want %s alone (no IPv6)", id, cni.IfName, got[cni.IfName], want)
			}
		case runtime.NetworkHost:
			hostIfs, err := net.Interfaces()
			if err != nil {
				t.Fatal(err)
			}
			for _, i := range hostIfs {
				if _, ok := got[i.Name]; !ok {
					t.Errorf("%s: interfaces %v, want the host's, %s among them", id, got, i.Name)
				}
			}
		}
		if mode != runtime.NetworkBridge {
			if ip, ok := e.rt.PodIP(id); ok {
				t.Errorf("%s: PodIP = %v, want none", id, ip)
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join("/proc/sys/net/ipv6/conf", e.bridge, "disable_ipv6")); err == nil && strings.TrimSpace(string(b)) != "1" {
		t.Errorf("bridge %s has IPv6 on", e.bridge)
	}
	if pins, _ := os.ReadDir(e.rt.Network().NetnsDir()); len(pins) != 1 || pins[0].Name() != "m-bridge" {
		t.Errorf("pinned namespaces %v, want the bridge pod's alone", pins)
	}
}

// TestBridgeAttachFailureLeavesNothing fills a /30 (one pod address): the
// second pod's ADD fails, its start with it, and nothing of it stays.
func TestBridgeAttachFailureLeavesNothing(t *testing.T) {
	e := newNetEnv(t, 30)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	startPod(t, ctx, e.rt, netPod("first", runtime.NetworkBridge, []string{"/payload", "sleep", "60s"}))
	before := e.leaks(t, []string{"first"})
	spec := netPod("second", runtime.NetworkBridge, []string{"/payload", "exit", "0"})
	spec.Ports = []runtime.PortMapping{{Name: "p", Port: freePort(t)}}
	err := e.rt.Start(ctx, spec)
	if err == nil || !strings.Contains(err.Error(), "network: cni: attach pod \"second\"") {
		t.Fatalf("Start = %v, want the attach's failure", err)
	}
	t.Logf("Start: %v", err)
	if after := e.leaks(t, []string{"first", "second"}); !slices.Equal(after, before) {
		t.Errorf("after the failed start the network holds %q, before it %q", after, before)
	}
	if l := leftovers(e.cfg.StateDir, "second"); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
}

// TestBridgeDetachAfterSandboxDied kills a bridge pod's sandbox and
// restarts the runtime: the pod is adopted as ended, and its removal
// still releases everything the plugins made for it.
func TestBridgeDetachAfterSandboxDied(t *testing.T) {
	e := newNetEnv(t, 24)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	spec := netPod("dies", runtime.NetworkBridge, []string{"/payload", "sleep", "60s"})
	spec.Ports = []runtime.PortMapping{{Name: "p", Port: freePort(t)}}
	if err := e.rt.Start(ctx, spec); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if len(e.leaks(t, []string{"dies"})) == 0 {
		t.Fatal("the attached pod shows nothing on the network: the leak count sees nothing")
	}
	if err := e.rt.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	var sb struct{ Pid int }
	b, err := os.ReadFile(filepath.Join(e.cfg.StateDir, "dies", "sandbox.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Sscanf(string(b), `{"Pid":%d`, &sb.Pid); err != nil {
		t.Fatalf("sandbox.json %q: %v", b, err)
	}
	p, _ := os.FindProcess(sb.Pid)
	_ = p.Kill()
	rt, err := container.New(e.cfg)
	if err != nil {
		t.Fatalf("New again: %v", err)
	}
	e.rt = rt
	if err := rt.Stop(ctx, "dies", 0); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := rt.Remove(ctx, "dies"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if l := e.leaks(t, []string{"dies"}); len(l) > 0 {
		t.Errorf("left after Remove: %q", l)
	}
}

// TestBridgeNoLeaks starts and removes many bridge-mode pods, four at a
// time, and counts what the network holds after: nothing. Its count is
// SLUICE_NET_LEAK_PODS (1000 for the full run), 100 by default.
func TestBridgeNoLeaks(t *testing.T) {
	n := 100
	if s := os.Getenv("SLUICE_NET_LEAK_PODS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			t.Fatalf("SLUICE_NET_LEAK_PODS=%q: want a positive count", s)
		}
		n = v
	}
	e := newNetEnv(t, 22)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	base := e.leaks(t, nil)
	if len(base) > 0 {
		t.Fatalf("a new network holds %q", base)
	}
	if r := masqueradeRules(t, e.bridge); len(r) != 1 {
		t.Fatalf("masquerade rules of the network: %q, want one", r)
	}
	const lanes = 4
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("leak-%d", i)
	}
	begin := time.Now()
	var startNs, removeNs atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, lanes)
	for l := range lanes {
		wg.Go(func() {
			for i := l; i < n; i += lanes {
				spec := netPod(ids[i], runtime.NetworkBridge, []string{"/payload", "exit", "0"})
				if i%2 == 0 {
					spec.Ports = []runtime.PortMapping{{Name: "p", Port: uint16(30000 + i%2000)}}
				}
				t0 := time.Now()
				if err := e.rt.Start(ctx, spec); err != nil {
					errs <- err
					return
				}
				startNs.Add(int64(time.Since(t0)))
				if _, err := e.rt.Wait(ctx, ids[i]); err != nil {
					errs <- err
					return
				}
				t0 = time.Now()
				if err := e.rt.Remove(ctx, ids[i]); err != nil {
					errs <- err
					return
				}
				removeNs.Add(int64(time.Since(t0)))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d bridge-mode pods started and removed in %v (mean start %v, mean remove %v)", n, time.Since(begin).Round(time.Millisecond),
		time.Duration(startNs.Load()/int64(n)).Round(time.Microsecond), time.Duration(removeNs.Load()/int64(n)).Round(time.Microsecond))
	if l := e.leaks(t, ids); len(l) > 0 {
		t.Errorf("left after %d pods: %d items, first %q", n, len(l), l[:min(len(l), 10)])
	}
}

// TestBridgeOrphanDetachedAtRestart loses a bridge-mode pod's state
// directory while no runtime runs (as a crash in its removal would): the
// next runtime finds its pinned namespace with no pod and detaches it.
func TestBridgeOrphanDetachedAtRestart(t *testing.T) {
	e := newNetEnv(t, 24)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	spec := netPod("orphan", runtime.NetworkBridge, []string{"/payload", "exit", "0"})
	spec.Ports = []runtime.PortMapping{{Name: "p", Port: freePort(t)}}
	if err := e.rt.Start(ctx, spec); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if _, err := e.rt.Wait(ctx, "orphan"); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if err := e.rt.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	cgroups := leftovers(e.cfg.StateDir, "orphan")
	defer func() {
		// The pod's cgroups, which only its removal would have taken:
		// the deepest first.
		slices.SortFunc(cgroups, func(a, b string) int { return len(b) - len(a) })
		for _, d := range cgroups {
			sub, _ := filepath.Glob(filepath.Join(d, "*", ""))
			for _, s := range sub {
				_ = os.Remove(s)
			}
			_ = os.Remove(d)
		}
	}()
	if err := os.RemoveAll(filepath.Join(e.cfg.StateDir, "orphan")); err != nil {
		t.Fatal(err)
	}
	if len(e.leaks(t, []string{"orphan"})) == 0 {
		t.Fatal("the lost pod shows nothing on the network: the leak count sees nothing")
	}
	rt, err := container.New(e.cfg)
	if err != nil {
		t.Fatalf("New again: %v", err)
	}
	e.rt = rt
	if l := e.leaks(t, []string{"orphan"}); len(l) > 0 {
		t.Errorf("left after the restart: %q", l)
	}
}
