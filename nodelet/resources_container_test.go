package nodelet_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet"
	"github.com/sluicehq/sluice/nodelet/cgroup"
	"github.com/sluicehq/sluice/nodelet/overcommit"
	"github.com/sluicehq/sluice/nodelet/runtime"
)

// gatedCgroups is fakeCgroups whose pods have no cgroup (so the
// overcommit loop leaves them out, and writes no resource file) until
// open is set.
type gatedCgroups struct {
	*fakeCgroups
	open atomic.Bool
}

func (g *gatedCgroups) PodUsage(t cgroup.Tier, id string) (cgroup.Usage, error) {
	if !g.open.Load() {
		return cgroup.Usage{}, &cgroup.Error{Op: "stat", Path: id, Err: cgroup.ErrNotFound}
	}
	return g.fakeCgroups.PodUsage(t, id)
}

// TestContainerResourceFile: an offline pod's container reads its
// resource file at /run/sluice/resources.json, first as the requests, then
// as the overcommit loop rewrote it after the start.
func TestContainerResourceFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the container runtime creates namespaces and cgroups")
	}
	rootfs := payloadRootfs(t)
	rt := newContainerRuntime(t, rootfs, t.TempDir(), "")
	cg := &gatedCgroups{fakeCgroups: &fakeCgroups{mem: map[cgroup.Tier]uint64{cgroup.Offline: 8 << 20}}}
	d := newFakeDispatcher()
	resDir := filepath.Join(t.TempDir(), "resources")
	const file = runtime.ResourceMount + "/" + nodelet.ResourceFile
	pod := nodelet.DesiredPod{ID: "rf", Generation: 1, Tier: cgroup.Offline, Pod: &api.PodSpec{Containers: []api.ContainerSpec{{
		Name: "main", Image: api.Image{Rootfs: rootfs}, Command: []string{"/payload", "cat", file, "print", "first", "waitchange", file, "exit", "0"},
		Resources: api.Resources{CPU: 100, Memory: 32 << 20},
	}}}}
	d.setTarget(1, pod)
	oc := fakeOvercommit(t, cg.fakeCgroups)
	oc.Cgroups = cg
	t.Cleanup(func() { // after the agent's
		_ = rt.Stop(context.Background(), "rf", 0)
		_ = rt.Remove(context.Background(), "rf")
	})
	a := runContainerAgent(t, rt, d, func(c *nodelet.Config) { c.RetainExited, c.ResourceDir, c.Overcommit = time.Minute, resDir, oc })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logOf := func() string {
		rc, err := rt.Logs(ctx, "rf", "main", runtime.LogOptions{})
		if err != nil {
			return ""
		}
		defer rc.Close()
		out, _ := io.ReadAll(rc) // what was read before an error too
		return string(out)
	}
	eventually(t, 20*time.Second, "the container read its first resource file", func() bool { return strings.Contains(logOf(), "first\n") })
	req := overcommit.Resources{CPUMillis: 100, MemoryBytes: 32 << 20}
	first, _, _ := strings.Cut(logOf(), "first\n")
	var pr overcommit.PodResources
	if err := json.Unmarshal([]byte(first), &pr); err != nil || pr != (overcommit.PodResources{ID: "rf", Guaranteed: req, Limit: req}) {
		t.Errorf("first resource file %q (%v), want the requests %+v", first, err, req)
	}
	cg.open.Store(true) // the loop now sees the pod, and writes its file
	eventually(t, 20*time.Second, "the pod ended", func() bool { return len(d.find("rf", api.TaskSucceeded)) == 1 })
	_, changed, ok := strings.Cut(logOf(), "changed: ")
	var got overcommit.PodResources
	if !ok || json.Unmarshal([]byte(changed), &got) != nil || got.ID != "rf" || got == pr {
		t.Fatalf("log %q: want the loop's rewrite of the file read after the start", logOf())
	}
	if st := a.Overcommit().Stats(); st.FileWrites == 0 {
		t.Errorf("loop stats %+v: no file written", st)
	}
	t.Logf("resource file at the start %s, then %s", strings.TrimSpace(first), strings.TrimSpace(changed))
}
