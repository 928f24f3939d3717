package api

import "time"

// QoS is a job's quality-of-service class. It chooses the node's cgroup tier
// and whether the job may run on resources borrowed from idle online work.
type QoS string

const (
	// QoSOnline work gets guaranteed resources from the node's online
	// allocation and is never killed to make room.
	QoSOnline QoS = "online"
	// QoSOffline work is best-effort: it may run on resources online work
	// leaves idle, and it is the first to be throttled or killed under
	// pressure. It is the default class.
	QoSOffline QoS = "offline"
)

// DefaultQueue is the queue of a job that names none.
const DefaultQueue = "default"

// JobSpec is what a user submits: one or more task groups that share a queue,
// a priority, a QoS class, constraints and a scheduling policy.
type JobSpec struct {
	// Name identifies the job to people; it need not be unique.
	Name string `json:"name"`
	// Queue is the fair-share queue the job is charged to. Default "default".
	Queue string `json:"queue,omitempty" codec:"intern=DefaultQueue"`
	// Pool restricts the job to nodes of this pool. Empty means any pool.
	Pool string `json:"pool,omitempty"`
	// Priority orders jobs: higher first, 0 to MaxPriority. Default 0.
	Priority int32 `json:"priority,omitempty"`
	// QoS is the job's class. Default offline.
	QoS QoS `json:"qos,omitempty" codec:"intern=QoSOffline|QoSOnline"`
	// Labels are the user's key/value annotations of the job.
	Labels map[string]string `json:"labels,omitempty"`
	// Constraints are hard requirements on node labels.
	Constraints []Constraint `json:"constraints,omitempty"`
	// DistinctNodes places every task of the job on a different node.
	DistinctNodes bool `json:"distinct_nodes,omitempty"`
	// Policy selects the filters and scorers placement applies to this job.
	// Nil means the dispatcher's default policy.
	Policy *Policy `json:"policy,omitempty"`
	// Retry says how failed tasks are retried.
	Retry RetryPolicy `json:"retry,omitzero"`
	// MaxRunTime kills a task that runs longer: its nodelet stops it that
	// long after it started and reports it killed with ReasonTimeLimit; it
	// is not retried. Zero means no limit.
	MaxRunTime Duration `json:"max_run_time,omitzero"`
	// IdempotencyKey makes a retried submission safe: a job whose key the
	// dispatcher has already committed is answered with the first job's ID
	// instead of being created again.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Appmaster makes the job an appmaster: it may lease capboxes
	// (CapboxRequest) and run its own tasks in them. An appmaster job may
	// have no task groups: its program then runs outside the cluster
	// (client mode) and the job lives until it is cancelled. When an
	// appmaster job ends, its capboxes are released.
	Appmaster bool `json:"appmaster,omitempty"`
	// Tasks are the job's task groups: at least one, unless the job is an
	// appmaster.
	Tasks []TaskGroupSpec `json:"tasks" codec:"slab=groups"`
}

// TaskGroupSpec is an array of identical tasks: Count copies of one pod.
type TaskGroupSpec struct {
	// Name identifies the group within its job. Default "g<index>".
	Name string `json:"name,omitempty"`
	// Count is the number of tasks, 1 to MaxTaskCount.
	Count int64 `json:"count"`
	// PreferredNodes are nodes the tasks would rather run on (for example
	// where their data is); the locality scorer rewards them.
	PreferredNodes []string `json:"preferred_nodes,omitempty"`
	// Pod is what each task runs.
	Pod PodSpec `json:"pod"`
}

// PodSpec is one or more containers that run together on one node and share
// its network, IPC and UTS namespaces.
type PodSpec struct {
	// Containers run together; at least one, at most MaxContainersPerPod.
	Containers []ContainerSpec `json:"containers" codec:"slab=containers"`
	// SharePID puts the pod's containers in one PID namespace.
	SharePID bool `json:"share_pid,omitempty"`
	// Network is the pod's network: its own namespace on the node's
	// bridge, the host's, or loopback only.
	Network NetworkSpec `json:"network,omitzero"`
	// Volumes are what the pod's containers may mount (ContainerSpec.Mounts),
	// at most MaxVolumesPerPod, with unique names.
	Volumes []Volume `json:"volumes,omitempty"`
	// Sim, when set, tells the simulated runtime how the pod behaves. Real
	// runtimes ignore it.
	Sim *SimSpec `json:"sim,omitempty"`
}

// NetworkSpec chooses a pod's network.
type NetworkSpec struct {
	// Mode is one of the Network* modes; empty means the node's default
	// (NetworkBridge on nodes that run containers).
	Mode string `json:"mode,omitempty" codec:"intern=NetworkBridge|NetworkHost|NetworkNone"`
}

// Network modes.
const (
	// NetworkBridge gives the pod its own network namespace, attached to
	// the node's pod bridge: pods on a node reach each other and the host,
	// and the host's ports map to the pod's (Resources.Ports).
	NetworkBridge = "bridge"
	// NetworkHost runs the pod in the host's network namespace; only nodes
	// that allow it run such a pod, others fail it with
	// ReasonNetworkDenied.
	NetworkHost = "host"
	// NetworkNone gives the pod a network namespace with loopback only.
	NetworkNone = "none"
)

// NetworkModes lists the network modes.
var NetworkModes = []string{NetworkBridge, NetworkHost, NetworkNone}

// Volume is storage a pod's containers may mount: exactly one of Scratch
// and HostPath is set.
type Volume struct {
	// Name identifies the volume within its pod: what a Mount names.
	Name string `json:"name"`
	// Scratch is an empty directory made for the pod, shared by its
	// containers and removed with it.
	Scratch *ScratchVolume `json:"scratch,omitempty"`
	// HostPath is a directory of the node's host.
	HostPath *HostPathVolume `json:"host_path,omitempty"`
}

// ScratchVolume is a pod's own storage of a fixed size. In JSON, Size may
// be a byte quantity ("1Gi").
type ScratchVolume struct {
	// Size in bytes, positive: it counts in the pod's disk demand, and
	// writes past it fail.
	Size int64 `json:"size" codec:"quantity=ParseBytes"`
}

// HostPathVolume is a directory of the node's host. The node allows only
// paths below its volume roots, writable only below writable ones, and
// fails a task asking for any other with ReasonVolumeDenied.
type HostPathVolume struct {
	// Path is absolute and clean.
	Path string `json:"path"`
	// ReadOnly mounts it read-only in every container.
	ReadOnly bool `json:"read_only,omitempty"`
}

// Mount puts one of its pod's volumes into a container.
type Mount struct {
	// Volume names one of the pod's Volumes.
	Volume string `json:"volume"`
	// Path is where the container sees it: absolute, clean, not "/", and
	// no two mounts of a container on one path.
	Path string `json:"path"`
	// ReadOnly mounts it read-only in this container.
	ReadOnly bool `json:"read_only,omitempty"`
}

// SimSpec describes a simulated pod: it runs for RunTime, then exits with
// ExitCode; while it runs it uses Usage.
type SimSpec struct {
	// RunTime is how long the simulated pod runs: zero ends it at once,
	// so a pod meant to run until it is stopped takes a long one.
	RunTime Duration `json:"run_time,omitzero"`
	// ExitCode is the code it exits with, 0 to 255.
	ExitCode int32 `json:"exit_code,omitempty"`
	// Usage, when set, is what the pod uses while it runs: a node that
	// reports its simulated pods' usage reports it in its heartbeats as
	// it does a real pod's measured usage. Default nil: the pod uses
	// nothing.
	Usage *SimUsage `json:"usage,omitempty"`
}

// SimUsage is what a simulated pod uses, in the units of Resources (in
// JSON, CPU may be "500m" and Memory "128Mi"): CPU and Memory all the
// time or, with a Peak, Peak's values during the first Peak.Length of
// every Peak.Period and CPU and Memory for the rest of it.
type SimUsage struct {
	// CPU in millicores, not negative.
	CPU int64 `json:"cpu,omitempty" codec:"quantity=ParseCPU"`
	// Memory in bytes, not negative.
	Memory int64 `json:"memory,omitempty" codec:"quantity=ParseBytes"`
	// Peak, when set, shifts the usage periodically.
	Peak *SimPeak `json:"peak,omitempty"`
}

// SimPeak is a simulated pod's periodic peak usage. Periods are counted
// from the Unix epoch, not from the pod's start, so that every pod with
// the same Period and Length shifts at the same moment across a fleet, as
// a daily load does: the peak holds from each multiple of Period to Length
// after it.
type SimPeak struct {
	// CPU in millicores, not negative.
	CPU int64 `json:"cpu,omitempty" codec:"quantity=ParseCPU"`
	// Memory in bytes, not negative.
	Memory int64 `json:"memory,omitempty" codec:"quantity=ParseBytes"`
	// Period is how often the peak comes: positive.
	Period Duration `json:"period"`
	// Length is how long it holds: positive and shorter than Period.
	Length Duration `json:"length"`
}

// At returns what u uses at time t: the peak's values during a peak, the
// base's otherwise. A nil u uses nothing.
func (u *SimUsage) At(t time.Time) Usage {
	if u == nil {
		return Usage{}
	}
	if p := u.Peak; p != nil && p.Period > 0 {
		ns := t.UnixNano() % int64(p.Period)
		if ns < 0 {
			ns += int64(p.Period)
		}
		if ns < int64(p.Length) {
			return Usage{CPU: p.CPU, Memory: p.Memory}
		}
	}
	return Usage{CPU: u.CPU, Memory: u.Memory}
}

// ContainerSpec is one process tree of a pod, with its own root filesystem.
type ContainerSpec struct {
	// Name identifies the container within its pod. Default "c<index>".
	Name string `json:"name,omitempty"`
	// Image is the container's root filesystem.
	Image Image `json:"image"`
	// Command is the program and its leading arguments; at least one
	// element, and the first is not empty.
	Command []string `json:"command"`
	// Args are appended to Command.
	Args []string `json:"args,omitempty"`
	// Env is the process environment. Names starting with EnvPrefix are
	// the node's (the Env* constants): a job may not set them.
	Env map[string]string `json:"env,omitempty"`
	// WorkingDir is the absolute directory the process starts in. Default /.
	WorkingDir string `json:"working_dir,omitempty"`
	// Resources are what the container needs.
	Resources Resources `json:"resources"`
	// Mounts put the pod's volumes into the container, at most
	// MaxVolumesPerPod.
	Mounts []Mount `json:"mounts,omitempty"`
	// Security is who the container's processes run as and what they may
	// change. Nil: root, on a writable image.
	Security *ContainerSecurity `json:"security,omitempty" codec:"since=2"`
}

// ContainerSecurity restricts a container.
type ContainerSecurity struct {
	// User runs the container's processes as this numeric identity.
	// Default root (0:0) inside the container.
	User ContainerUser `json:"user,omitzero"`
	// ReadOnlyRootfs mounts the image read-only; /tmp stays writable, and
	// the mounts as they say.
	ReadOnlyRootfs bool `json:"read_only_rootfs,omitempty"`
}

// ContainerUser is a numeric identity inside a container: the user and
// group its processes run as. Without a user namespace these are the
// node's own IDs, so a job running as a non-root UID gets no more than
// that UID may do on the node's files it sees (its image, its volumes).
type ContainerUser struct {
	// UID is the user ID, 0 or more.
	UID int32 `json:"uid"`
	// GID is the primary group ID, 0 or more. Default 0.
	GID int32 `json:"gid"`
}

// Image names a container's root filesystem: exactly one of Rootfs and
// OCILayout is set. Both paths are on the node's host: validation refuses
// a path that is not clean (an empty, "." or ".." element, a trailing
// slash) and the host's root "/" itself; a node runs only images below
// its image roots, and reports a task whose image is elsewhere failed with
// ReasonImageDenied.
type Image struct {
	// Rootfs is the absolute path of an unpacked root filesystem directory.
	Rootfs string `json:"rootfs,omitempty"`
	// OCILayout is the absolute path of an OCI image layout directory.
	OCILayout string `json:"oci_layout,omitempty"`
	// Ref selects the image within OCILayout by tag or digest. Default
	// "latest". It must be empty with Rootfs.
	Ref string `json:"ref,omitempty"`
}

// Resources is what one container asks for. In JSON, CPU may also be given as
// a quantity string ("500m", "2", "0.5") and Memory and Disk as byte
// quantities ("512Mi", "1.5Gi", "100M").
type Resources struct {
	// CPU in millicores: 1000 is one core. Must be positive.
	CPU int64 `json:"cpu" codec:"quantity=ParseCPU"`
	// Memory in bytes. Must be positive.
	Memory int64 `json:"memory" codec:"quantity=ParseBytes"`
	// GPUs is the number of whole GPUs.
	GPUs int64 `json:"gpus,omitempty"`
	// Disk is scratch disk in bytes.
	Disk int64 `json:"disk,omitempty" codec:"quantity=ParseBytes"`
	// Ports are the network ports the container listens on.
	Ports []Port `json:"ports,omitempty"`
}

// Port is a network port a container needs on its node.
type Port struct {
	// Name identifies the port within the container.
	Name string `json:"name"`
	// Port is the fixed (static) port number, 1 to 65535, or 0 for one
	// the dispatcher assigns from the node's range when it places the
	// task (dynamic). Either way the container listens on the number its
	// SLUICE_PORT_<NAME> says (PortEnvName).
	Port int32 `json:"port,omitempty"`
	// Protocol is "tcp" (the default) or "udp".
	Protocol string `json:"protocol,omitempty"`
}

// Port protocols.
const (
	ProtocolTCP = "tcp"
	ProtocolUDP = "udp"
)

// ConstraintOp is how a constraint compares a node label.
type ConstraintOp string

// Constraint operators.
const (
	// OpIn requires the label to have one of Values.
	OpIn ConstraintOp = "in"
	// OpNotIn requires the label to be absent or have none of Values.
	OpNotIn ConstraintOp = "not_in"
	// OpExists requires the label to be present; Values must be empty.
	OpExists ConstraintOp = "exists"
	// OpNotExists requires the label to be absent; Values must be empty.
	OpNotExists ConstraintOp = "not_exists"
)

// Constraint is a hard requirement on a node label.
type Constraint struct {
	// Key is the node label's key.
	Key string `json:"key"`
	// Op is the comparison.
	Op ConstraintOp `json:"op"`
	// Values are what OpIn and OpNotIn compare against.
	Values []string `json:"values,omitempty"`
}

// Policy selects, by name, the filters (hard rules that remove nodes) and the
// scorers (soft preferences that rank them) placement applies to a job.
type Policy struct {
	// Filters to apply, by name. Empty means the default filters.
	Filters []string `json:"filters,omitempty"`
	// Scorers to apply, by name and weight. Empty means the default scorers.
	Scorers []ScorerRef `json:"scorers,omitempty"`
}

// ScorerRef is a scorer chosen by name with a weight.
type ScorerRef struct {
	// Name is one of the Scorer* names.
	Name string `json:"name"`
	// Weight multiplies the scorer's cost, 1 to MaxScorerWeight. Default 1.
	Weight int32 `json:"weight,omitempty"`
}

// Filter names: the hard constraints a policy can choose. Resource fit is
// always enforced, listed or not.
const (
	FilterResources     = "resources"
	FilterLabels        = "labels"
	FilterPool          = "pool"
	FilterDistinctNodes = "distinct_nodes"
	// FilterPorts admits a node with a port range (NodeSpec.Ports) on
	// which the pod's static ports are free, when the pod asks for ports.
	// Like resource fit, it is always enforced, listed or not.
	FilterPorts = "ports"
)

// Scorer names: the soft preferences a policy can choose.
const (
	ScorerBinpack   = "binpack"
	ScorerSpread    = "spread"
	ScorerLocality  = "locality"
	ScorerSlotReuse = "slot_reuse"
)

// FilterNames and ScorerNames list every name a policy may use, in the order
// the documentation gives them.
var (
	FilterNames = []string{FilterResources, FilterPorts, FilterLabels, FilterPool, FilterDistinctNodes}
	ScorerNames = []string{ScorerBinpack, ScorerSpread, ScorerLocality, ScorerSlotReuse}
)

// RetryPolicy says how many times a task runs and how long it waits between
// attempts. The wait doubles after each failure, from Backoff up to
// MaxBackoff.
type RetryPolicy struct {
	// MaxAttempts is the most times a task runs, 1 (no retry) to
	// MaxAttempts. Default 3.
	MaxAttempts int32 `json:"max_attempts,omitempty"`
	// Backoff is the wait before the first retry. Default 1s.
	Backoff Duration `json:"backoff,omitzero"`
	// MaxBackoff caps the wait. Default 1m.
	MaxBackoff Duration `json:"max_backoff,omitzero"`
}

// Retry policy defaults.
const (
	DefaultMaxAttempts = 3
	DefaultBackoff     = Duration(1e9)
	DefaultMaxBackoff  = Duration(60e9)
)
