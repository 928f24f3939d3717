package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/internal/promtest"
	"github.com/sluicehq/sluice/nodelet/remote/remotetest"
	"github.com/sluicehq/sluice/nodelet/runtime/container/cni"
)

const nodeletWait = 20 * time.Second

func TestStartNodeletSim(t *testing.T) {
	stub := remotetest.Start(t, "tok")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := nodeletConfig{
		dispatchers: []string{stub.URL}, tokenFile: tokenFile, name: "n1", runtime: "sim",
		pool: "p", labels: map[string]string{"zone": "a"},
		cpu: 2000, memory: 1 << 30, disk: 10 << 30, offlineOvercommit: 2,
	}
	ctx, cancel := context.WithTimeout(context.Background(), nodeletWait)
	defer cancel()
	stop, err := startNodelet(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = stop()
		}
	}()
	spec, regs, ok := stub.Node("n1")
	if !ok || regs != 1 {
		t.Fatalf("node registered %d times (%v), want once", regs, ok)
	}
	want := api.Capacity{CPU: 2000, Memory: 1 << 30, Disk: 10 << 30, Ports: 12768}
	if spec.Pool != "p" || spec.Labels["zone"] != "a" || spec.Capacity != want || spec.Allocatable.Online != want ||
		spec.Allocatable.Offline != (api.Capacity{CPU: 4000, Memory: 2 << 30, Disk: 10 << 30, Ports: 12768}) || !strings.HasPrefix(spec.Address, "127.0.0.1:") ||
		spec.Ports != api.DefaultPortRange {
		t.Errorf("registered %+v", spec)
	}

	// It runs what the target holds, and serves its logs.
	pod := api.TargetPod{TaskID: "j1/0/0/0", Job: "j1", Group: "g0", QoS: api.QoSOffline, Pod: api.PodSpec{
		Containers: []api.ContainerSpec{{Name: "c0", Image: api.Image{Rootfs: "/img"}, Command: []string{"x"},
			Resources: api.Resources{CPU: 100, Memory: 1 << 20}}},
	}}
	stub.SetTarget("n1", pod)
	stub.Await(t, nodeletWait, "the pod running", func() bool {
		return slices.ContainsFunc(stub.Reports("n1"), func(r api.TaskReport) bool { return r.TaskID == "j1/0/0/0" && r.State == api.TaskRunning })
	})
	// The log server takes the log token the node registered, and not
	// the node's credential to the dispatcher.
	if len(spec.LogToken) < api.MinLogTokenLen {
		t.Fatalf("registered log token %q", spec.LogToken)
	}
	for tok, want := range map[string]int{spec.LogToken: http.StatusOK, "tok": http.StatusUnauthorized, "": http.StatusUnauthorized} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+spec.Address+api.PathNodeletLogs+"?task=j1/0/0/0", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("logs with token %q: status %d, want %d", tok, resp.StatusCode, want)
		}
	}

	stopped = true
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	if c, err := net.DialTimeout("tcp", spec.Address, time.Second); err == nil {
		c.Close()
		t.Error("the log server still listens after stop")
	}
}

func TestStartNodeletConfigProblems(t *testing.T) {
	_, err := startNodelet(context.Background(), nodeletConfig{
		runtime: "vm", offlineOvercommit: 9, maxStarts: -1, cpu: 1000, memory: 1 << 30,
	}, nil)
	var ue usageError
	if !errors.As(err, &ue) {
		t.Fatalf("err %v, want a usage error", err)
	}
	for _, want := range []string{"runtime", "overcommit", "max starts"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestStartNodeletWithoutDispatcher(t *testing.T) {
	// Nothing listens: it keeps trying to register until ctx ends.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := startNodelet(ctx, nodeletConfig{
		dispatchers: []string{"http://127.0.0.1:1"}, name: "n1", runtime: "sim", cpu: 1000, memory: 1 << 30,
	}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the context's deadline", err)
	}
}

func TestNodeletCommand(t *testing.T) {
	stub := remotetest.Start(t, "")
	t.Setenv("SLUICE_POOL", "envpool")
	t.Setenv("SLUICE_LABELS", "zone=b,rack=7")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, []string{"nodelet", "--dispatcher", stub.URL, "--runtime", "sim", "--name", "cmd-1",
			"--cpu", "1500m", "--memory", "2Gi", "--offline-overcommit", "1.5", "--log-level", "error"}, &out, &out)
	}()
	stub.Await(t, nodeletWait, "registration", func() bool { _, _, ok := stub.Node("cmd-1"); return ok })
	spec, _, _ := stub.Node("cmd-1")
	if spec.Pool != "envpool" || spec.Labels["rack"] != "7" || spec.Capacity.CPU != 1500 || spec.Capacity.Memory != 2<<30 ||
		spec.Allocatable.Offline.CPU != 2250 {
		t.Errorf("registered %+v", spec)
	}
	cancel()
	select {
	case err := <-errc:
		if code := exitCode(ctx, err); code != exitInterrupted {
			t.Errorf("exit code %d (err %v), want %d", code, err, exitInterrupted)
		}
	case <-time.After(nodeletWait):
		t.Fatal("nodelet did not stop when interrupted")
	}
}

func TestNodeletCommandUsage(t *testing.T) {
	for _, args := range [][]string{
		{"nodelet", "--cpu", "lots", "--runtime", "sim"},
		{"nodelet", "--memory", "0", "--runtime", "sim"},
		{"nodelet", "--offline-overcommit", "-1", "--runtime", "sim"},
		{"nodelet", "--runtime", "vm", "--cpu", "1", "--memory", "1Gi"},
		{"nodelet", "--disk", "0", "--runtime", "sim"},
		{"nodelet", "--disk", "lots", "--runtime", "sim"},
	} {
		var out bytes.Buffer
		ctx := context.Background()
		err := run(ctx, args, &out, &out)
		if code := exitCode(ctx, err); code != exitUsage {
			t.Errorf("%v: exit code %d (err %v), want %d", args, code, err, exitUsage)
		}
	}
}

// TestStartNodeletOvercommit runs a container nodelet with the overcommit
// controller on its own cgroup root: the tiers are created and the
// controller writes the offline tier's CPU quota.
func TestStartNodeletOvercommit(t *testing.T) {
	needContainers(t)
	root := fmt.Sprintf("sluicetest-oc-%d", os.Getpid())
	rel := []string{root + "/online", root + "/offline", root}
	before := existingCgroups(rel...)
	t.Cleanup(func() { removeNewCgroups(before, rel...) })
	stub := remotetest.Start(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), nodeletWait)
	defer cancel()
	stop, err := startNodelet(ctx, nodeletConfig{
		dispatchers: []string{stub.URL}, name: "oc", runtime: "container", noPodNetwork: true, stateDir: t.TempDir(),
		cpu: 2000, memory: 1 << 30, cgroupRoot: root, overcommit: true, removePods: true,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	quota := func() string {
		for _, p := range []string{
			filepath.Join("/sys/fs/cgroup/cpu", root, "offline", "cpu.cfs_quota_us"), // v1
			filepath.Join("/sys/fs/cgroup", root, "offline", "cpu.max"),              // v2
		} {
			if b, err := os.ReadFile(p); err == nil {
				return strings.TrimSpace(string(b))
			}
		}
		return ""
	}
	deadline := time.Now().Add(nodeletWait)
	for q := quota(); q == "" || q == "-1" || strings.HasPrefix(q, "max"); q = quota() {
		if time.Now().After(deadline) {
			t.Fatalf("offline tier quota still %q after %v: the controller did not run", q, nodeletWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The metrics show the quota the controller set, and the tiers' use.
	spec, _, _ := stub.Node("oc")
	st, body := getMetrics(t, "http://"+spec.Address+api.PathMetrics, "")
	if st != 200 {
		t.Fatalf("metrics: %d %s", st, body)
	}
	mfs := promtest.Parse(t, body)
	if v := promtest.Value(t, mfs, "sluice_nodelet_offline_cpu_quota_cores"); v <= 0 {
		t.Errorf("offline CPU quota %v cores, want it positive", v)
	}
	if v := promtest.Value(t, mfs, "sluice_nodelet_overcommit_ticks_total"); v < 1 {
		t.Errorf("overcommit ticks %v", v)
	}
	for _, tier := range []string{"online", "offline"} {
		if v := promtest.Value(t, mfs, "sluice_nodelet_tier_memory_usage_bytes", "tier="+tier); v < 0 {
			t.Errorf("%s memory use %v", tier, v)
		}
	}
}

func TestNodeletOvercommitNeedsContainers(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"nodelet", "--runtime", "sim", "--overcommit", "--dispatcher", "http://127.0.0.1:1"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "overcommit: needs the container runtime") {
		t.Fatalf("nodelet --runtime sim --overcommit = %v", err)
	}
}

func TestNodeletShimChecked(t *testing.T) {
	plain := filepath.Join(t.TempDir(), "sluice-shim")
	if err := os.WriteFile(plain, []byte("not a program"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--runtime", "container", "--shim", "/nonexistent/sluice-shim"}, "shim: stat /nonexistent/sluice-shim: no such file or directory"},
		{[]string{"--runtime", "container", "--shim", plain}, "shim: " + plain + " is not an executable file"},
		{[]string{"--runtime", "sim", "--overcommit=false", "--shim", "/bin/true"}, "shim: needs the container runtime"},
	} {
		var out bytes.Buffer
		args := append([]string{"nodelet", "--dispatcher", "http://127.0.0.1:1"}, tc.args...)
		err := run(context.Background(), args, &out, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v = %v; want an error containing %q", tc.args, err, tc.want)
		}
	}
}

func TestNodeletImageRootsChecked(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--runtime", "container", "--image-roots", "/srv/images,/"}, `image root "/": must not be the host's root`},
		{[]string{"--runtime", "container", "--image-roots", "images"}, `image root "images": must be a clean absolute path`},
		{[]string{"--runtime", "container", "--image-roots", "/srv/../etc"}, `image root "/srv/../etc": must be a clean absolute path`},
		{[]string{"--runtime", "sim", "--overcommit=false", "--image-roots", "/srv/images"}, "image roots: need the container runtime"},
	} {
		checkNodeletUsage(t, tc.want, tc.args...)
	}
	cfg := nodeletConfig{runtime: "container", stateDir: "/var/lib/sluice/n1", cpu: 1000, memory: 1 << 30}
	if err := cfg.resolve(); err != nil || !slices.Equal(cfg.imageRoots, []string{"/var/lib/sluice/n1/images"}) || cfg.ports != api.DefaultPortRange {
		t.Errorf("default image roots %v (%v), want the state directory's images", cfg.imageRoots, err)
	}
	cfg = nodeletConfig{runtime: "sim", stateDir: "/var/lib/sluice/n1", cpu: 1000, memory: 1 << 30}
	if err := cfg.resolve(); err != nil || cfg.imageRoots != nil {
		t.Errorf("sim image roots %v (%v), want none", cfg.imageRoots, err)
	}
}

func TestNodeletVolumeRootsChecked(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--volume-roots", "/srv/data,/"}, `volume root "/": must not be the host's root`},
		{[]string{"--volume-roots", "data"}, `volume root "data": must be a clean absolute path`},
		{[]string{"--volume-roots", "/srv/out:rwx"}, `volume root "/srv/out:rwx": the mode after ':' must be rw or ro`},
		{[]string{"--volume-roots", "/srv/a,/srv/a:rw"}, `volume root "/srv/a:rw": given twice`},
	} {
		checkNodeletUsage(t, tc.want, append([]string{"--runtime", "sim"}, tc.args...)...)
	}
	cfg := nodeletConfig{runtime: "sim", stateDir: t.TempDir(), cpu: 1000, memory: 1 << 30, volumeRoots: []string{"/srv/data", "/srv/out:rw"}}
	if err := cfg.resolve(); err != nil || len(cfg.roots) != 2 || cfg.roots[0].Writable || !cfg.roots[1].Writable {
		t.Errorf("volume roots %+v (%v)", cfg.roots, err)
	}
}

// TestNodeletDiskDefault: without --disk a node advertises the free space
// of its state directory's filesystem (of the nearest ancestor there is,
// before the directory is made), in both tiers.
func TestNodeletDiskDefault(t *testing.T) {
	dir := t.TempDir()
	cfg := nodeletConfig{runtime: "sim", stateDir: filepath.Join(dir, "not", "yet"), cpu: 1000, memory: 1 << 30}
	if err := cfg.resolve(); err != nil {
		t.Fatal(err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	// Others write to the same filesystem meanwhile: within 1 GiB.
	if d := cfg.disk - free; cfg.disk <= 0 || d > 1<<30 || d < -(1<<30) {
		t.Errorf("default disk %d, free space %d", cfg.disk, free)
	}
	spec := cfg.spec("127.0.0.1:1")
	if spec.Capacity.Disk != cfg.disk || spec.Allocatable.Online.Disk != cfg.disk || spec.Allocatable.Offline.Disk != cfg.disk {
		t.Errorf("spec disk: %+v", spec)
	}
	cfg = nodeletConfig{runtime: "sim", stateDir: dir, cpu: 1000, memory: 1 << 30, disk: -1}
	if err := cfg.resolve(); err == nil || !strings.Contains(err.Error(), "disk: must not be negative") {
		t.Errorf("negative disk: %v", err)
	}
}

func TestNodeletNetworkFlagsChecked(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--runtime", "container", "--pod-cidr", "10.0.0.0/33"}, "pod cidr: want a subnet"},
		{[]string{"--runtime", "container", "--pod-cidr", "10.1.2.3/24"}, "give the subnet's network address, 10.1.2.0/24"},
		{[]string{"--runtime", "container", "--pod-cidr", "fd00::/64"}, "want an IPv4 subnet"},
		{[]string{"--runtime", "container", "--pod-network=false", "--pod-cidr", "10.1.2.0/24"}, "pod network (pod cidr, pod bridge, cni dirs): needs the container runtime"},
		{[]string{"--runtime", "sim", "--overcommit=false", "--cni-conf-dir", "/etc/cni/net.d"}, "pod network (pod cidr, pod bridge, cni dirs): needs the container runtime"},
		{[]string{"--runtime", "sim", "--overcommit=false", "--host-ip", "127.0.0.1"}, "host ip: want an IP address pods and other hosts reach"},
	} {
		checkNodeletUsage(t, tc.want, tc.args...)
	}
	cfg := nodeletConfig{runtime: "container", stateDir: "/var/lib/sluice/n1", cpu: 1000, memory: 1 << 30}
	if err := cfg.resolve(); err != nil || cfg.podPrefix != cni.DefaultPodCIDR || cfg.podBridge != cni.DefaultBridge ||
		cfg.cniConfDir != "/var/lib/sluice/n1/cni/net.d" || !slices.Equal(cfg.cniBinDirs, cni.DefaultBinDirs) || cfg.defaultNetwork() != "bridge" {
		t.Errorf("network defaults: %+v (%v)", cfg, err)
	}
	cfg = nodeletConfig{runtime: "container", noPodNetwork: true, stateDir: "/var/lib/sluice/n1", cpu: 1000, memory: 1 << 30}
	if err := cfg.resolve(); err != nil || cfg.defaultNetwork() != "none" {
		t.Errorf("without a pod network: default mode %q (%v), want none", cfg.defaultNetwork(), err)
	}
	for _, tc := range []struct{ flag, advertised, want string }{
		{"10.9.9.9", "127.0.0.1:7070", "10.9.9.9"},
		{"", "192.0.2.7:7070", "192.0.2.7"},
		{"", "127.0.0.1:7070", ""},
		{"", "node-1:7070", ""},
	} {
		c := nodeletConfig{hostIP: tc.flag}
		if got := c.nodeHostIP(tc.advertised, nil); got != tc.want {
			t.Errorf("host IP with --host-ip %q advertising %s = %q, want %q", tc.flag, tc.advertised, got, tc.want)
		}
	}
}

// TestNodeletPorts: --ports gives the range the node advertises, its
// size the ports of its capacity and tiers; a bad range is a usage error.
func TestNodeletPorts(t *testing.T) {
	for _, tc := range []struct{ arg, want string }{
		{"20000", "--ports: port range \"20000\": want LO-HI"},
		{"30000-20000", "--ports: port range \"30000-20000\": 20000 is below 30000"},
		{"0-100", "--ports: port range \"0-100\""},
		{"1-70000", "--ports: port range \"1-70000\""},
	} {
		checkNodeletUsage(t, tc.want, "--ports", tc.arg)
	}
	cfg := nodeletConfig{runtime: "sim", name: "n1", cpu: 1000, memory: 1 << 30, ports: api.PortRange{Lo: 9000, Hi: 9099}}
	if err := cfg.resolve(); err != nil {
		t.Fatal(err)
	}
	spec := cfg.spec("127.0.0.1:7070")
	if spec.Ports != cfg.ports || spec.Capacity.Ports != 100 || spec.Allocatable.Online.Ports != 100 || spec.Allocatable.Offline.Ports != 100 {
		t.Errorf("spec %+v; want the range 9000-9099 and 100 ports everywhere", spec)
	}
	if err := spec.Validate(); err != nil {
		t.Errorf("the node's spec is invalid: %v", err)
	}
	bad := nodeletConfig{runtime: "sim", name: "n1", cpu: 1000, memory: 1 << 30, ports: api.PortRange{Lo: 10, Hi: 5}}
	if err := bad.resolve(); err == nil || !strings.Contains(err.Error(), "ports: want a range") {
		t.Errorf("resolve of range 10-5: %v", err)
	}
}

// checkNodeletUsage runs `sluice nodelet` with args after a dispatcher and
// a capacity, and checks that it fails as a usage error that says want.
func checkNodeletUsage(t *testing.T, want string, args ...string) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), append([]string{"nodelet", "--dispatcher", "http://127.0.0.1:1", "--cpu", "1", "--memory", "1Gi"}, args...), &out, &out)
	if code := exitCode(context.Background(), err); code != exitUsage || !strings.Contains(err.Error(), want) {
		t.Errorf("%v = %v (exit %d); want a usage error containing %q", args, err, code, want)
	}
}
