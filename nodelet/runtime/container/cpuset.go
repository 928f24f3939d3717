package container

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/opencontainers/cgroups"
)

// cpusetParents makes the cgroup v1 cpuset directories of pod parents
// hand their CPUs and memory nodes to new children by themselves.
//
// A new cpuset cgroup starts with no CPUs, and libcontainer fills each one
// it creates (the pod's, the sandbox's, each container's) by writing its
// parent's cpuset.cpus and cpuset.mems into it. Every such write makes the
// kernel rebuild the scheduling domains: nearly a fifth of the nodelet's
// own CPU time when pods start back to back. A parent whose
// cgroup.clone_children is 1 has the kernel copy both into each child at
// mkdir instead, passing the flag on, so libcontainer finds them set and
// writes nothing. prepare sets the flag on a parent and its ancestors once
// per parent (the directories are shared by all pods under them); on
// cgroup v2, or without a cpuset hierarchy, it does nothing. It only
// saves work: a parent it could not prepare is reported and tried once.
type cpusetParents struct {
	mu   sync.Mutex
	root string // the cpuset hierarchy's mount point; "" when none
	done map[string]bool
}

func newCpusetParents() *cpusetParents {
	c := &cpusetParents{done: make(map[string]bool)}
	if !cgroups.IsCgroup2UnifiedMode() {
		if mnt, err := cgroups.FindCgroupMountpoint("", "cpuset"); err == nil {
			c.root = mnt
		}
	}
	return c
}

// prepare makes parent (a cgroup path from the hierarchy's root, such as
// "sluice/offline") and every directory above it in the cpuset hierarchy
// exist with CPUs, memory nodes and clone_children set.
func (c *cpusetParents) prepare(parent string) error {
	if c.root == "" {
		return nil
	}
	parent = strings.Trim(filepath.Clean("/"+parent), "/")
	c.mu.Lock()
	defer c.mu.Unlock()
	if parent == "" || c.done[parent] {
		return nil
	}
	c.done[parent] = true
	dir := c.root
	for _, name := range strings.Split(parent, "/") {
		up := dir
		dir = filepath.Join(dir, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("cpuset cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if err := inherit(up, dir, f); err != nil {
				return fmt.Errorf("cpuset cgroup %s: %w", dir, err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.clone_children"), []byte("1"), 0); err != nil {
			return fmt.Errorf("cpuset cgroup %s: %w", dir, err)
		}
	}
	return nil
}

// inherit copies file from cgroup directory up into dir when dir's is
// empty (a cpuset cgroup made without clone_children).
func inherit(up, dir, file string) error {
	cur, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(cur)) != "" {
		return nil
	}
	val, err := os.ReadFile(filepath.Join(up, file))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, file), val, 0)
}
