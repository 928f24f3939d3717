// Package cgroup owns the nodelet's cgroup tree: a root (default /sluice)
// with two tiers, online and offline, and one cgroup per pod under its tier:
//
//	<root>/online/<podID>
//	<root>/offline/<podID>
//
// It is built on github.com/containerd/cgroups/v3 (cgroup1 and cgroup2).
// The mode is detected once, in New: a unified v2 host uses cgroup2; a
// legacy host uses cgroup1; a hybrid host (v1 controllers plus a cgroup2
// mount) uses cgroup1 when the cpu and memory controllers are mounted as v1
// hierarchies, which is the normal hybrid layout, and cgroup2 only when they
// are not.
//
// Invariants:
//   - Every path the package touches lies under the configured root; pod IDs
//     are single path elements (no "/", not "." or "..").
//   - The package never deletes a cgroup that still holds processes: Delete
//     fails, naming the path and controller, and leaves it in place.
//   - Delete removes the group and its descendants from every mounted v1
//     hierarchy (not only the controllers this package writes), because the
//     container runtime may have created the pod cgroup in all of them.
//   - A missing cgroup is reported as ErrNotFound (wrapped in *Error); every
//     other failure is an *Error carrying the operation, path and controller.
//   - Zero fields of Limits mean "leave unchanged"; -1 means "unlimited".
//   - PodUsage keeps each pod's three usage files open between readings
//     (opening a cgroup file costs twice what reading it does). The files of
//     a pod are closed when a round ends without it (EndUsageRound), when
//     the Manager removes it (DeletePod, Delete), and by Close; a pod's
//     files are never held for more than one round after it is gone.
//
// On cgroup2 the package goes through the cgroup2 package's Manager
// (Load, RootControllers, ToggleControllers, Update, StatFiltered,
// AddProc, Procs). It writes or reads by hand only what that
// package cannot:
//   - cpu.idle, set and read: the library has no field for it. It is
//     cleared before and set after the library's writes, and a weight for
//     a group that stays idle is not written: the kernel refuses it
//     (EINVAL), in v1 as in v2 (Limits.CPUIdle).
//   - memory.max "max" (MemoryLimit -1): the library's Memory.Max is a
//     number written in decimal, and the kernel refuses "-1".
//   - io.weight: the library writes only io.bfq.weight; a kernel whose
//     disks are not under BFQ offers io.weight instead.
//   - cpu.weight's value: computed with runc's linear formula, not the
//     library's ConvertCPUSharesToCgroupV2Value, which maps 1024 shares to
//     weight 100 but changes the ratio between two groups (the tiers'
//     8192:128 shares become 531:21 rather than 313:5), so the tiers would
//     split the CPU differently under v1 and v2.
//   - reading limits back (cpu.max, cpu.weight, memory.max, pids.max, the
//     I/O weight): the library reads statistics, not settings. cpu.max is
//     also read when a limit sets only its quota or only its period.
//   - the pods of a tier: the library has no listing of child groups.
//   - creating a group: os.MkdirAll, then ToggleControllers, then Update,
//     rather than NewManager, which removes the directory when a write
//     fails and so could remove a pod cgroup the container runtime had
//     already made at the same path.
//   - deleting a tree: the library's Delete removes one group, and lists
//     its processes with an lstat of every file in it (three times the
//     cost of a pod's create and delete; see v2.remove). The package
//     walks the tree, refuses it whole if cgroup.events says a process is
//     in it, and removes the directories deepest first, retrying on EBUSY
//     as Delete does.
//
// The usage reads of the overcommit loop (PodUsage, TierUsage) read their
// three files directly in both versions: see Usage.
//
// The container runtime creates pod cgroups itself (through libcontainer) at
// the same paths; this package can create and delete them too, for tests and
// for pods run without a container.
//
// Usage:
//
//	m, err := cgroup.New(cgroup.Config{Root: "/sluice"})
//	if err != nil { ... }
//	err = m.EnsureTiers(cgroup.Limits{CPUShares: 8192}, cgroup.Limits{CPUShares: 2, CPUQuotaUS: 50000})
//	err = m.CreatePod(cgroup.Offline, "pod-1", cgroup.Limits{MemoryLimit: 1 << 30, PidsMax: 512})
//	err = m.AddProc(cgroup.Offline, "pod-1", pid)
//	s, err := m.PodSample(cgroup.Offline, "pod-1")
//	err = m.DeletePod(cgroup.Offline, "pod-1")
package cgroup
