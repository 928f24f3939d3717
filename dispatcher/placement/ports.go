package placement

import (
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/api"
)

// PortKey is a port number and its protocol as one value: the number in
// the low 16 bits, bit 16 set for UDP. Keys order by protocol, then
// number.
type PortKey uint32

const udpBit = 1 << 16

// MakePortKey returns the key of port p of protocol proto (anything but
// "udp" is TCP, the default).
func MakePortKey(p int32, proto string) PortKey {
	k := PortKey(uint16(p))
	if proto == api.ProtocolUDP {
		k |= udpBit
	}
	return k
}

// Port is k's number.
func (k PortKey) Port() int32 { return int32(uint16(k)) }

// Protocol is k's protocol.
func (k PortKey) Protocol() string {
	if k&udpBit != 0 {
		return api.ProtocolUDP
	}
	return api.ProtocolTCP
}

func (k PortKey) String() string { return strconv.Itoa(int(k.Port())) + "/" + k.Protocol() }

// StaticPorts returns the static ports of pod (those with a number), as
// sorted keys; nil when it has none. The number of its dynamic ports is
// Demand(pod).Ports.
func StaticPorts(pod api.PodSpec) []PortKey {
	var ks []PortKey
	for i := range pod.Containers {
		for _, p := range pod.Containers[i].Resources.Ports {
			if p.Port != 0 {
				ks = append(ks, MakePortKey(p.Port, p.Protocol))
			}
		}
	}
	slices.Sort(ks)
	return ks
}

// portsKey is a canonical string of sorted keys, for class keys: "" for
// none, so that groups without static ports pay nothing for it.
func portsKey(ks []PortKey) string {
	if len(ks) == 0 {
		return ""
	}
	var b strings.Builder
	for _, k := range ks {
		b.WriteString(strconv.FormatUint(uint64(k), 36))
		b.WriteByte(',')
	}
	return b.String()
}

// wantsPorts reports whether a task of g asks for any port.
func (g *Group) wantsPorts() bool { return g.Demand.Ports > 0 || len(g.StaticPorts) > 0 }

// portsFree reports whether none of ks is in use on n.
func portsFree(ks []PortKey, n *Node) bool {
	for _, k := range ks {
		if _, found := slices.BinarySearch(n.PortsInUse, k); found {
			return false
		}
	}
	return true
}

// portFilter admits the nodes with a port range on which the class's
// static ports are free. Registry.resolve gives it only to a class that
// asks for ports. The number of dynamic ports is a resource dimension
// (Capacity.Ports), which the resource filter checks.
type portFilter struct{}

func (portFilter) Name() string { return api.FilterPorts }
func (portFilter) Admit(c *Class, n *Node) bool {
	return n.PortRange.Size() > 0 && portsFree(c.StaticPorts, n)
}
