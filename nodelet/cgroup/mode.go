package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/cgroups/v3"
	"golang.org/x/sys/unix"
)

// DetectMode reports which cgroup version New would use on this host for
// cgroups mounted at mountpoint ("" means /sys/fs/cgroup).
func DetectMode(mountpoint string) (Mode, error) {
	m, _, err := detect(mountpoint)
	return m, err
}

// detect returns the mode and, for v2, the unified mount point.
func detect(mountpoint string) (Mode, string, error) {
	if mountpoint == "" {
		mountpoint = defaultMountpoint
	}
	layout := hostLayout(mountpoint)
	v1 := fileExists(filepath.Join(mountpoint, "cpu", "cpu.shares")) &&
		fileExists(filepath.Join(mountpoint, "memory", "memory.limit_in_bytes"))
	unified := mountpoint
	if layout == cgroups.Hybrid {
		unified = filepath.Join(mountpoint, "unified")
	}
	var ctl []string
	if b, err := os.ReadFile(filepath.Join(unified, "cgroup.controllers")); err == nil {
		ctl = strings.Fields(string(b))
	}
	m, err := chooseMode(layout, v1, ctl)
	if err != nil {
		return 0, "", fmt.Errorf("cgroup: detect mode at %s: %w", mountpoint, err)
	}
	return m, unified, nil
}

// hostLayout classifies the mounts at mountpoint. For the default mount
// point it asks containerd/cgroups; for others (tests, chroots) it runs the
// same statfs checks itself.
func hostLayout(mountpoint string) cgroups.CGMode {
	if mountpoint == defaultMountpoint {
		return cgroups.Mode()
	}
	var st unix.Statfs_t
	if err := unix.Statfs(mountpoint, &st); err != nil {
		return cgroups.Unavailable
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return cgroups.Unified
	}
	if err := unix.Statfs(filepath.Join(mountpoint, "unified"), &st); err == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		return cgroups.Hybrid
	}
	return cgroups.Legacy
}

// chooseMode decides the version from the mount layout, whether v1 cpu and
// memory hierarchies exist, and the controllers the unified hierarchy
// offers. A hybrid host uses v1 whenever cpu and memory are v1 hierarchies
// (then they cannot be enabled in v2 anyway).
func chooseMode(layout cgroups.CGMode, v1CPUMemory bool, unifiedControllers []string) (Mode, error) {
	has := func(name string) bool {
		for _, c := range unifiedControllers {
			if c == name {
				return true
			}
		}
		return false
	}
	v2CPUMemory := has("cpu") && has("memory")
	switch layout {
	case cgroups.Unified:
		if !v2CPUMemory {
			return 0, fmt.Errorf("unified hierarchy lacks the cpu or memory controller (have %v)", unifiedControllers)
		}
		return ModeV2, nil
	case cgroups.Legacy:
		if !v1CPUMemory {
			return 0, fmt.Errorf("no v1 cpu and memory hierarchies")
		}
		return ModeV1, nil
	case cgroups.Hybrid:
		if v1CPUMemory {
			return ModeV1, nil
		}
		if v2CPUMemory {
			return ModeV2, nil
		}
		return 0, fmt.Errorf("hybrid host with cpu and memory in neither v1 nor v2")
	}
	return 0, fmt.Errorf("no cgroup file system mounted")
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func isHybrid(mountpoint string) bool { return hostLayout(mountpoint) == cgroups.Hybrid }
