package api

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
)

// MaxOvercommit bounds a node's offline allocatable, as a multiple of its
// capacity in each dimension.
const MaxOvercommit = 4

// ValidateJobs checks jobs as DecodeJobs does, naming problems by
// "jobs[i]..." paths. It does not apply defaults: call SetDefaults first when
// the specs were built in Go rather than decoded.
func ValidateJobs(jobs []JobSpec) error {
	return validateItems(jobs, "jobs", (*JobSpec).validate)
}

// ValidateCapboxRequests checks capbox requests as DecodeCapboxRequests does.
func ValidateCapboxRequests(reqs []CapboxRequest) error {
	return validateItems(reqs, "capboxes", (*CapboxRequest).validate)
}

func validateItems[T any](items []T, name string, validate func(*T, *checker)) error {
	c := &checker{item: -1}
	for i := range items {
		c.item, c.itemStart = i, len(c.probs)
		c.push(name)
		c.pushIndex(i)
		validate(&items[i], c)
		c.path = c.path[:0]
	}
	return c.err()
}

// Validate checks a node's advertisement; problems are named by paths
// relative to the spec.
func (n *NodeSpec) Validate() error {
	c := &checker{item: -1}
	c.name("name", n.Name, true)
	if n.Address != "" {
		if err := CheckAddress(n.Address); err != nil {
			c.badAt("address", err.Error())
		}
	}
	if n.HostIP != "" {
		if ip, err := netip.ParseAddr(n.HostIP); err != nil || ip.Zone() != "" {
			c.badAtf("host_ip", "%q is not an IP address (without a zone)", clipName(n.HostIP))
		} else if ip.IsLoopback() || ip.IsUnspecified() {
			c.badAtf("host_ip", "%s must be an address other hosts and the node's pods reach, not loopback or unspecified", n.HostIP)
		}
	}
	if n.LogToken != "" && !validLogToken(n.LogToken) {
		c.badAt("log_token", fmt.Sprintf("must be %d to %d bytes of letters, digits, '-', '_' and '.'", MinLogTokenLen, MaxLogTokenLen))
	}
	c.name("pool", n.Pool, false)
	c.labels("labels", n.Labels)
	c.push("capacity")
	c.capacity(n.Capacity, true)
	c.pop()
	c.push("allocatable")
	c.push("online")
	c.capacity(n.Allocatable.Online, false)
	c.within(n.Allocatable.Online, n.Capacity, 1)
	c.pop()
	c.push("offline")
	c.capacity(n.Allocatable.Offline, false)
	c.within(n.Allocatable.Offline, n.Capacity, MaxOvercommit)
	c.pop()
	c.pop()
	switch r := n.Ports; {
	case r == PortRange{}:
	case r.Lo == 0 || r.Hi < r.Lo:
		c.badAtf("ports", "range %d-%d: want 1 <= lo <= hi <= 65535", r.Lo, r.Hi)
	case n.Capacity.Ports > r.Size():
		c.badAtf("capacity.ports", "%d is more than the port range %s holds (%d)", n.Capacity.Ports, r, r.Size())
	}
	return c.err()
}

// Validate checks a nodelet's task report.
func (r *TaskReport) Validate() error {
	c := &checker{item: -1}
	r.validate(c)
	return c.err()
}

func (r *TaskReport) validate(c *checker) {
	// Paths are pushed only for problems: a valid report's check
	// allocates nothing (nodelets check each report they send).
	switch {
	case r.TaskID == "":
		c.badAt("task_id", "is required")
	case len(r.TaskID) > MaxNameLen:
		c.badAtf("task_id", "longer than %d bytes", MaxNameLen)
	}
	if !r.State.Valid() {
		c.badAt("state", "unknown task state")
	}
	if !slices.Contains(taskReasons, r.Reason) {
		c.badAtf("reason", "unknown reason %q", r.Reason)
	}
	if r.ExitCode < 0 || r.ExitCode > 255 {
		c.badAt("exit_code", "must be 0 to 255")
	}
	c.text("message", r.Message, MaxStringLen)
	if r.Time.IsZero() {
		c.badAt("time", "is required")
	}
}

var taskReasons = []TaskReason{
	ReasonStarted, ReasonExited, ReasonOOMKilled, ReasonMemoryKiller,
	ReasonStartFailed, ReasonStopped, ReasonTimeLimit, ReasonLost, ReasonImageDenied,
	ReasonNetworkDenied, ReasonVolumeDenied, ReasonScratchFull,
}

// SetDefaults fills the fields a job left empty with their documented
// defaults. DecodeJobs calls it; Go callers building specs may too.
func (j *JobSpec) SetDefaults() { j.setDefaults() }

func (j *JobSpec) setDefaults() {
	if j.Queue == "" {
		j.Queue = DefaultQueue
	}
	if j.QoS == "" {
		j.QoS = QoSOffline
	}
	if j.Retry.MaxAttempts == 0 {
		j.Retry.MaxAttempts = DefaultMaxAttempts
	}
	if j.Retry.Backoff == 0 {
		j.Retry.Backoff = DefaultBackoff
	}
	if j.Retry.MaxBackoff == 0 {
		j.Retry.MaxBackoff = max(DefaultMaxBackoff, j.Retry.Backoff)
	}
	if j.Policy != nil {
		for i := range j.Policy.Scorers {
			if j.Policy.Scorers[i].Weight == 0 {
				j.Policy.Scorers[i].Weight = 1
			}
		}
	}
	for i := range j.Tasks {
		g := &j.Tasks[i]
		if g.Name == "" {
			g.Name = defaultName("g", groupNames[:], i)
		}
		g.Pod.setDefaults()
	}
}

func (p *PodSpec) setDefaults() {
	for k := range p.Containers {
		ct := &p.Containers[k]
		if ct.Name == "" {
			ct.Name = defaultName("c", containerNames[:], k)
		}
		if ct.Image.OCILayout != "" && ct.Image.Ref == "" {
			ct.Image.Ref = "latest"
		}
		if ct.WorkingDir == "" {
			ct.WorkingDir = "/"
		}
		ct.Resources.setDefaults()
	}
}

// The default names of task groups ("g0", "g1", …) and containers ("c0",
// …), made once so that defaulting a job allocates nothing.
var (
	groupNames     = nameTable("g", MaxTaskGroups)
	containerNames = nameTable("c", MaxContainersPerPod)
)

func nameTable(prefix string, n int) []string {
	t := make([]string, n)
	for i := range t {
		t[i] = prefix + strconv.Itoa(i)
	}
	return t
}

func defaultName(prefix string, table []string, i int) string {
	if i < len(table) {
		return table[i]
	}
	return prefix + strconv.Itoa(i)
}

func (r *Resources) setDefaults() {
	for i := range r.Ports {
		if r.Ports[i].Protocol == "" {
			r.Ports[i].Protocol = ProtocolTCP
		}
	}
}

func (j *JobSpec) validate(c *checker) {
	c.name("name", j.Name, true)
	c.name("queue", j.Queue, true)
	c.name("pool", j.Pool, false)
	if j.Priority < 0 || j.Priority > MaxPriority {
		c.badAtf("priority", "must be 0 to %d", MaxPriority)
	}
	if j.QoS != QoSOnline && j.QoS != QoSOffline {
		c.badAtf("qos", "must be %q or %q, not %q", QoSOnline, QoSOffline, j.QoS)
	}
	c.labels("labels", j.Labels)
	c.constraints(j.Constraints)
	if j.Policy != nil {
		c.push("policy")
		c.policy(j.Policy)
		c.pop()
	}
	c.push("retry")
	c.retry(&j.Retry)
	c.pop()
	if j.MaxRunTime < 0 {
		c.badAt("max_run_time", "must not be negative")
	}
	c.idempotencyKey(j.IdempotencyKey)
	c.push("tasks")
	switch {
	case len(j.Tasks) == 0 && !j.Appmaster:
		c.bad("must have at least one task group (or the job be an appmaster)")
	case len(j.Tasks) > MaxTaskGroups:
		c.badf("more than %d task groups", MaxTaskGroups)
	}
	for i := range j.Tasks {
		c.pushIndex(i)
		c.taskGroup(&j.Tasks[i], j.Tasks[:i])
		c.pop()
	}
	c.pop()
}

func (c *checker) taskGroup(g *TaskGroupSpec, before []TaskGroupSpec) {
	c.name("name", g.Name, true)
	if g.Name != "" && slices.ContainsFunc(before, func(o TaskGroupSpec) bool { return o.Name == g.Name }) {
		c.badAtf("name", "duplicate task group name %q", g.Name)
	}
	c.count(g.Count)
	c.preferredNodes(g.PreferredNodes)
	c.push("pod")
	c.pod(&g.Pod)
	c.pop()
}

func (c *checker) count(n int64) {
	if n < 1 || n > MaxTaskCount {
		c.badAtf("count", "must be 1 to %d", MaxTaskCount)
	}
}

func (c *checker) preferredNodes(nodes []string) {
	c.push("preferred_nodes")
	if len(nodes) > MaxPreferredNodes {
		c.badf("more than %d nodes", MaxPreferredNodes)
	}
	for i, n := range nodes {
		if msg := nameProblem(n, true); msg != "" {
			c.pushIndex(i)
			c.bad(msg)
			c.pop()
		}
	}
	c.pop()
}

func (c *checker) pod(p *PodSpec) {
	c.push("containers")
	switch {
	case len(p.Containers) == 0:
		c.bad("must have at least one container")
	case len(p.Containers) > MaxContainersPerPod:
		c.badf("more than %d containers", MaxContainersPerPod)
	}
	for i := range p.Containers {
		ct := &p.Containers[i]
		c.pushIndex(i)
		c.name("name", ct.Name, true)
		if ct.Name != "" && slices.ContainsFunc(p.Containers[:i], func(o ContainerSpec) bool { return o.Name == ct.Name }) {
			c.badAtf("name", "duplicate container name %q", ct.Name)
		}
		c.container(ct)
		c.pop()
	}
	c.pop()
	c.network(&p.Network)
	c.volumes(p.Volumes)
	c.push("containers")
	for i := range p.Containers {
		if len(p.Containers[i].Mounts) > 0 {
			c.pushIndex(i)
			c.mounts(p.Containers[i].Mounts, p.Volumes)
			c.pop()
		}
	}
	c.pop()
	c.podPorts(p)
	if p.Sim != nil {
		c.push("sim")
		if p.Sim.RunTime < 0 {
			c.badAt("run_time", "must not be negative")
		}
		if p.Sim.ExitCode < 0 || p.Sim.ExitCode > 255 {
			c.badAt("exit_code", "must be 0 to 255")
		}
		if u := p.Sim.Usage; u != nil {
			c.push("usage")
			c.simUsage(u)
			c.pop()
		}
		c.pop()
	}
}

// podPorts checks what the containers of p ask for together: the
// containers share the pod's network, and each sees every port of the pod
// as SLUICE_PORT_<NAME> (PortEnvName), so no two ports may have one
// environment name, nor two static ports one number and protocol.
func (c *checker) podPorts(p *PodSpec) {
	type at struct {
		ct, port int
		name     string
	}
	var names map[string]at
	var static map[Port]at
	for ci := range p.Containers {
		for pi, pt := range p.Containers[ci].Resources.Ports {
			if names == nil {
				names, static = map[string]at{}, map[Port]at{}
			}
			here := at{ci, pi, pt.Name}
			env := PortEnvName(pt.Name)
			switch o, dup := names[env]; {
			case pt.Name == "":
			case !dup:
				names[env] = here
			case o.ct != ci || o.name != pt.Name: // one container's duplicate names are resources' to report
				c.portProblem(ci, pi, "name", fmt.Sprintf("%q has the environment name %s of port %q (containers[%d].resources.ports[%d])",
					pt.Name, env, o.name, o.ct, o.port))
			}
			if pt.Port == 0 {
				continue
			}
			k := Port{Port: pt.Port, Protocol: cmp.Or(pt.Protocol, ProtocolTCP)}
			if o, dup := static[k]; dup {
				c.portProblem(ci, pi, "port", fmt.Sprintf("%d/%s is asked for twice in the pod (and by containers[%d].resources.ports[%d])",
					k.Port, k.Protocol, o.ct, o.port))
			} else {
				static[k] = here
			}
		}
	}
}

// portProblem reports msg about field of port pi of container ci.
func (c *checker) portProblem(ci, pi int, field, msg string) {
	c.push("containers")
	c.pushIndex(ci)
	c.push("resources")
	c.push("ports")
	c.pushIndex(pi)
	c.badAt(field, msg)
	c.path = c.path[:len(c.path)-5]
}

func (c *checker) container(ct *ContainerSpec) {
	c.push("image")
	c.image(&ct.Image)
	c.pop()
	switch {
	case len(ct.Command) == 0:
		c.badAt("command", "is required")
	case ct.Command[0] == "":
		c.push("command")
		c.pushIndex(0)
		c.bad("must not be empty")
		c.pop()
		c.pop()
	}
	if len(ct.Command)+len(ct.Args) > MaxArgs {
		c.badAtf("args", "command and args have more than %d elements", MaxArgs)
	}
	c.texts("command", ct.Command)
	c.texts("args", ct.Args)
	c.push("env")
	if len(ct.Env) > MaxEnv {
		c.badf("more than %d variables", MaxEnv)
	}
	for _, k := range c.sortedKeys(ct.Env) {
		c.pushKey(k)
		switch {
		case !validEnvName(k):
			c.bad("variable name must be letters, digits and '_', not starting with a digit")
		case strings.HasPrefix(k, EnvPrefix):
			c.bad("names starting with " + EnvPrefix + " are set by the node")
		}
		c.textHere(ct.Env[k], MaxStringLen)
		c.pop()
	}
	c.pop()
	c.absPath("working_dir", ct.WorkingDir)
	if sec := ct.Security; sec != nil {
		if sec.User.UID < 0 {
			c.badAtf("security.user.uid", "must be 0 or more, not %d", sec.User.UID)
		}
		if sec.User.GID < 0 {
			c.badAtf("security.user.gid", "must be 0 or more, not %d", sec.User.GID)
		}
	}
	c.push("resources")
	c.resources(&ct.Resources)
	c.pop()
}

func (c *checker) network(n *NetworkSpec) {
	if n.Mode != "" && !slices.Contains(NetworkModes, n.Mode) {
		c.badAtf("network.mode", "must be %q, %q or %q, not %q", NetworkBridge, NetworkHost, NetworkNone, n.Mode)
	}
}

func (c *checker) volumes(vs []Volume) {
	c.push("volumes")
	if len(vs) > MaxVolumesPerPod {
		c.badf("more than %d volumes", MaxVolumesPerPod)
	}
	for i := range vs {
		v := &vs[i]
		c.pushIndex(i)
		c.name("name", v.Name, true)
		if v.Name != "" && slices.ContainsFunc(vs[:i], func(o Volume) bool { return o.Name == v.Name }) {
			c.badAtf("name", "duplicate volume name %q", v.Name)
		}
		switch {
		case v.Scratch == nil && v.HostPath == nil:
			c.bad("must set scratch or host_path")
		case v.Scratch != nil && v.HostPath != nil:
			c.bad("must set only one of scratch and host_path")
		case v.Scratch != nil:
			c.amount("scratch.size", v.Scratch.Size, 1, MaxDisk, "bytes")
		default:
			if v.HostPath.Path == "" {
				c.badAt("host_path.path", "is required")
			}
			c.hostPath("host_path.path", v.HostPath.Path)
		}
		c.pop()
	}
	c.pop()
}

// reservedMountDirs are directories of a container that the runtime fills:
// a mount may not be on or below them.
var reservedMountDirs = []string{"/proc", "/sys", "/dev", ResourceMountDir}

func (c *checker) mounts(ms []Mount, vs []Volume) {
	c.push("mounts")
	if len(ms) > MaxVolumesPerPod {
		c.badf("more than %d mounts", MaxVolumesPerPod)
	}
	for i := range ms {
		m := &ms[i]
		c.pushIndex(i)
		switch {
		case m.Volume == "":
			c.badAt("volume", "is required")
		case !slices.ContainsFunc(vs, func(v Volume) bool { return v.Name == m.Volume }):
			c.badAtf("volume", "names no volume of the pod: %q", m.Volume)
		}
		if m.Path == "" {
			c.badAt("path", "is required")
		} else if c.hostPath("path", m.Path) {
			if r := reservedDir(m.Path); r != "" {
				c.badAtf("path", "%q is on or below %s, which the node provides", m.Path, r)
			}
			if slices.ContainsFunc(ms[:i], func(o Mount) bool { return o.Path == m.Path }) {
				c.badAtf("path", "two mounts on %q", m.Path)
			}
		}
		c.pop()
	}
	c.pop()
}

// reservedDir returns the reserved directory clean path p is on or below,
// or "".
func reservedDir(p string) string {
	for _, r := range reservedMountDirs {
		if p == r || strings.HasPrefix(p, r+"/") {
			return r
		}
	}
	return ""
}

func (c *checker) image(im *Image) {
	switch {
	case im.Rootfs == "" && im.OCILayout == "":
		c.bad("must set rootfs or oci_layout")
	case im.Rootfs != "" && im.OCILayout != "":
		c.bad("must set only one of rootfs and oci_layout")
	}
	c.hostPath("rootfs", im.Rootfs)
	c.hostPath("oci_layout", im.OCILayout)
	switch {
	case im.Ref == "":
	case im.OCILayout == "":
		c.badAt("ref", "is only for oci_layout images")
	case len(im.Ref) > MaxNameLen:
		c.badAtf("ref", "longer than %d bytes", MaxNameLen)
	case hasControl(im.Ref):
		c.badAt("ref", "must not contain control characters")
	}
}

func (c *checker) resources(r *Resources) {
	c.amount("cpu", r.CPU, 1, MaxCPU, "millicores")
	c.amount("memory", r.Memory, 1, MaxMemory, "bytes")
	c.amount("gpus", r.GPUs, 0, MaxGPUs, "GPUs")
	c.amount("disk", r.Disk, 0, MaxDisk, "bytes")
	c.push("ports")
	if len(r.Ports) > MaxPorts {
		c.badf("more than %d ports", MaxPorts)
	}
	for i := range r.Ports {
		p := &r.Ports[i]
		c.pushIndex(i)
		c.name("name", p.Name, true)
		if p.Name != "" && slices.ContainsFunc(r.Ports[:i], func(o Port) bool { return o.Name == p.Name }) {
			c.badAtf("name", "duplicate port name %q", p.Name)
		}
		if p.Port < 0 || p.Port > 65535 {
			c.badAt("port", "must be 0 (assigned by the node) or a port from 1 to 65535")
		}
		if p.Protocol != ProtocolTCP && p.Protocol != ProtocolUDP && p.Protocol != "" {
			c.badAtf("protocol", "must be %q or %q", ProtocolTCP, ProtocolUDP)
		}
		c.pop()
	}
	c.pop()
}

func (c *checker) amount(field string, v, lo, hi int64, unit string) {
	switch {
	case v >= lo && v <= hi:
	case v < lo && lo == 1:
		c.badAt(field, "must be positive")
	case v < lo:
		c.badAt(field, "must not be negative")
	default:
		c.badAtf(field, "%d %s is more than the limit of %d", v, unit, hi)
	}
}

func (c *checker) capacity(k Capacity, needCore bool) {
	lo := int64(0)
	if needCore {
		lo = 1
	}
	c.amount("cpu", k.CPU, lo, 1<<40, "millicores")
	c.amount("memory", k.Memory, lo, 1<<60, "bytes")
	c.amount("gpus", k.GPUs, 0, 1<<20, "GPUs")
	c.amount("disk", k.Disk, 0, 1<<60, "bytes")
	c.amount("ports", k.Ports, 0, 65536, "ports")
}

// within checks that every dimension of a is at most factor times that of b.
func (c *checker) within(a, b Capacity, factor int64) {
	dims := []struct {
		name string
		a, b int64
	}{{"cpu", a.CPU, b.CPU}, {"memory", a.Memory, b.Memory}, {"gpus", a.GPUs, b.GPUs}, {"disk", a.Disk, b.Disk}, {"ports", a.Ports, b.Ports}}
	for _, d := range dims {
		if d.a > d.b*factor {
			c.push(d.name)
			if factor == 1 {
				c.badf("%d is more than the capacity %d", d.a, d.b)
			} else {
				c.badf("%d is more than %d times the capacity %d", d.a, factor, d.b)
			}
			c.pop()
		}
	}
}

func (c *checker) constraints(cs []Constraint) {
	c.push("constraints")
	if len(cs) > MaxConstraints {
		c.badf("more than %d constraints", MaxConstraints)
	}
	for i := range cs {
		k := &cs[i]
		c.pushIndex(i)
		c.push("key")
		c.labelKey(k.Key)
		c.pop()
		c.push("op")
		listed := k.Op == OpIn || k.Op == OpNotIn
		if !listed && k.Op != OpExists && k.Op != OpNotExists {
			c.badf("must be one of %q, %q, %q, %q", OpIn, OpNotIn, OpExists, OpNotExists)
		}
		c.pop()
		c.push("values")
		switch {
		case listed && len(k.Values) == 0:
			c.badf("%q needs at least one value", k.Op)
		case !listed && len(k.Values) > 0 && (k.Op == OpExists || k.Op == OpNotExists):
			c.badf("%q takes no values", k.Op)
		case len(k.Values) > MaxConstraintValues:
			c.badf("more than %d values", MaxConstraintValues)
		}
		for j, v := range k.Values {
			c.pushIndex(j)
			c.textHere(v, MaxNameLen)
			c.pop()
		}
		c.pop()
		c.pop()
	}
	c.pop()
}

func (c *checker) policy(p *Policy) {
	c.pluginNames("filters", p.Filters, FilterNames)
	names := make([]string, len(p.Scorers))
	for i, s := range p.Scorers {
		names[i] = s.Name
	}
	c.push("scorers")
	for i, s := range p.Scorers {
		if s.Weight < 1 || s.Weight > MaxScorerWeight {
			c.pushIndex(i)
			c.badAtf("weight", "must be 1 to %d", MaxScorerWeight)
			c.pop()
		}
	}
	c.pop()
	c.pluginNames("scorers", names, ScorerNames)
}

// pluginNames checks a list of filter or scorer names against those known.
func (c *checker) pluginNames(field string, names, known []string) {
	c.push(field)
	if len(names) > MaxPluginRefs {
		c.badf("more than %d entries", MaxPluginRefs)
	}
	for i, n := range names {
		c.pushIndex(i)
		if field == "scorers" {
			c.push("name")
		}
		switch {
		case !slices.Contains(known, n):
			c.badf("unknown %s %q (known: %s)", strings.TrimSuffix(field, "s"), n, strings.Join(known, ", "))
		case slices.Contains(names[:i], n):
			c.badf("%q is listed twice", n)
		}
		if field == "scorers" {
			c.pop()
		}
		c.pop()
	}
	c.pop()
}

func (c *checker) retry(r *RetryPolicy) {
	if r.MaxAttempts < 1 || r.MaxAttempts > MaxAttempts {
		c.badAtf("max_attempts", "must be 1 to %d", MaxAttempts)
	}
	if r.Backoff < 0 {
		c.badAt("backoff", "must not be negative")
	}
	if r.MaxBackoff < r.Backoff {
		c.badAtf("max_backoff", "must be at least backoff (%s)", r.Backoff)
	}
}

// SetDefaults fills the fields a capbox request left empty with their
// documented defaults.
func (r *CapboxRequest) SetDefaults() { r.Resources.setDefaults() }

func (r *CapboxRequest) validate(c *checker) {
	c.name("name", r.Name, true)
	c.count(r.Count)
	c.push("resources")
	c.resources(&r.Resources)
	c.pop()
	c.constraints(r.Constraints)
	c.preferredNodes(r.PreferredNodes)
	c.idempotencyKey(r.IdempotencyKey)
}

// SetDefaults fills the fields a capbox task left empty with their
// documented defaults (those of its pod's containers).
func (t *CapTaskSpec) SetDefaults() { t.Pod.setDefaults() }

func (t *CapTaskSpec) validate(c *checker) {
	if t.Capbox == "" {
		c.badAt("capbox", "is required")
	} else if len(t.Capbox) > MaxCapboxIDLen {
		c.badAtf("capbox", "longer than %d bytes", MaxCapboxIDLen)
	}
	c.name("name", t.Name, true)
	c.push("pod")
	c.pod(&t.Pod)
	c.pop()
}

// ValidateCapTasks checks capbox tasks as DecodeCapTasks does.
func ValidateCapTasks(ts []CapTaskSpec) error {
	return validateItems(ts, "tasks", (*CapTaskSpec).validate)
}

func (c *checker) idempotencyKey(k string) {
	if len(k) > MaxIdempotencyKeyLen {
		c.badAtf("idempotency_key", "longer than %d bytes", MaxIdempotencyKeyLen)
	} else if strings.ContainsFunc(k, func(r rune) bool { return r <= ' ' || r > '~' }) {
		c.badAt("idempotency_key", "must be printable ASCII without spaces")
	}
}

func (c *checker) labels(field string, m map[string]string) {
	c.push(field)
	if len(m) > MaxLabels {
		c.badf("more than %d labels", MaxLabels)
	}
	for _, k := range c.sortedKeys(m) {
		c.pushKey(k)
		c.labelKey(k)
		c.textHere(m[k], MaxNameLen)
		c.pop()
	}
	c.pop()
}

func (c *checker) labelKey(k string) {
	switch {
	case k == "":
		c.bad("label key must not be empty")
	case len(k) > MaxLabelKeyLen:
		c.badf("label key longer than %d bytes", MaxLabelKeyLen)
	case !isAlnum(k[0]) || strings.ContainsFunc(k, func(r rune) bool { return !isAlnumRune(r) && !strings.ContainsRune("-_./", r) }):
		c.bad("label key must be letters, digits, '-', '_', '.' and '/', starting with a letter or digit")
	}
}

// name checks a name field: letters, digits, '-', '_' and '.', starting
// with a letter or digit.
func (c *checker) name(field, v string, required bool) {
	if msg := nameProblem(v, required); msg != "" {
		c.badAt(field, msg)
	}
}

// CheckName reports what is wrong with v as a name (of a node, pool,
// group or container), or nil: 1 to MaxNameLen letters, digits, '-', '_'
// and '.', starting with a letter or digit.
func CheckName(v string) error {
	if msg := nameProblem(v, true); msg != "" {
		return errors.New(msg)
	}
	return nil
}

// nameProblem says what is wrong with a name, or returns "".
func nameProblem(v string, required bool) string {
	switch {
	case v == "":
		if required {
			return "is required"
		}
	case len(v) > MaxNameLen:
		return fmt.Sprintf("longer than %d bytes", MaxNameLen)
	case !validName(v):
		return fmt.Sprintf("%q must be letters, digits, '-', '_' and '.', starting with a letter or digit", v)
	}
	return ""
}

// nameByte marks the bytes a name may hold after its first.
var nameByte = func() (t [256]bool) {
	for c := range 256 {
		t[c] = isAlnum(byte(c)) || c == '-' || c == '_' || c == '.'
	}
	return t
}()

func validName(s string) bool {
	if !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !nameByte[s[i]] {
			return false
		}
	}
	return true
}

func validEnvName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; !isAlnum(b) && b != '_' {
			return false
		}
	}
	return len(s) <= MaxNameLen
}

func isAlnum(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

func isAlnumRune(r rune) bool { return r < 0x80 && isAlnum(byte(r)) }

// hasControl reports whether s holds an ASCII control character. Bytes of
// multi-byte UTF-8 sequences are all 0x80 or above, so a byte scan is exact.
func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// absPath checks an optional absolute path field.
func (c *checker) absPath(field, p string) {
	switch {
	case p == "":
	case p[0] != '/':
		c.badAtf(field, "%q must be an absolute path", p)
	case len(p) > MaxStringLen:
		c.badAtf(field, "longer than %d bytes", MaxStringLen)
	case hasControl(p):
		c.badAt(field, "must not contain control characters")
	}
}

// hostPath checks an optional path on the node's host, such as an image's:
// absolute, as absPath, and also clean (no empty, "." or ".." element, no
// trailing slash), so that it names what it spells, and not the host's
// root "/". A node confines such paths to its own roots besides; a path
// that could climb out of one is refused here, at submit. It reports
// whether p passed.
func (c *checker) hostPath(field, p string) bool {
	if p == "" || p[0] != '/' || len(p) > MaxStringLen || hasControl(p) {
		c.absPath(field, p)
		return p == ""
	}
	if msg := hostPathProblem(p); msg != "" {
		c.badAt(field, msg)
		return false
	}
	return true
}

// hostPathProblem says what is wrong with absolute path p as a host path,
// or returns "". It allocates nothing for a good path: path.Clean returns
// a clean path as it is.
func hostPathProblem(p string) string {
	clean := path.Clean(p)
	switch {
	case clean == p && p != "/":
		return ""
	case slices.Contains(strings.Split(p, "/"), ".."):
		return `must not contain ".."`
	case clean == "/":
		return `must not be the host's root "/"`
	}
	return fmt.Sprintf("%q must be a clean path, such as %q", p, clean)
}

func (c *checker) texts(field string, vs []string) {
	for i, v := range vs {
		if msg := textProblem(v, MaxStringLen); msg != "" {
			c.push(field)
			c.pushIndex(i)
			c.bad(msg)
			c.pop()
			c.pop()
		}
	}
}

func (c *checker) text(field, v string, limit int) {
	if msg := textProblem(v, limit); msg != "" {
		c.badAt(field, msg)
	}
}

// textHere checks a free-form string at the current path.
func (c *checker) textHere(v string, limit int) {
	if msg := textProblem(v, limit); msg != "" {
		c.bad(msg)
	}
}

// textProblem says what is wrong with a free-form string, or returns "": it
// must be bounded and free of NUL bytes, which no process argument or
// environment can carry.
func textProblem(v string, limit int) string {
	switch {
	case len(v) > limit:
		return fmt.Sprintf("longer than %d bytes", limit)
	case strings.IndexByte(v, 0) >= 0:
		return "must not contain NUL bytes"
	}
	return ""
}

// sortedKeys returns m's keys in order, in a buffer the next call reuses:
// a caller is done with them before it calls again.
func (c *checker) sortedKeys(m map[string]string) []string {
	keys := c.keys[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	c.keys = keys
	return keys
}

// badAt records a problem at field of the current path.
func (c *checker) badAt(field, msg string) {
	c.push(field)
	c.bad(msg)
	c.pop()
}

func (c *checker) badAtf(field, format string, args ...any) {
	c.badAt(field, fmt.Sprintf(format, args...))
}

// bad records a problem at the current path unless the decoder already
// reported one there.
func (c *checker) bad(msg string) {
	if !c.covered() {
		c.add(msg)
	}
}

func (c *checker) badf(format string, args ...any) { c.bad(fmt.Sprintf(format, args...)) }

// simUsage checks a simulated pod's usage: within what a node's usage
// may report.
func (c *checker) simUsage(u *SimUsage) {
	c.amount("cpu", u.CPU, 0, maxUsageCPU, "millicores")
	c.amount("memory", u.Memory, 0, maxUsageMemory, "bytes")
	p := u.Peak
	if p == nil {
		return
	}
	c.push("peak")
	c.amount("cpu", p.CPU, 0, maxUsageCPU, "millicores")
	c.amount("memory", p.Memory, 0, maxUsageMemory, "bytes")
	if p.Period <= 0 {
		c.badAt("period", "must be positive")
	}
	switch {
	case p.Length <= 0:
		c.badAt("length", "must be positive")
	case p.Length >= p.Period:
		c.badAtf("length", "must be shorter than the period (%v)", p.Period)
	}
	c.pop()
}
