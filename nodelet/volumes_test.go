package nodelet_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet"
	"github.com/sluicehq/sluice/nodelet/cgroup"
	"github.com/sluicehq/sluice/nodelet/runtime"
	"github.com/sluicehq/sluice/nodelet/runtime/sim"
)

// volumeRoots makes a read-only root data (holding in/input.txt), a
// writable root out, a directory secret beside them and links in data
// leading to secret, and returns the roots and the top directory.
func volumeRoots(t *testing.T) (roots []runtime.VolumeRoot, top string) {
	t.Helper()
	top = t.TempDir()
	for _, d := range []string{"data", "data/in", "out", "secret"} {
		if err := os.Mkdir(filepath.Join(top, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(top, "data", "in", "input.txt"), []byte("the input\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(top, "secret"), filepath.Join(top, "data", "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../secret", filepath.Join(top, "data", "up")); err != nil {
		t.Fatal(err)
	}
	return []runtime.VolumeRoot{{Path: filepath.Join(top, "data")}, {Path: filepath.Join(top, "out"), Writable: true}}, top
}

// withHostPath gives d a host path volume "v" of path, mounted at /v,
// read-only if ro.
func withHostPath(d nodelet.DesiredPod, path string, ro bool) nodelet.DesiredPod {
	d.Pod.Volumes = append(d.Pod.Volumes, api.Volume{Name: "v", HostPath: &api.HostPathVolume{Path: path, ReadOnly: ro}})
	for i := range d.Pod.Containers {
		d.Pod.Containers[i].Mounts = append(d.Pod.Containers[i].Mounts, api.Mount{Volume: "v", Path: "/v"})
	}
	return d
}

// deniedVolumeCases are host paths every node refuses, by pod ID, and
// what the message must say beside the path.
func deniedVolumeCases(top string) []struct {
	id, path string
	ro       bool
	want     string
} {
	return []struct {
		id, path string
		ro       bool
		want     string
	}{
		{"dotdot", top + "/data/in/../../secret", true, "is not a clean absolute path"},
		{"symlink", top + "/data/escape", true, "leads out of the volume root " + top + "/data through a symbolic link"},
		{"relsymlink", top + "/data/up", true, "leads out of the volume root"},
		{"outside", top + "/secret", true, "is not below a volume root"},
		{"rwunderro", top + "/data/in", false, "is below the read-only volume root " + top + "/data"},
	}
}

// TestSimVolumes: host path refusals are the node's, so the simulated
// runtime sees them too; allowed volumes, scratch and host paths, are
// accepted and simulated.
func TestSimVolumes(t *testing.T) {
	roots, top := volumeRoots(t)
	host := sim.NewHost()
	defer host.Close()
	d := newFakeDispatcher()
	h := newHarness(t, host, d, func(c *nodelet.Config) { c.VolumeRoots = roots })
	ok := withHostPath(simPod("ok", 1, 0, 0), top+"/out", false)
	ok.Pod.Volumes = append(ok.Pod.Volumes, api.Volume{Name: "work", Scratch: &api.ScratchVolume{Size: 1 << 30}})
	ok.Pod.Containers[0].Mounts = append(ok.Pod.Containers[0].Mounts, api.Mount{Volume: "work", Path: "/work"})
	target := []nodelet.DesiredPod{ok}
	cases := deniedVolumeCases(top)
	for _, c := range cases {
		target = append(target, withHostPath(simPod(c.id, 1, 0, 0), c.path, c.ro))
	}
	d.setTarget(1, target...)
	eventually(t, 5*time.Second, "ok running and the others failed", func() bool {
		n := 0
		for _, c := range cases {
			n += len(d.find(c.id, api.TaskFailed))
		}
		return n == len(cases) && len(d.find("ok", api.TaskRunning)) == 1
	})
	for _, c := range cases {
		r := d.find(c.id, api.TaskFailed)
		if r[0].Reason != api.ReasonVolumeDenied || !strings.Contains(r[0].Message, c.path) || !strings.Contains(r[0].Message, c.want) {
			t.Errorf("%s: failure %+v, want %s naming %s and saying %q", c.id, r[0], api.ReasonVolumeDenied, c.path, c.want)
		}
		if n := h.rt.startCounts()[c.id+"/1"]; n != 0 {
			t.Errorf("%s: the runtime was asked to start it %d times", c.id, n)
		}
	}
	if got := running(t, h.rt); !slices.Equal(got, []string{"ok/1"}) {
		t.Errorf("running = %v", got)
	}
}

// TestNoVolumeRootsRefuseHostPaths: a node given no volume roots refuses
// every host path, and says why.
func TestNoVolumeRootsRefuseHostPaths(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	d := newFakeDispatcher()
	newHarness(t, host, d, nil)
	d.setTarget(1, withHostPath(simPod("p", 1, 0, 0), "/srv/data", true))
	eventually(t, 5*time.Second, "p failed", func() bool { return len(d.find("p", api.TaskFailed)) == 1 })
	if r := d.find("p", api.TaskFailed)[0]; r.Reason != api.ReasonVolumeDenied || !strings.Contains(r.Message, "/srv/data") || !strings.Contains(r.Message, "no volume roots") {
		t.Errorf("failure %+v", r)
	}
}

func TestConfigVolumeRoots(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	_, err := nodelet.New(nodelet.Config{Node: "n", Runtime: sim.New(host), Dispatcher: newFakeDispatcher(),
		VolumeRoots: []runtime.VolumeRoot{{Path: "rel"}, {Path: "/"}, {Path: "/a"}, {Path: "/a", Writable: true}}})
	for _, w := range []string{`VolumeRoots: "rel"`, `VolumeRoots: "/" must not`, `VolumeRoots: "/a" given twice`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("New error %v lacks %s", err, w)
		}
	}
}

// uniqID is a pod ID no other test process on the host uses at once.
func uniqID(name string) string { return fmt.Sprintf("%s-%d", name, os.Getpid()) }

// TestContainerVolumes runs an agent with the container runtime and
// volume roots: a pod reads its input from a read-only host path and
// writes its result below a writable root, through a scratch volume its
// two containers share; a pod that writes past its scratch fails with
// api.ReasonScratchFull while a neighbour writing within its own
// succeeds; every refused host path fails its task with
// api.ReasonVolumeDenied, naming the path, without reaching the runtime.
func TestContainerVolumes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the container runtime creates namespaces, cgroups and mounts")
	}
	rootfs := payloadRootfs(t)
	roots, top := volumeRoots(t)
	dir := t.TempDir()
	rt := newContainerRuntime(t, rootfs, dir, "")
	crt := newCounting(rt)

	payload := func(name string, args ...string) api.ContainerSpec {
		return api.ContainerSpec{Name: name, Image: api.Image{Rootfs: rootfs}, Command: append([]string{"/payload"}, args...),
			Resources: api.Resources{CPU: 100, Memory: 32 << 20}}
	}
	scratch := func(size int64) api.Volume {
		return api.Volume{Name: "work", Scratch: &api.ScratchVolume{Size: size}}
	}
	work := api.Mount{Volume: "work", Path: "/work"}
	io := nodelet.DesiredPod{ID: uniqID("vol-io"), Generation: 1, Tier: cgroup.Offline, Pod: &api.PodSpec{
		Volumes: []api.Volume{
			{Name: "in", HostPath: &api.HostPathVolume{Path: top + "/data/in", ReadOnly: true}},
			{Name: "out", HostPath: &api.HostPathVolume{Path: top + "/out"}},
			scratch(4 << 20),
		},
		Containers: []api.ContainerSpec{
			payload("main", "waitfile", "/work/copy", "the input", "write", "/out/result.txt", "done", "exit", "0"),
			payload("copier", "cat", "/in/input.txt", "write", "/work/copy", "the input", "exit", "0"),
		},
	}}
	io.Pod.Containers[0].Mounts = []api.Mount{work, {Volume: "out", Path: "/out"}}
	io.Pod.Containers[1].Mounts = []api.Mount{work, {Volume: "in", Path: "/in"}}
	full := nodelet.DesiredPod{ID: uniqID("vol-full"), Generation: 1, Tier: cgroup.Offline, Pod: &api.PodSpec{
		Volumes:    []api.Volume{scratch(2 << 20)},
		Containers: []api.ContainerSpec{payload("main", "fill", "/work/big", fmt.Sprint(4<<20), "exit", "0")},
	}}
	full.Pod.Containers[0].Mounts = []api.Mount{work}
	neighbour := nodelet.DesiredPod{ID: uniqID("vol-neighbour"), Generation: 1, Tier: cgroup.Offline, Pod: &api.PodSpec{
		Volumes:    []api.Volume{scratch(2 << 20)},
		Containers: []api.ContainerSpec{payload("main", "fill", "/work/small", fmt.Sprint(1<<20), "exit", "0")},
	}}
	neighbour.Pod.Containers[0].Mounts = []api.Mount{work}
	target := []nodelet.DesiredPod{io, full, neighbour}
	cases := deniedVolumeCases(top)
	for i := range cases {
		cases[i].id = uniqID("vol-" + cases[i].id)
		target = append(target, withHostPath(nodelet.DesiredPod{ID: cases[i].id, Generation: 1, Tier: cgroup.Offline,
			Pod: &api.PodSpec{Containers: []api.ContainerSpec{payload("main", "exit", "0")}}}, cases[i].path, cases[i].ro))
	}

	d := newFakeDispatcher()
	d.setTarget(1, target...)
	a := runContainerAgent(t, crt, d, func(c *nodelet.Config) { c.VolumeRoots = roots })
	eventually(t, 30*time.Second, "every pod ended", func() bool {
		n := len(d.find(io.ID, api.TaskSucceeded)) + len(d.find(neighbour.ID, api.TaskSucceeded)) + len(d.find(full.ID, api.TaskFailed))
		for _, c := range cases {
			n += len(d.find(c.id, api.TaskFailed))
		}
		return n == 3+len(cases)
	})
	if b, err := os.ReadFile(filepath.Join(top, "out", "result.txt")); err != nil || string(b) != "done" {
		t.Errorf("result on the host: %q, %v", b, err)
	}
	r := d.find(full.ID, api.TaskFailed)[0]
	if r.Reason != api.ReasonScratchFull || r.ExitCode != 99 ||
		!strings.Contains(r.Message, `scratch volume "work" (2097152 bytes) full`) {
		t.Errorf("full pod: %+v, want %s naming the volume", r, api.ReasonScratchFull)
	}
	for _, c := range cases {
		r := d.find(c.id, api.TaskFailed)[0]
		if r.Reason != api.ReasonVolumeDenied || !strings.Contains(r.Message, c.path) || !strings.Contains(r.Message, c.want) {
			t.Errorf("%s: failure %+v, want %s naming %s and saying %q", c.id, r, api.ReasonVolumeDenied, c.path, c.want)
		}
		if n := crt.startCounts()[c.id+"/1"]; n != 0 {
			t.Errorf("%s: the runtime was asked to start it %d times", c.id, n)
		}
	}
	d.setTarget(2)
	eventually(t, 30*time.Second, "every pod removed with its scratch images", func() bool {
		imgs, _ := filepath.Glob(filepath.Join(dir, ".scratch", "*", "*"))
		return len(listed(t, rt)) == 0 && a.Stats().Removed == 3 && len(imgs) == 0
	})
}
