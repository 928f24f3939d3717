package placement

import (
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/api"
)

// portsKey is a canonical string of sorted keys, for class keys: "" for
// none, so that groups without static ports pay nothing for it.
func portsKey(ks []api.PortKey) string {
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
func portsFree(ks []api.PortKey, n *Node) bool {
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
