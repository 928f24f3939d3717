package nodelet_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet"
	"github.com/sluicehq/sluice/nodelet/cgroup"
	"github.com/sluicehq/sluice/nodelet/overcommit"
	"github.com/sluicehq/sluice/nodelet/runtime/sim"
)

// TestResourceFiles: an offline pod starts with its resource directory in
// its spec, holding a file that says its requests, and is listed to the
// overcommit loop with that file; an online pod has none; the directory
// goes with the pod.
func TestResourceFiles(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	d := newFakeDispatcher()
	root := filepath.Join(t.TempDir(), "resources")
	h := newHarness(t, host, d, func(c *nodelet.Config) { c.ResourceDir = root })
	on := simPod("on", 1, 0, 0)
	on.Tier = cgroup.Online
	off := simPod("off", 1, 0, 0)
	off.Pod.Containers = append(off.Pod.Containers, api.ContainerSpec{Name: "c1", Image: api.Image{Rootfs: "/sim"},
		Command: []string{"/bin/side"}, Resources: api.Resources{CPU: 50, Memory: 16 << 20}})
	d.setTarget(1, on, off)
	eventually(t, 5*time.Second, "two pods listed", func() bool { return len(h.agent.Pods()) == 2 })
	dir := filepath.Join(root, "off")
	file := filepath.Join(dir, nodelet.ResourceFile)
	pods := h.agent.Pods()
	if pods[0].ID != "off" || pods[0].ResourceFile != file || pods[1].ID != "on" || pods[1].ResourceFile != "" {
		t.Errorf("Pods() = %+v; want off's resource file %s, none for on", pods, file)
	}
	rt := sim.New(host)
	if got, _ := rt.Spec("off"); got.ResourceDir != dir {
		t.Errorf("off started with ResourceDir %q, want %q", got.ResourceDir, dir)
	}
	if got, err := rt.Spec("on"); err != nil || got.ResourceDir != "" {
		t.Errorf("on started with ResourceDir %q (%v), want none", got.ResourceDir, err)
	}
	raw, err := os.ReadFile(file)
	var pr overcommit.PodResources
	if err != nil || json.Unmarshal(raw, &pr) != nil {
		t.Fatalf("resource file %s: %q, %v", file, raw, err)
	}
	req := overcommit.Resources{CPUMillis: 150, MemoryBytes: 80 << 20}
	if pr != (overcommit.PodResources{ID: "off", Guaranteed: req, Limit: req}) {
		t.Errorf("initial resource file = %+v, want the requests %+v", pr, req)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("resource directory: %v, %v; want mode 0755", st, err)
	}
	if _, err := os.Stat(filepath.Join(root, "on")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("online pod has a resource directory: %v", err)
	}
	d.setTarget(2, on)
	eventually(t, 5*time.Second, "off removed and its directory with it", func() bool {
		_, err := os.Stat(dir)
		return len(h.agent.Pods()) == 1 && errors.Is(err, os.ErrNotExist)
	})
}

// TestResourceFileStartFailure: a pod whose resource file cannot be made
// fails to start, reported so, and is not started.
func TestResourceFileStartFailure(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	d := newFakeDispatcher()
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, host, d, func(c *nodelet.Config) { c.ResourceDir = blocker })
	d.setTarget(1, simPod("off", 1, 0, 0))
	eventually(t, 5*time.Second, "start failure reported", func() bool { return len(d.find("off", api.TaskFailed)) == 1 })
	if r := d.find("off", api.TaskFailed)[0]; r.Reason != api.ReasonStartFailed || !strings.Contains(r.Message, "resource file") {
		t.Errorf("report %+v, want a start failure naming the resource file", r)
	}
	if n := h.rt.startCounts()["off/1"]; n != 0 {
		t.Errorf("started %d times, want 0", n)
	}
}

func TestResourceDirValidate(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	_, err := nodelet.New(nodelet.Config{Node: "n", Runtime: sim.New(host), Dispatcher: newFakeDispatcher(), ResourceDir: "rel/dir"})
	if err == nil || !strings.Contains(err.Error(), "ResourceDir") {
		t.Errorf("New = %v, want a ResourceDir problem", err)
	}
}
