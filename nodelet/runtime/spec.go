package runtime

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/api"
)

// Limits a spec must respect.
const (
	// MaxIDLen is the longest pod ID.
	MaxIDLen = 64
)

// PodSpec is what a runtime runs: a pod's identity, where its cgroup goes,
// and its containers.
type PodSpec struct {
	// ID names the pod on its host: 1 to MaxIDLen letters, digits, '-',
	// '_' and '.', starting with a letter or digit.
	ID string
	// Generation distinguishes successive pods of one task; runtimes only
	// record it.
	Generation int64
	// CgroupParent is the cgroup, relative to each hierarchy's root, that
	// holds the pod's cgroup CgroupParent/ID, for example
	// "sluice/offline". Empty means the root.
	CgroupParent string
	// Containers run together; at least one. The first is the pod's main
	// container: its exit code is the pod's.
	Containers []ContainerSpec
	// SharePID puts the pod's containers in one PID namespace.
	SharePID bool
	// Placeholder makes the pod a capbox's placeholder: it runs no
	// program and holds the resources of its one container (which has no
	// image and no args) until it is stopped.
	Placeholder bool
	// InPod names the placeholder pod (a capbox) whose resources the pod
	// runs inside; empty for none.
	InPod string
	// ResourceDir is a host directory (absolute and clean) that every
	// container of the pod sees read-only at ResourceMount, with what the
	// node's overcommit loop keeps writing there about the pod; empty
	// means none. The directory is mounted rather than a file in it, so
	// that a file replaced by a rename is seen anew in the containers.
	// Runtimes without containers ignore it.
	ResourceDir string
	// Volumes are the pod's storage, which its containers mount
	// (ContainerSpec.Mounts). Runtimes without containers check them and
	// make nothing.
	Volumes []Volume
	// Env is added, as KEY=value, to the environment of every container
	// of the pod, after the container's own Env: the node's identity of
	// the pod (api.EnvTaskID and the others). Runtimes keep it with the
	// spec.
	Env []string
	// Network is the pod's network mode: NetworkBridge, NetworkHost or
	// NetworkNone. The nodelet resolves a task's mode (its default, its
	// permission for host) before a runtime sees it; a runtime takes
	// empty as NetworkNone, the mode that grants nothing. A pod inside a
	// capbox (InPod) shares the capbox's network whatever its own mode.
	Network string
	// Ports are the pod's ports on the node, as the dispatcher placed
	// them, in the order its containers list them: in bridge mode each
	// host port Port is forwarded to the pod's address on the same port;
	// in host mode the pod listens on the host's ports itself and nothing
	// is mapped; in none mode nothing reaches them. Every container's Env
	// names each (api.PortEnvName). Empty for none.
	Ports []PortMapping
	// Sim drives the simulated runtime; real runtimes ignore it.
	Sim *SimSpec
}

// Network modes of a pod (PodSpec.Network).
const (
	// NetworkBridge gives the pod its own network namespace attached to
	// the node's pod bridge, with an address of the node's pod subnet.
	NetworkBridge = "bridge"
	// NetworkHost runs the pod in the host's network namespace.
	NetworkHost = "host"
	// NetworkNone gives the pod its own network namespace with only
	// loopback.
	NetworkNone = "none"
)

// PortMapping is one port a pod listens on and the host forwards to it:
// the host port and the pod's port are the same number.
type PortMapping struct {
	// Name is the port's name in the job spec.
	Name string
	// Port is the host's and the pod's port number; not 0.
	Port uint16
	// Protocol is "tcp" or "udp"; empty means "tcp".
	Protocol string
}

// ResourceMount is where a container sees its pod's ResourceDir.
const ResourceMount = api.ResourceMountDir

// Volume is storage of a pod that its containers mount: scratch space
// made for the pod, or a host directory (or file). Exactly one of
// ScratchSize and HostPath is set.
type Volume struct {
	// Name identifies the volume within its pod; the rules of a pod ID
	// apply.
	Name string
	// ScratchSize, when positive, makes the volume scratch: an empty
	// filesystem of this many bytes made for the pod, shared by its
	// containers and removed with it. A write past the size fails
	// (ENOSPC) and does not reach the host's other files.
	ScratchSize int64
	// HostPath, when set, makes the volume a host directory or file
	// bind-mounted into the containers: a clean absolute path, below
	// HostRoot, whose symbolic links the caller has resolved.
	HostPath string
	// HostRoot is the directory HostPath lies below, one of the node's
	// volume roots after symbolic links; required with HostPath. A
	// runtime that mounts opens HostPath from HostRoot without leaving
	// it, so that what it mounts is below HostRoot even when the path
	// was changed after the caller resolved it.
	HostRoot string
	// ReadOnly makes every mount of the volume read-only.
	ReadOnly bool
}

// Mount shows a volume of the pod in a container.
type Mount struct {
	// Volume names a volume of the pod.
	Volume string
	// Path is where the container sees it: a clean absolute path other
	// than "/", outside /proc, /sys and /dev.
	Path string
	// ReadOnly makes this mount read-only (a read-only volume is anyway).
	ReadOnly bool
}

// IsScratch reports whether v is a scratch volume.
func (v *Volume) IsScratch() bool { return v.ScratchSize > 0 }

// proto is pm's protocol, "tcp" when empty.
func (pm PortMapping) proto() string {
	if pm.Protocol == "" {
		return "tcp"
	}
	return pm.Protocol
}

// SimSpec is how a simulated pod behaves: it runs for RunTime and exits
// with ExitCode, and uses Usage meanwhile (nil: nothing).
type SimSpec struct {
	RunTime  time.Duration
	ExitCode int
	Usage    *api.SimUsage
}

// ContainerSpec is one process tree of a pod.
type ContainerSpec struct {
	// Name identifies the container within its pod; the rules of a pod
	// ID apply.
	Name string
	// Image is the container's root filesystem.
	Image api.Image
	// Args is the program and its arguments; Args[0] is not empty.
	Args []string
	// Env is the environment, as KEY=value.
	Env []string
	// WorkingDir is the absolute directory the process starts in;
	// empty means "/".
	WorkingDir string
	// Resources limit the container.
	Resources Resources
	// User runs the process as UID:GID; nil means root in the container.
	User *User
	// ReadOnlyRootfs mounts the image read-only (with a writable /tmp).
	ReadOnlyRootfs bool
	// Ports the container listens on, recorded for the agent.
	Ports []api.Port
	// Mounts show volumes of the pod in the container, each at its own
	// path.
	Mounts []Mount
}

// User is a numeric identity inside the container.
type User struct {
	UID, GID int
}

// Resources are a container's limits. Zero means the runtime's default.
type Resources struct {
	// MilliCPU is the CPU quota in thousandths of a core.
	MilliCPU int64
	// MemoryBytes is the memory limit; exceeding it invokes the OOM killer.
	MemoryBytes int64
	// Pids is the most processes and threads the container may have.
	Pids int64
}

// FromAPI derives the PodSpec of one pod of a task from its api spec. The
// api spec is expected to have been decoded or defaulted by api, so that
// container names are set. A container without Args shares its Command
// (capped: an append copies), so the result must not be changed.
//
// Host path volumes come as the api spec names them, with no HostRoot:
// the caller resolves them against its volume roots (ResolveHostPath)
// before a runtime sees them, and Validate refuses them until then.
func FromAPI(id string, generation int64, cgroupParent string, p *api.PodSpec) PodSpec {
	s := PodSpec{ID: id, Generation: generation, CgroupParent: cgroupParent, SharePID: p.SharePID, Network: p.Network.Mode}
	if p.Sim != nil {
		s.Sim = &SimSpec{RunTime: p.Sim.RunTime.Std(), ExitCode: int(p.Sim.ExitCode), Usage: p.Sim.Usage}
	}
	s.Volumes = volumesFromAPI(p.Volumes)
	if len(p.Containers) > 0 {
		s.Containers = make([]ContainerSpec, len(p.Containers))
	}
	for i := range p.Containers {
		c := &p.Containers[i]
		s.Containers[i] = ContainerSpec{
			Name:       c.Name,
			Image:      c.Image,
			Args:       args(c),
			WorkingDir: c.WorkingDir,
			Resources: Resources{
				MilliCPU:    c.Resources.CPU,
				MemoryBytes: c.Resources.Memory,
			},
			Ports: slices.Clone(c.Resources.Ports),
		}
		if sec := c.Security; sec != nil {
			s.Containers[i].ReadOnlyRootfs = sec.ReadOnlyRootfs
			if sec.User != (api.ContainerUser{}) {
				s.Containers[i].User = &User{UID: int(sec.User.UID), GID: int(sec.User.GID)}
			}
		}
		if len(c.Mounts) > 0 {
			m := make([]Mount, len(c.Mounts))
			for j, am := range c.Mounts {
				m[j] = Mount{Volume: am.Volume, Path: am.Path, ReadOnly: am.ReadOnly}
			}
			s.Containers[i].Mounts = m
		}
		// A nodelet converts every pod it starts; sorting the keys of
		// an empty environment took a third of the conversion.
		if len(c.Env) > 0 {
			env := make([]string, 0, len(c.Env))
			for _, k := range slices.Sorted(maps.Keys(c.Env)) {
				env = append(env, k+"="+c.Env[k])
			}
			s.Containers[i].Env = env
		}
	}
	return s
}

// volumesFromAPI converts a pod's api volumes, as FromAPI does; nil for
// none.
func volumesFromAPI(vols []api.Volume) []Volume {
	if len(vols) == 0 {
		return nil
	}
	out := make([]Volume, len(vols))
	for i, v := range vols {
		out[i].Name = v.Name
		if v.Scratch != nil {
			out[i].ScratchSize = v.Scratch.Size
		}
		if v.HostPath != nil {
			out[i].HostPath, out[i].ReadOnly = v.HostPath.Path, v.HostPath.ReadOnly
		}
	}
	return out
}

// args is a container's command line: its Command, and its Args after.
func args(c *api.ContainerSpec) []string {
	if len(c.Args) == 0 {
		return slices.Clip(c.Command)
	}
	return slices.Concat(c.Command, c.Args)
}

// SpecError is an ErrBadSpec error: every problem of a spec, each naming
// its field.
type SpecError struct {
	Problems []FieldProblem
}

// FieldProblem is one problem of a spec.
type FieldProblem struct {
	// Field is the path of the value, for example "containers[1].args".
	Field string
	// Msg says what is wrong.
	Msg string
	// Err, when set, is a sentinel error the problem is an instance of,
	// such as ErrImageDenied; the SpecError wraps it.
	Err error
}

func (e *SpecError) Error() string {
	var b strings.Builder
	b.WriteString(ErrBadSpec.Error())
	for i, p := range e.Problems {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(p.Field)
		b.WriteString(": ")
		b.WriteString(p.Msg)
	}
	return b.String()
}

// Unwrap returns ErrBadSpec and the Err of each problem that has one.
func (e *SpecError) Unwrap() []error {
	errs := []error{ErrBadSpec}
	for _, p := range e.Problems {
		if p.Err != nil {
			errs = append(errs, p.Err)
		}
	}
	return errs
}

// Add records a problem.
func (e *SpecError) Add(field, format string, args ...any) {
	e.Problems = append(e.Problems, FieldProblem{Field: field, Msg: fmt.Sprintf(format, args...)})
}

// AddErr records a problem that is an instance of sentinel err.
func (e *SpecError) AddErr(err error, field, format string, args ...any) {
	e.Problems = append(e.Problems, FieldProblem{Field: field, Msg: fmt.Sprintf(format, args...), Err: err})
}

// Err returns e if it holds problems, else nil.
func (e *SpecError) Err() error {
	if len(e.Problems) == 0 {
		return nil
	}
	return e
}

// Validate checks what every runtime needs of a spec and returns a
// *SpecError listing every problem, or nil. Runtimes add their own checks.
func (s *PodSpec) Validate() error {
	var e SpecError
	if msg := CheckName(s.ID); msg != "" {
		e.Add("id", "%s", msg)
	}
	if !cleanCgroupPath(s.CgroupParent) {
		e.Add("cgroup_parent", "must be a clean relative cgroup path, not %q", s.CgroupParent)
	}
	if len(s.Containers) == 0 {
		e.Add("containers", "at least one container is required")
	}
	if s.InPod != "" {
		if msg := CheckName(s.InPod); msg != "" {
			e.Add("in_pod", "%s", msg)
		} else if s.Placeholder {
			e.Add("in_pod", "a placeholder is not inside another pod")
		}
	}
	if d := s.ResourceDir; d != "" && !cleanAbs(d) {
		e.Add("resource_dir", "must be a clean absolute path, not %q", d)
	}
	for i, kv := range s.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			e.Add(fmt.Sprintf("env[%d]", i), "must be KEY=value")
		}
	}
	s.validateVolumes(&e)
	switch s.Network {
	case "", NetworkBridge, NetworkHost, NetworkNone:
	default:
		e.Add("network", "must be %q, %q or %q, not %q", NetworkBridge, NetworkHost, NetworkNone, s.Network)
	}
	for i, pm := range s.Ports {
		f := func() string { return fmt.Sprintf("ports[%d]", i) }
		if pm.Port == 0 {
			e.Add(f()+".port", "must not be 0")
		}
		if pm.Protocol != "" && pm.Protocol != "tcp" && pm.Protocol != "udp" {
			e.Add(f()+".protocol", "must be tcp or udp, not %q", pm.Protocol)
		}
		if slices.ContainsFunc(s.Ports[:i], func(o PortMapping) bool { return o.Port == pm.Port && o.proto() == pm.proto() }) {
			e.Add(f()+".port", "%s port %d is mapped twice", pm.proto(), pm.Port)
		}
	}
	if s.Sim != nil {
		if s.Sim.RunTime < 0 {
			e.Add("sim.run_time", "must not be negative")
		}
		if s.Sim.ExitCode < 0 || s.Sim.ExitCode > 255 {
			e.Add("sim.exit_code", "must be 0 to 255")
		}
		if u := s.Sim.Usage; u != nil {
			if u.CPU < 0 || u.Memory < 0 {
				e.Add("sim.usage", "cpu %d and memory %d must not be negative", u.CPU, u.Memory)
			}
			if p := u.Peak; p != nil && (p.CPU < 0 || p.Memory < 0 || p.Period <= 0 || p.Length <= 0 || p.Length >= p.Period) {
				e.Add("sim.usage.peak", "cpu %d and memory %d must not be negative, and length %v must be positive and shorter than period %v",
					p.CPU, p.Memory, p.Length, p.Period)
			}
		}
	}
	for i := range s.Containers {
		c := &s.Containers[i]
		// The field's path, built only for a problem (Validate runs for
		// every pod start).
		f := func() string { return fmt.Sprintf("containers[%d]", i) }
		if msg := CheckName(c.Name); msg != "" {
			e.Add(f()+".name", "%s", msg)
		} else if slices.ContainsFunc(s.Containers[:i], func(o ContainerSpec) bool { return o.Name == c.Name }) {
			e.Add(f()+".name", "duplicate container name %q", c.Name)
		}
		if s.Placeholder {
			if len(s.Containers) != 1 || len(c.Args) > 0 || c.Image != (api.Image{}) {
				e.Add(f(), "a placeholder has one container, with no image and no args")
			}
			continue
		}
		switch {
		case len(c.Args) == 0:
			e.Add(f()+".args", "a command is required")
		case c.Args[0] == "":
			e.Add(f()+".args[0]", "the program must not be empty")
		}
		for j, kv := range c.Env {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				e.Add(fmt.Sprintf("%s.env[%d]", f(), j), "must be KEY=value")
			}
		}
		if c.WorkingDir != "" && !path.IsAbs(c.WorkingDir) {
			e.Add(f()+".working_dir", "must be absolute")
		}
		switch {
		case c.Image.Rootfs == "" && c.Image.OCILayout == "":
			e.Add(f()+".image", "must set rootfs or oci_layout")
		case c.Image.Rootfs != "" && c.Image.OCILayout != "":
			e.Add(f()+".image", "must set only one of rootfs and oci_layout")
		case c.Image.Rootfs != "" && !path.IsAbs(c.Image.Rootfs):
			e.Add(f()+".image.rootfs", "must be absolute")
		case c.Image.OCILayout != "" && !path.IsAbs(c.Image.OCILayout):
			e.Add(f()+".image.oci_layout", "must be absolute")
		}
		r := c.Resources
		if r.MilliCPU < 0 {
			e.Add(f()+".resources.cpu", "must not be negative")
		}
		if r.MemoryBytes < 0 {
			e.Add(f()+".resources.memory", "must not be negative")
		}
		if r.Pids < 0 {
			e.Add(f()+".resources.pids", "must not be negative")
		}
		if c.User != nil && (c.User.UID < 0 || c.User.GID < 0) {
			e.Add(f()+".user", "uid and gid must not be negative")
		}
		for j := range c.Mounts {
			s.validateMount(&e, c, j, f)
		}
	}
	if len(e.Problems) == 0 {
		return nil // e stays on the stack
	}
	out := e
	return &out
}

// validateVolumes records the problems of s's volumes in e.
func (s *PodSpec) validateVolumes(e *SpecError) {
	if s.Placeholder && len(s.Volumes) > 0 {
		e.Add("volumes", "a placeholder has no volumes")
	}
	for i := range s.Volumes {
		v := &s.Volumes[i]
		f := func() string { return fmt.Sprintf("volumes[%d]", i) }
		if msg := CheckName(v.Name); msg != "" {
			e.Add(f()+".name", "%s", msg)
		} else if slices.ContainsFunc(s.Volumes[:i], func(o Volume) bool { return o.Name == v.Name }) {
			e.Add(f()+".name", "duplicate volume name %q", v.Name)
		}
		switch {
		case v.ScratchSize < 0:
			e.Add(f()+".scratch_size", "must not be negative")
		case v.ScratchSize > 0 && v.HostPath != "":
			e.Add(f(), "must be only one of scratch and host path")
		case v.ScratchSize == 0 && v.HostPath == "":
			e.Add(f(), "must be scratch (a positive size) or a host path")
		case v.HostPath != "":
			switch {
			case !cleanAbs(v.HostPath):
				e.Add(f()+".host_path", "must be a clean absolute path, not %q", v.HostPath)
			case !cleanAbs(v.HostRoot):
				e.Add(f()+".host_root", "must be a clean absolute path, not %q", v.HostRoot)
			case !within(v.HostRoot, v.HostPath):
				e.Add(f()+".host_path", "%s is not below its root %s", v.HostPath, v.HostRoot)
			}
		}
	}
}

// validateMount records the problems of mount j of container c in e; f
// is the container's field path.
func (s *PodSpec) validateMount(e *SpecError, c *ContainerSpec, j int, f func() string) {
	m := &c.Mounts[j]
	fm := func() string { return fmt.Sprintf("%s.mounts[%d]", f(), j) }
	if !slices.ContainsFunc(s.Volumes, func(v Volume) bool { return v.Name == m.Volume }) {
		e.Add(fm()+".volume", "no volume %q in the pod", m.Volume)
	}
	switch {
	case !cleanAbs(m.Path):
		e.Add(fm()+".path", "must be a clean absolute path, not %q", m.Path)
	case m.Path == "/":
		e.Add(fm()+".path", "must not be the container's root")
	case within("/proc", m.Path) || within("/sys", m.Path) || within("/dev", m.Path):
		e.Add(fm()+".path", "%s: a container's /proc, /sys and /dev are the runtime's", m.Path)
	case s.ResourceDir != "" && within(ResourceMount, m.Path):
		e.Add(fm()+".path", "%s: %s holds the pod's resource file", m.Path, ResourceMount)
	case slices.ContainsFunc(c.Mounts[:j], func(o Mount) bool { return o.Path == m.Path }):
		e.Add(fm()+".path", "another mount of the container is at %s", m.Path)
	}
}

// cleanAbs reports whether p is a clean absolute path.
func cleanAbs(p string) bool { return path.IsAbs(p) && path.Clean(p) == p }

// within reports whether clean absolute path p is dir or lies below it,
// by name (no symbolic link is read).
func within(dir, p string) bool {
	if dir == "/" {
		return true
	}
	rest, ok := strings.CutPrefix(p, dir)
	return ok && (rest == "" || rest[0] == '/')
}

// cleanCgroupPath reports whether p is empty or a clean cgroup path: no
// ".." anywhere, and between its outer slashes no empty or "." element.
func cleanCgroupPath(p string) bool {
	if strings.Contains(p, "..") {
		return false
	}
	t := strings.Trim(p, "/")
	if t == "" {
		return true
	}
	for el := range strings.SplitSeq(t, "/") {
		if el == "" || el == "." {
			return false
		}
	}
	return true
}

// CheckName returns what is wrong with a pod ID or container name, or "".
func CheckName(s string) string {
	switch {
	case s == "":
		return "is required"
	case len(s) > MaxIDLen:
		return fmt.Sprintf("longer than %d bytes", MaxIDLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '-' && c != '_' && c != '.') {
			return fmt.Sprintf("must be letters, digits, '-', '_' and '.', starting with a letter or digit, not %q", s)
		}
	}
	return ""
}
