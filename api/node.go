package api

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// NodeState is whether a node takes new work.
type NodeState string

// Node states.
const (
	// NodeReady nodes take new work.
	NodeReady NodeState = "ready"
	// NodeDraining nodes keep running what they have and take nothing new.
	NodeDraining NodeState = "draining"
	// NodeDown nodes missed their heartbeat deadline; their tasks are lost
	// and retried elsewhere.
	NodeDown NodeState = "down"
)

// NodeStates are the node states, in the order of the list above.
var NodeStates = []NodeState{NodeReady, NodeDraining, NodeDown}

// Capacity is an amount of every resource dimension a node has.
type Capacity struct {
	// CPU in millicores.
	CPU int64 `json:"cpu"`
	// Memory in bytes.
	Memory int64 `json:"memory"`
	// GPUs is the number of whole GPUs.
	GPUs int64 `json:"gpus,omitempty"`
	// Disk in bytes.
	Disk int64 `json:"disk,omitempty"`
	// Ports is the number of ports the node can hand out: the size of
	// its NodeSpec.Ports range. A task's demand counts its dynamic ports
	// (Port 0) here; its static ports are checked one by one against
	// the ports in use on the node.
	Ports int64 `json:"ports,omitempty"`
}

// Allocatable splits what a node offers between the two QoS tiers. Online is
// guaranteed; Offline is what offline work may be allocated in total, which
// may exceed what online leaves free (overcommit), since offline work borrows
// what online work leaves idle.
type Allocatable struct {
	Online  Capacity `json:"online"`
	Offline Capacity `json:"offline"`
}

// Plus returns c plus k times d in every dimension (k may be negative).
func (c Capacity) Plus(d Capacity, k int64) Capacity {
	c.CPU += k * d.CPU
	c.Memory += k * d.Memory
	c.GPUs += k * d.GPUs
	c.Disk += k * d.Disk
	c.Ports += k * d.Ports
	return c
}

// AddTier adds k times d to the tier that work of class q draws on.
func (a *Allocatable) AddTier(q QoS, d Capacity, k int64) {
	if q == QoSOnline {
		a.Online = a.Online.Plus(d, k)
	} else {
		a.Offline = a.Offline.Plus(d, k)
	}
}

// NodeSpec is what a nodelet advertises when it joins.
type NodeSpec struct {
	// Name identifies the node in the cluster; it is unique.
	Name string `json:"name"`
	// Address is where the nodelet serves logs, host:port (CheckAddress):
	// the dispatcher builds every request to the node from its parts, and
	// nothing else of it.
	Address string `json:"address,omitempty"`
	// HostIP is the node's IP address as other hosts and the node's own
	// pods reach it, where a client finds a task's Ports: the task
	// listing's host (TaskStatus.Host) when set, in place of Address's
	// host, which may be loopback (a pod's own, inside a bridge-mode pod).
	// It is never loopback or unspecified. Empty: the listing shows
	// Address's host, as for a node registered before the field was.
	HostIP string `json:"host_ip,omitempty"`
	// LogToken is the bearer token the node's log server requires of the
	// dispatcher, a secret the nodelet makes for itself (NewLogToken): one
	// node's logs are no other node's to read. The dispatcher keeps it and
	// never shows it in a node list.
	LogToken string `json:"log_token,omitempty"`
	// Pool is the node's pool. Empty is the default pool.
	Pool string `json:"pool,omitempty"`
	// Labels are matched by job constraints.
	Labels map[string]string `json:"labels,omitempty"`
	// Capacity is what the host has.
	Capacity Capacity `json:"capacity"`
	// Allocatable is what the host offers to each tier.
	Allocatable Allocatable `json:"allocatable"`
	// Ports is the range the node assigns dynamic ports from. A node
	// without one (the zero range) takes no pod that asks for a port,
	// static or dynamic; a node with one takes static ports anywhere in
	// 1..65535 that are free on it, within its range or not.
	Ports PortRange `json:"ports,omitzero"`
}

// PortRange is a range of ports, Lo to Hi inclusive; the zero range is
// empty.
type PortRange struct {
	Lo uint16 `json:"lo"`
	Hi uint16 `json:"hi"`
}

// DefaultPortRange is the range a nodelet offers unless told otherwise.
var DefaultPortRange = PortRange{Lo: 20000, Hi: 32767}

// Size is the number of ports in r.
func (r PortRange) Size() int64 {
	if r.Lo == 0 || r.Hi < r.Lo {
		return 0
	}
	return int64(r.Hi) - int64(r.Lo) + 1
}

// Contains reports whether port p is in r.
func (r PortRange) Contains(p int32) bool {
	return r.Lo != 0 && p >= int32(r.Lo) && p <= int32(r.Hi)
}

func (r PortRange) String() string {
	return strconv.Itoa(int(r.Lo)) + "-" + strconv.Itoa(int(r.Hi))
}

// ParsePortRange reads "LO-HI", 1 <= LO <= HI <= 65535.
func ParsePortRange(s string) (PortRange, error) {
	lo, hi, ok := strings.Cut(s, "-")
	if !ok {
		return PortRange{}, fmt.Errorf("port range %q: want LO-HI", clipName(s))
	}
	var r PortRange
	for _, x := range []struct {
		s string
		p *uint16
	}{{lo, &r.Lo}, {hi, &r.Hi}} {
		if err := checkPort(x.s); err != nil {
			return PortRange{}, fmt.Errorf("port range %q: %w", clipName(s), err)
		}
		n, _ := strconv.ParseUint(x.s, 10, 16)
		*x.p = uint16(n)
	}
	if r.Hi < r.Lo {
		return PortRange{}, fmt.Errorf("port range %q: %d is below %d", clipName(s), r.Hi, r.Lo)
	}
	return r, nil
}

// Usage is what a node, tier or pod uses right now.
type Usage struct {
	// CPU in millicores, averaged over the last sample period.
	CPU int64 `json:"cpu"`
	// Memory in bytes (resident, without page cache).
	Memory int64 `json:"memory"`
}

// NodeUsage is a node's usage, in total and per tier, and per running
// task for the dispatcher's usage estimates.
type NodeUsage struct {
	Total   Usage       `json:"total"`
	Online  Usage       `json:"online"`
	Offline Usage       `json:"offline"`
	Tasks   []TaskUsage `json:"tasks,omitempty"`
	// Overcommit is what the node's overcommit controller last decided
	// for the offline tier. Nil on a node that runs none (the simulated
	// runtime), and from nodelets older than the field.
	Overcommit *OvercommitStatus `json:"overcommit,omitempty"`
}

// OvercommitStatus is the offline tier's quota as a node's overcommit
// controller last set it: the CPU quota between its floor and ceiling,
// and the memory limit above the guarantee. The online tier has no limit.
// A valid status has CPUMin <= CPUQuota <= CPUMax and MemoryGuaranteed <=
// MemoryLimit.
type OvercommitStatus struct {
	// CPUQuota is the offline tier's CPU quota in millicores; CPUMin and
	// CPUMax the floor and the ceiling it moves between.
	CPUQuota int64 `json:"cpu_quota"`
	CPUMin   int64 `json:"cpu_min"`
	CPUMax   int64 `json:"cpu_max"`
	// MemoryLimit is the offline tier's memory limit in bytes, and
	// MemoryGuaranteed the part of it the offline pods' requests are
	// guaranteed; the rest is lent from what online pods leave idle.
	MemoryLimit      int64 `json:"memory_limit"`
	MemoryGuaranteed int64 `json:"memory_guaranteed"`
	// Decided is when the controller decided, by the node's clock.
	Decided time.Time `json:"decided"`
}

// TaskUsage is one running task's usage on its node.
type TaskUsage struct {
	TaskID string `json:"task_id"`
	// QoS is the tier the task runs in.
	QoS QoS `json:"qos"`
	Usage
}

// NodeStatus is what the dispatcher knows of a node.
type NodeStatus struct {
	Spec  NodeSpec  `json:"spec"`
	State NodeState `json:"state"`
	// Usage is from the node's last heartbeat.
	Usage NodeUsage `json:"usage"`
	// LastHeartbeat is when the dispatcher last heard from the node.
	LastHeartbeat time.Time `json:"last_heartbeat,omitzero"`
	// Generation is the newest target generation the node acknowledged.
	Generation uint64 `json:"generation"`
}

// TaskReason says why a task changed state, for reports and people.
type TaskReason string

// Reasons a nodelet gives in its task reports.
const (
	ReasonStarted      TaskReason = "started"       // the pod is running
	ReasonExited       TaskReason = "exited"        // the pod exited on its own; see ExitCode
	ReasonOOMKilled    TaskReason = "oom_killed"    // the kernel killed it at its memory limit
	ReasonMemoryKiller TaskReason = "memory_killer" // the nodelet killed it to free host memory
	ReasonStartFailed  TaskReason = "start_failed"  // the pod could not be started; see Message
	ReasonStopped      TaskReason = "stopped"       // stopped because the dispatcher no longer wants it
	ReasonTimeLimit    TaskReason = "time_limit"    // ran longer than its job's MaxRunTime
	ReasonLost         TaskReason = "lost"          // the nodelet lost track of it
	// ReasonImageDenied: an image path of the pod (after symbolic links)
	// is not below one of the node's image roots; it never started.
	ReasonImageDenied TaskReason = "image_denied"
	// ReasonNetworkDenied: the pod asks for a network mode its node does
	// not allow (the host's, on a node not started to allow it); it never
	// started.
	ReasonNetworkDenied TaskReason = "network_denied"
	// ReasonVolumeDenied: a host path volume of the pod is not below one
	// of the node's volume roots (after symbolic links), or is writable
	// below a read-only one; it never started.
	ReasonVolumeDenied TaskReason = "volume_denied"
	// ReasonScratchFull: the pod failed with a scratch volume full, having
	// tried to write past its size.
	ReasonScratchFull TaskReason = "scratch_full"
)

// ReasonPreempted is the reason the dispatcher records for a task it
// stopped to make room for higher-priority work; nodes do not report it.
const ReasonPreempted TaskReason = "preempted"

// ReasonDrained is the reason the dispatcher records for a task it stopped
// at its node's drain deadline, to run again elsewhere; nodes do not
// report it.
const ReasonDrained TaskReason = "drained"

// TaskReport is a change of a task's state, as a nodelet reports it.
type TaskReport struct {
	// TaskID is the dispatcher's ID of the task.
	TaskID string `json:"task_id"`
	// State is the state the task moved to.
	State TaskState `json:"state"`
	// Reason says why.
	Reason TaskReason `json:"reason"`
	// ExitCode is the pod's exit code when it exited.
	ExitCode int32 `json:"exit_code,omitempty"`
	// Message is detail for people, such as a start error.
	Message string `json:"message,omitempty"`
	// Time is when the nodelet saw the change.
	Time time.Time `json:"time"`
	// Usage is the pod's usage at the time of the report.
	Usage Usage `json:"usage,omitzero"`
}

// Bounds of NodeSpec.LogToken.
const (
	MinLogTokenLen = 16
	MaxLogTokenLen = 128
)

// NewLogToken returns a fresh NodeSpec.LogToken: 32 random bytes,
// base64url.
func NewLogToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand's contract)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// validLogToken reports whether t may be a NodeSpec.LogToken: bytes that
// stand in a header as they are.
func validLogToken(t string) bool {
	if len(t) < MinLogTokenLen || len(t) > MaxLogTokenLen {
		return false
	}
	for i := range len(t) {
		if !nameByte[t[i]] {
			return false
		}
	}
	return true
}

// MaxAddressLen bounds a NodeSpec.Address: a DNS name's 253 bytes, a colon
// and a port.
const MaxAddressLen = 253 + 6

// CheckAddress reports what is wrong with addr as a node's address, or
// nil. An address is a host and a port and nothing else: the host an IPv4
// address, an IPv6 address in brackets (no zone) or a DNS name (labels of
// letters, digits and '-', not starting or ending with '-'); the port a
// decimal from 1 to 65535 without leading zeros. So no scheme, user,
// path, query or fragment can ride in an address into a URL built from it.
func CheckAddress(addr string) error {
	if len(addr) > MaxAddressLen {
		return fmt.Errorf("longer than %d bytes", MaxAddressLen)
	}
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return errors.New("must be host:port")
	}
	host, port := addr[:i], addr[i+1:]
	if err := checkPort(port); err != nil {
		return err
	}
	if strings.HasPrefix(host, "[") {
		ip, err := netip.ParseAddr(strings.TrimSuffix(host[1:], "]"))
		if !strings.HasSuffix(host, "]") || err != nil || !ip.Is6() || ip.Zone() != "" {
			return fmt.Errorf("host %q must be an IPv6 address in brackets, without a zone", clipName(host))
		}
		return nil
	}
	if strings.ContainsRune(host, ':') {
		return errors.New("an IPv6 host must be in brackets: [addr]:port")
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return nil // without a colon, only an IPv4 address parses
	}
	return checkHostname(host)
}

func checkPort(port string) error {
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 || port[0] == '0' {
		return fmt.Errorf("port %q must be a number from 1 to 65535", clipName(port))
	}
	return nil
}

// checkHostname checks a DNS name (RFC 1123 labels; a final dot allowed).
func checkHostname(h string) error {
	if !validHostname(strings.TrimSuffix(h, ".")) {
		return fmt.Errorf("host %q must be an IP address or a DNS name (letters, digits, '-' and '.')", clipName(h))
	}
	return nil
}

func validHostname(name string) bool {
	if name == "" || len(name) > 253 {
		return false
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for j := range len(label) {
			if !isAlnum(label[j]) && label[j] != '-' {
				return false
			}
		}
	}
	return true
}

// clipName shortens an untrusted string quoted in a message.
func clipName(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
