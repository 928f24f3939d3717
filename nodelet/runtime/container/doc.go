// Package container is the nodelet's real runtime: a runtime.Runtime that
// runs each pod as a sandbox plus one libcontainer container per
// container, on cgroup v1 or v2.
//
// # Pods
//
// A pod's sandbox is this binary re-executed as a pause process (see
// Reexec) in new network (but see Network), IPC and UTS namespaces; it sets the hostname to
// the pod ID, brings up lo and sleeps, all in a C constructor that runs
// before (and instead of) the Go runtime, so a sandbox costs an exec and a
// few system calls. Each container joins those
// namespaces through /proc/<sandbox>/ns/... and has its own mount and PID
// namespaces and root filesystem, so the containers of a pod talk over
// loopback.
//
// A pod with SharePID has one PID namespace for all its containers, as
// Kubernetes' shareProcessNamespace: the sandbox is started in a new PID
// namespace too, whose PID 1 it is, and each container joins it, so the
// containers see (and, with the same user and capabilities, may signal or
// read /proc/PID/root of) each other's processes. The sandbox holds the
// namespace, so it outlives any one container, and as PID 1 it reaps the
// orphans the kernel gives it; the kernel drops the signals the
// containers send it, as it has no handler for them. A container's first process is then not
// PID 1: it has the default signal actions. When it ends, the processes
// it left are killed through its cgroup (the other containers' are not),
// and a SIGKILL from Stop goes to its whole cgroup; when the pod ends,
// killing the sandbox ends whatever is left in the namespace. A pod
// inside a capbox has no sandbox of its own, and SharePID is refused for
// it as a bad spec.
//
// Cgroups: the pod's is CgroupParent/ID in every hierarchy, with
// the sandbox in CgroupParent/ID/_sandbox and each container in
// CgroupParent/ID/NAME, where its CPU quota (MilliCPU*100µs per 100ms),
// CPU shares, memory limit and pids limit apply.
//
// Containers are created through sluice-shim (package shim) when it is
// installed beside the binary (Config.Shim): libcontainer's init
// re-executes the binary that creates a container, and the shim is a
// small one. Without it, containers are created in this process, and each
// init boots the whole binary. The shim is the parent of the containers'
// inits and reports their exits; the Runtime's process is a subreaper, so
// if the shim dies the inits are left to it and it reaps them, and the
// next start runs a new shim.
//
// On cgroup v1 the cpuset directory of each cgroup parent gets
// cgroup.clone_children, so that the kernel gives each new pod and
// container cgroup its parent's CPUs and memory nodes; otherwise
// libcontainer writes them, and every write rebuilds the scheduling
// domains.
//
// Start overlaps what does not depend on each other: the containers of a
// pod are created in parallel, each up to its init process waiting to exec
// the program, while the pause process sets up the namespaces they joined
// and is moved into its cgroup; the programs run only once the sandbox
// reported ready.
//
// # Capboxes
//
// A capbox's placeholder (runtime.PodSpec.Placeholder) is a sandbox and
// no container: it lives until its sandbox ends (Stop signals the
// sandbox), and its pod cgroup CgroupParent/ID carries the capbox's CPU
// quota and shares and memory limit. A pod started inside it
// (runtime.PodSpec.InPod) has no sandbox of its own: its containers join
// the placeholder's namespaces, so the tasks of one capbox talk over its
// loopback, and its cgroup is a child of the placeholder's
// (PARENT/CAPBOX/ID), so together they hold no more than the capbox.
//
// Containers get secure defaults: no_new_privs; a capability set that is
// Docker's default without MKNOD, NET_RAW, SETFCAP, SYS_CHROOT and
// AUDIT_WRITE; runc's masked and read-only /proc and /sys paths; a device
// allow-list; a pids limit; optionally a read-only root filesystem (with a
// tmpfs /tmp) and a numeric user. A container's first process is PID 1 of
// its namespace (unless the pod shares one), so it has no default signal
// actions: a program that does
// not handle SIGTERM is killed by Stop's SIGKILL after the grace period.
//
// A pod's ResourceDir (runtime.PodSpec) is bind-mounted read-only (and
// nosuid, nodev, noexec) at runtime.ResourceMount in each of its
// containers: the directory, not the resource file in it, since the
// overcommit loop replaces the file by a rename, which gives it a new
// inode that a bind mount of the old file would never show. The
// directory is the caller's: Remove leaves it. An image without /run gets
// the mount point made in it, as for any mount.
//
// # Volumes
//
// Each volume of a pod (runtime.PodSpec.Volumes) is mounted once on the
// host, at volumes/NAME in the pod's state directory, before the
// containers are created; each mount of a container
// (runtime.ContainerSpec.Mounts) binds it from there, nosuid and nodev,
// read-only when the volume or the mount says so.
//
// A scratch volume is an ext4 filesystem on a loop device over an image
// file, Config.ScratchDir/<pod ID>/NAME.img, of the volume's size
// (at least MinScratchSize), allocated in full with fallocate. Of the
// three ways to bound a directory's size, this one was chosen because a
// scratch volume's size is the pod's disk demand, which placement counts
// against the disk the node advertises: a tmpfs would hold the data in
// memory, charged to the pod's memory limit and the node's memory, not its
// disk; a project quota needs the state directory's filesystem mounted
// with quotas (prjquota on ext4 and XFS), which a node cannot assume. A
// loop-mounted image needs only loop devices and mkfs.ext4, bounds the
// pod's writes exactly (a write past the size fails with ENOSPC inside the
// pod's own filesystem, and no other pod's or the host's files are
// touched), and, allocated in full, cannot meet a full host disk later.
// The filesystem's own metadata takes 2 to 4% of it. The image is made
// without a journal (a scratch volume does not outlive its pod or a host
// crash), with no blocks reserved for root and with lazily initialised
// inode tables; making it (fallocate, mkfs.ext4, the loop device, the
// mount) adds about 20 ms to a pod's start (BenchmarkPodStartScratch). A
// filesystem that cannot allocate ahead gets a sparse image. The loop
// device is attached with autoclear and direct I/O: it goes when the
// filesystem is unmounted, and the image's pages are not cached twice. When the pod ends, the Exit names each
// scratch volume found full, so that a failure can be put down to it: one
// with under 1/64 of it or 1 MiB free (whichever is less) or no inode
// free; or, when the pod failed, one whose mount path a container named in
// a "no space left on device" line of the end of its output, since ext4
// refuses a write larger than what is free before writing any of it and
// leaves the filesystem as empty as it was. A program that frees its
// scratch after a failed write and says nothing of it is not caught.
// Remove unmounts the volumes (lazily, so the loop device goes as soon as
// no process holds the filesystem) and removes the images; New removes
// the images of pods its state directory no longer has (after a reboot,
// which took the mounts).
//
// A host path volume is a bind mount of the host path, which the caller
// (the nodelet) checked against its volume roots
// (runtime.ResolveHostPath): the runtime opens it from Volume.HostRoot
// with filepath-securejoin's OpenInRoot (openat2 with RESOLVE_IN_ROOT
// where the kernel has it), which resolves every component, symbolic
// links included, without leaving the root, and mounts that handle
// (through /proc/self/fd). The guarantee: what a container sees is a
// directory or file below the root at the time of the mount, even if a
// component of the path was swapped for a link after the check; a path
// that no longer opens within the root fails the start with
// runtime.ErrVolumeDenied. The bind is not recursive: mounts below the
// host path are not shown. What is not guaranteed: a host process that can
// write below a root can still move the mounted directory elsewhere after
// the mount, as with any bind mount.
//
// # State
//
// Config.StateDir holds a directory per pod: pod.json (the spec), the
// sandbox's PID and start time, "started" once Start completed, the
// libcontainer state of each container, the overlay of each container of
// an OCI image (rootfs/NAME), the mount point of each volume
// (volumes/NAME), exit-NAME.json as each container ends, exit.json when the pod has ended, and logs/NAME.log (stdout and
// stderr of a container, append-only, capped by rotating to NAME.log.1).
// Pods do not depend on the Runtime: containers and sandboxes are watched
// through pidfds, so a Runtime that closes, or a nodelet that restarts,
// leaves them running, and New adopts them. Exit statuses are known to
// the parent process only (this one, or its shim, which reports them); a
// container that ended while no Runtime of
// the same process watched it is reported with runtime.ErrExitUnknown.
//
// # Invariants
//
//   - Start leaves a running pod or nothing (no state directory, cgroup or
//     process): every failure runs the same cleanup as Remove.
//   - Processes are signalled only through pidfds, or after checking their
//     start time, so a reused PID is never signalled.
//   - Every goroutine (one per running container, and the log janitor)
//     ends when its container does or when Close is called.
//   - Remove deletes the state directory, the logs and the pod's cgroup in
//     every hierarchy, and unmounts the pod's volumes and deletes its
//     scratch images.
//   - A process that creates containers keeps its main thread out of
//     their mount namespaces (package shim), so that no mount of a
//     removed pod is kept alive in it.
//
// # Usage
//
//	func main() {
//		container.Reexec() // first: the binary is also init and pause
//		rt, err := container.New(container.Config{})
//		...
//	}
//
// # Images
//
// An image is a root filesystem directory (api.Image.Rootfs), used as is,
// or an OCI image layout (api.Image.OCILayout and Ref, a tag or digest):
// its manifest is resolved (through nested indexes by platform), and its
// layers (tar, tar+gzip, tar+zstd), digest-verified as they are read, are
// unpacked with their whiteouts, without following symlinks out of the
// root, once per manifest digest into Config.ImageDir. Each container of
// an OCI image gets an overlay mount of it whose writes land in the pod's
// state directory, so the cache is never written after unpacking.
//
// Both kinds of path must lie below one of Config.ImageRoots, as the spec
// names them and after symbolic links (runtime.ConfineImage), and the
// runtime uses the resolved path; a pod naming another is refused before
// anything of it is made, with an error that is both runtime.ErrBadSpec
// and runtime.ErrImageDenied. Whatever the roots, no container's root is
// ever the host's root directory: createContainer checks the final root
// (the image, or its overlay) against "/" by device and inode.
//
// # Network
//
// A pod's network mode (runtime.PodSpec.Network) decides its sandbox's
// network namespace:
//
//   - none (and empty): a namespace of its own with only lo, up;
//   - host: the host's (the pause process is started without
//     CLONE_NEWNET, so the containers joining its namespaces join the
//     host's network);
//   - bridge: a namespace of its own attached to the node's pod network
//     (Config.Network, package cni): Start pins the namespace and runs
//     the plugins' ADD on it in the background beside the creation of the
//     containers, mapping the pod's Ports (hostPort = containerPort) with
//     portmap; the programs run only once both the sandbox and the attach
//     have succeeded, and a failed attach fails the start like any other
//     step, leaving nothing. Cleanup (Remove, a failed start, a pod that
//     cannot be adopted) runs DEL and unpins the namespace after the
//     sandbox is gone, so DEL finds the pod's interface even when its
//     processes died long before. New detaches pinned namespaces of pods
//     whose state directory is gone. network.json records the pod's
//     address (PodIP).
//
// A pod inside a capbox shares the capbox's network namespace, and so its
// network, whatever its own mode; it maps no ports of its own (a spec that
// asks is refused).
//
// Not yet supported: SharePID inside a capbox (rejected as a bad spec),
// ports of a pod inside a capbox, seccomp, pod-level cgroup limits (but a
// capbox's), garbage collection of the image cache.
package container
