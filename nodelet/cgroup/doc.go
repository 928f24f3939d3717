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
