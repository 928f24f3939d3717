package nodelet

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/nodelet/cgroup"
	"github.com/sluicehq/sluice/nodelet/overcommit"
	"github.com/sluicehq/sluice/nodelet/runtime"
)

// ResourceFile is the name of a pod's resource file in its directory
// under Config.ResourceDir; a container reads it at
// runtime.ResourceMount/ResourceFile.
const ResourceFile = "resources.json"

// resourceDir is the directory of d's resource file, "" when d has none:
// only offline pods with containers have one, and only with
// Config.ResourceDir set.
func (a *Agent) resourceDir(d *DesiredPod) string {
	if a.cfg.ResourceDir == "" || d.Tier != cgroup.Offline || d.Capbox {
		return ""
	}
	return filepath.Join(a.cfg.ResourceDir, d.ID)
}

// resourceFile is the path of d's resource file, "" when it has none
// (overcommit.Pod.ResourceFile).
func (a *Agent) resourceFile(d *DesiredPod) string {
	if dir := a.resourceDir(d); dir != "" {
		return filepath.Join(dir, ResourceFile)
	}
	return ""
}

// prepareResources gives spec the resource directory of d, with a
// resource file that says d's requests, guaranteed and as the limit,
// until the overcommit loop writes it: the file is there when the
// containers start. The directory and file are readable by every user
// (a container's may not be root). On failure it leaves nothing.
func (a *Agent) prepareResources(spec *runtime.PodSpec, d *DesiredPod) error {
	dir := a.resourceDir(d)
	spec.ResourceDir = dir
	if dir == "" {
		return nil
	}
	req := podRequest(d)
	err := os.MkdirAll(dir, 0o755)
	if err == nil {
		err = os.Chmod(dir, 0o755) // the umask may have taken bits
	}
	if err == nil {
		err = overcommit.WriteResourceFile(filepath.Join(dir, ResourceFile), overcommit.PodResources{ID: d.ID, Guaranteed: req, Limit: req})
	}
	if err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("resource file: %w", err)
	}
	return nil
}

// podRequest is what d's containers request together.
func podRequest(d *DesiredPod) overcommit.Resources {
	var req overcommit.Resources
	for _, c := range d.Pod.Containers {
		req.CPUMillis += c.Resources.CPU
		req.MemoryBytes += c.Resources.Memory
	}
	return req
}

// dropResources removes the resource directory of d, if it has one (by
// resourceDir's rule), once the pod is removed from the runtime or failed
// to start.
func (a *Agent) dropResources(d *DesiredPod) {
	dir := a.resourceDir(d)
	if dir == "" {
		return
	}
	if err := os.RemoveAll(dir); err != nil {
		a.cfg.Logger.Warn("nodelet: remove resource directory", "pod", d.ID, "err", err)
	}
}
