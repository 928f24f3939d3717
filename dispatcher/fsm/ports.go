package fsm

import (
	"cmp"
	"fmt"
	"net"
	"slices"

	"github.com/sluicehq/sluice/api"
)

// Ports. A group whose pod asks for ports lists them (group.ports, in the
// order the pod's containers list them, a dynamic one with number 0) and
// its static ones sorted (group.static); a group without ports has
// neither, and nothing below costs it anything. When a plan places a
// task of such a group, its static ports must be free on the node and
// its dynamic ones are assigned there and then: each the lowest port of
// the node's range free for its protocol, so every replica assigns the
// same. The task keeps the numbers (task.ports, by the group's order) in
// its record; its node counts them in use (node.ports) while the task is
// active, and Load counts them again from the active tasks' records. A
// capbox's placeholder is a task like any other: it holds the ports of
// its request's resources. A capbox task asks for none of its own
// (StartCapTasks refuses one that does).

// podPorts returns the ports of pod in order (static and, with number 0,
// dynamic); nil for a pod without any.
func podPorts(pod *api.PodSpec) []api.PortKey {
	var all []api.PortKey
	for i := range pod.Containers {
		for _, p := range pod.Containers[i].Resources.Ports {
			all = append(all, api.MakePortKey(p.Port, p.Protocol))
		}
	}
	return all
}

// setPorts sets g's ports from its pod's list in order (podPorts).
func (g *group) setPorts(all []api.PortKey) {
	g.ports, g.static = all, nil
	for _, k := range all {
		if k.Port() != 0 {
			g.static = append(g.static, k)
		}
	}
	slices.Sort(g.static)
}

// nodePorts are the ports in use on a node: by its active tasks, static
// and assigned. inRange counts those in the node's range (of either
// protocol): the range's size less inRange is how many dynamic ports the
// node can surely still assign for each protocol.
type nodePorts struct {
	used    map[api.PortKey]struct{}
	inRange int64
	// low holds, by protocol (lowIndex), a port of the node's range below
	// which every port of the range is in use (0: its first), where the
	// search for the lowest free one starts: without it, a node's n-th
	// dynamic port would look at the n-1 before it, and filling a node
	// would take time quadratic in its tasks.
	low [2]int32
}

// lowIndex is k's protocol's index in nodePorts.low.
func lowIndex(k api.PortKey) int {
	if k.Protocol() == api.ProtocolUDP {
		return 1
	}
	return 0
}

// portsFree returns how many dynamic ports n can still assign.
func (n *node) portsFree() int64 {
	free := n.spec.Ports.Size()
	if n.ports != nil {
		free -= n.ports.inRange
	}
	return max(free, 0)
}

// portInUse reports whether k is in use on n.
func (n *node) portInUse(k api.PortKey) bool {
	if n.ports == nil {
		return false
	}
	_, ok := n.ports.used[k]
	return ok
}

// portsShortfall says why k tasks of g do not get their ports on n, or
// returns "".
func (n *node) portsShortfall(g *group, k int64) string {
	r := n.spec.Ports
	switch {
	case r.Size() == 0:
		return fmt.Sprintf("node %s has no port range", n.spec.Name)
	case len(g.static) > 0 && k > 1:
		return fmt.Sprintf("%d tasks with static ports on node %s", k, n.spec.Name)
	}
	// The task's static ports in the range take room there too.
	need := k * int64(len(g.ports)-len(g.static))
	for _, p := range g.static {
		if n.portInUse(p) {
			return fmt.Sprintf("port %s in use on node %s", p, n.spec.Name)
		}
		if r.Contains(p.Port()) {
			need++
		}
	}
	if free := n.portsFree(); need > free {
		return fmt.Sprintf("node %s: %d ports of range %s free, %d tasks need %d of it", n.spec.Name, free, r, k, need)
	}
	return ""
}

// takePorts puts the ports of a task of g on n in use, assigning its
// dynamic ones, and returns their numbers in g's order. portsShortfall
// found them free.
func (n *node) takePorts(g *group) []uint16 {
	if n.ports == nil {
		n.ports = &nodePorts{used: make(map[api.PortKey]struct{}, len(g.ports))}
	}
	out := make([]uint16, len(g.ports))
	// Static ports first, so that no dynamic one takes the number of a
	// static one of the same pod.
	for i, k := range g.ports {
		if k.Port() != 0 {
			out[i] = uint16(k.Port())
			n.usePort(k)
		}
	}
	r := n.spec.Ports
	for i, k := range g.ports {
		if k.Port() != 0 {
			continue
		}
		// The ports of the range below low are all in use.
		low := &n.ports.low[lowIndex(k)]
		for p := max(int32(r.Lo), *low); p <= int32(r.Hi); p++ {
			if c := api.MakePortKey(p, k.Protocol()); !n.portInUse(c) {
				out[i] = uint16(p)
				n.usePort(c)
				*low = p + 1
				break
			}
		}
	}
	return out
}

// usePort counts k in use on n.
func (n *node) usePort(k api.PortKey) {
	if n.ports == nil {
		n.ports = &nodePorts{used: map[api.PortKey]struct{}{}}
	}
	n.ports.used[k] = struct{}{}
	if n.spec.Ports.Contains(k.Port()) {
		n.ports.inRange++
	}
}

// holdPorts counts the ports of t, a task of g, in use on n again (Load).
func (n *node) holdPorts(g *group, t *task) error {
	if len(t.ports) != len(g.ports) {
		return fmt.Errorf("%w: task %s holds %d ports, its pod has %d", ErrCorrupt, taskID(t.key, t.attempt), len(t.ports), len(g.ports))
	}
	for i, p := range t.ports {
		k := api.MakePortKey(int32(p), g.ports[i].Protocol())
		if p == 0 || n.portInUse(k) {
			return fmt.Errorf("%w: task %s: port %s on node %s is 0 or held twice", ErrCorrupt, taskID(t.key, t.attempt), k, n.spec.Name)
		}
		n.usePort(k)
	}
	return nil
}

// releasePorts takes the ports of t, a task of g ending on n, out of use.
func (n *node) releasePorts(g *group, t *task) {
	for i, p := range t.ports {
		k := api.MakePortKey(int32(p), g.ports[i].Protocol())
		delete(n.ports.used, k)
		if n.spec.Ports.Contains(k.Port()) {
			n.ports.inRange--
			low := &n.ports.low[lowIndex(k)]
			*low = min(*low, k.Port())
		}
	}
	if len(n.ports.used) == 0 {
		n.ports = nil
	}
}

// recountPorts counts again the ports in use in n's range, which a
// registration may have changed.
func (n *node) recountPorts() {
	if n.ports == nil {
		return
	}
	n.ports.inRange, n.ports.low = 0, [2]int32{}
	for k := range n.ports.used {
		if n.spec.Ports.Contains(k.Port()) {
			n.ports.inRange++
		}
	}
}

// portsInUse returns the ports in use on n, sorted; nil for none.
func (n *node) portsInUse() []api.PortKey {
	if n.ports == nil {
		return nil
	}
	ks := make([]api.PortKey, 0, len(n.ports.used))
	for k := range n.ports.used {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// apiPorts returns the ports of a task of pod, numbered as assigned
// (ports, in the pod's order); nil when it has none.
func apiPorts(pod *api.PodSpec, ports []uint16) []api.Port {
	if len(ports) == 0 {
		return nil
	}
	out := make([]api.Port, 0, len(ports))
	for i := range pod.Containers {
		for _, p := range pod.Containers[i].Resources.Ports {
			if len(out) == len(ports) {
				return out
			}
			out = append(out, api.Port{Name: p.Name, Port: int32(ports[len(out)]), Protocol: cmp.Or(p.Protocol, api.ProtocolTCP)})
		}
	}
	return out
}

// listingHost is where a client reaches the ports of a task on node n
// (api.TaskStatus.Host): its host IP, else its address's host.
func listingHost(n *api.NodeSpec) string {
	if n.HostIP != "" {
		return n.HostIP
	}
	return addressHost(n.Address)
}

// addressHost returns the host of a node's address (host:port; an IPv6
// host without its brackets), or "".
func addressHost(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	return host
}

// checkCapTaskPorts refuses a capbox task's pod that asks for ports: a
// capbox holds those of its request's resources, and its tasks none of
// their own.
func checkCapTaskPorts(pod *api.PodSpec) error {
	if podPorts(pod) != nil {
		return fmt.Errorf("%w: a capbox task cannot ask for ports of its own (ask for them in the capbox request's resources)", ErrNoRoom)
	}
	return nil
}
