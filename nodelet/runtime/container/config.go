package container

import (
	"path"
	"slices"

	"github.com/opencontainers/cgroups"
	devconfig "github.com/opencontainers/cgroups/devices/config"
	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/opencontainers/runc/libcontainer/specconv"
	"golang.org/x/sys/unix"

	// The device-rule code of the cgroup managers registers itself here;
	// without it containers with device rules fail to start.
	_ "github.com/opencontainers/cgroups/devices"

	"github.com/sluicehq/sluice/nodelet/runtime"
)

// capabilities is the bounding, permitted and effective set of every
// container: Docker's default set without CAP_MKNOD, CAP_NET_RAW,
// CAP_SETFCAP, CAP_SYS_CHROOT and CAP_AUDIT_WRITE, which batch work does
// not need.
var capabilities = []string{
	"CAP_CHOWN",
	"CAP_DAC_OVERRIDE",
	"CAP_FOWNER",
	"CAP_FSETID",
	"CAP_KILL",
	"CAP_NET_BIND_SERVICE",
	"CAP_SETGID",
	"CAP_SETPCAP",
	"CAP_SETUID",
}

// maskedPaths are hidden from containers (as runc's defaults).
var maskedPaths = []string{
	"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys",
	"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
	"/proc/sched_debug", "/proc/scsi", "/sys/firmware",
	"/sys/devices/virtual/powercap",
}

// readonlyPaths are mounted read-only in containers.
var readonlyPaths = []string{
	"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
}

const (
	cpuPeriod = 100_000 // µs: CFS quota is MilliCPU*100 per period
	// minMemory is the smallest memory limit a container can start with.
	minMemory = 4 << 20
)

// cgroupPath is the cgroup (relative to each hierarchy's root) of pod id
// under parent, or of one of its members when member is not empty.
func cgroupPath(parent, id, member string) string {
	return path.Join("/", parent, id, member)
}

// containerConfig builds the libcontainer config of container c of a pod
// whose sandbox process is sandboxPid. The container joins the sandbox's
// network, IPC and UTS namespaces, and its PID namespace when the pod
// shares one; otherwise it has a PID namespace of its own.
func containerConfig(spec *runtime.PodSpec, parent string, c *runtime.ContainerSpec, rootfs, podDir string, sandboxPid int, defaultPids int64) *configs.Config {
	const mountFlags = unix.MS_NOEXEC | unix.MS_NOSUID | unix.MS_NODEV
	ns := func(kind string) string { return "/proc/" + itoa(sandboxPid) + "/ns/" + kind }
	rules := []*devconfig.Rule{{Type: devconfig.WildcardDevice, Major: devconfig.Wildcard, Minor: devconfig.Wildcard, Permissions: "rwm", Allow: false}}
	for _, d := range specconv.AllowedDevices {
		rules = append(rules, &d.Rule)
	}
	res := &cgroups.Resources{Devices: rules}
	r := c.Resources
	limitCPUMemory(res, r)
	pids := r.Pids
	if pids == 0 {
		pids = defaultPids
	}
	res.PidsLimit = &pids
	caps := &configs.Capabilities{Bounding: capabilities, Permitted: capabilities, Effective: capabilities}
	pidns := configs.Namespace{Type: configs.NEWPID}
	if spec.SharePID {
		pidns.Path = ns("pid")
	}
	mounts := []*configs.Mount{
		{Source: "proc", Destination: "/proc", Device: "proc", Flags: mountFlags},
		{Source: "tmpfs", Destination: "/dev", Device: "tmpfs", Flags: unix.MS_NOSUID | unix.MS_STRICTATIME, Data: "mode=755,size=65536k"},
		{Source: "devpts", Destination: "/dev/pts", Device: "devpts", Flags: unix.MS_NOSUID | unix.MS_NOEXEC, Data: "newinstance,ptmxmode=0666,mode=0620,gid=5"},
		{Source: "shm", Destination: "/dev/shm", Device: "tmpfs", Flags: mountFlags, Data: "mode=1777,size=65536k"},
		{Source: "sysfs", Destination: "/sys", Device: "sysfs", Flags: mountFlags | unix.MS_RDONLY},
		{Source: "tmpfs", Destination: "/tmp", Device: "tmpfs", Flags: unix.MS_NOSUID | unix.MS_NODEV, Data: "mode=1777"},
	}
	if spec.ResourceDir != "" {
		// A bind of the directory, not of the file in it: the file is
		// replaced by renames, which a bind of the file would not see.
		mounts = append(mounts, &configs.Mount{Source: spec.ResourceDir, Destination: runtime.ResourceMount, Device: "bind",
			Flags: unix.MS_BIND | unix.MS_RDONLY | mountFlags})
	}
	for _, m := range c.Mounts {
		i := slices.IndexFunc(spec.Volumes, func(v runtime.Volume) bool { return v.Name == m.Volume })
		flags := unix.MS_BIND | unix.MS_NOSUID | unix.MS_NODEV
		if spec.Volumes[i].ReadOnly || m.ReadOnly {
			flags |= unix.MS_RDONLY
		}
		// From the volume's mount point in the pod's directory, where
		// the runtime made the scratch filesystem or bound the host path.
		mounts = append(mounts, &configs.Mount{Source: volumeDir(podDir, m.Volume), Destination: m.Path, Device: "bind", Flags: flags})
	}
	return &configs.Config{
		Rootfs:          rootfs,
		Readonlyfs:      c.ReadOnlyRootfs,
		NoNewPrivileges: true,
		Capabilities:    caps,
		Namespaces: configs.Namespaces{
			{Type: configs.NEWNS},
			pidns,
			{Type: configs.NEWNET, Path: ns("net")},
			{Type: configs.NEWIPC, Path: ns("ipc")},
			{Type: configs.NEWUTS, Path: ns("uts")},
		},
		Cgroups: &cgroups.Cgroup{
			Path:      cgroupPath(parent, spec.ID, c.Name),
			Resources: res,
		},
		Devices:       specconv.AllowedDevices,
		MaskPaths:     maskedPaths,
		ReadonlyPaths: readonlyPaths,
		Mounts:        mounts,
	}
}

// limitCPUMemory sets res's CPU quota and shares and its memory limit from
// r's, where r sets them.
func limitCPUMemory(res *cgroups.Resources, r runtime.Resources) {
	if r.MilliCPU > 0 {
		res.CpuPeriod = cpuPeriod
		res.CpuQuota = r.MilliCPU * cpuPeriod / 1000
		res.CpuShares = uint64(max(2, r.MilliCPU*1024/1000))
	}
	if r.MemoryBytes > 0 {
		res.Memory = r.MemoryBytes
	}
}
