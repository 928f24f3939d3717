package api

import (
	"slices"
	"strconv"
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
	if proto == ProtocolUDP {
		k |= udpBit
	}
	return k
}

// Port is k's number.
func (k PortKey) Port() int32 { return int32(uint16(k)) }

// Protocol is k's protocol.
func (k PortKey) Protocol() string {
	if k&udpBit != 0 {
		return ProtocolUDP
	}
	return ProtocolTCP
}

func (k PortKey) String() string { return strconv.Itoa(int(k.Port())) + "/" + k.Protocol() }

// StaticPorts returns the static ports of the pod (those with a number), as
// sorted keys; nil when it has none. The number of its dynamic ports is
// its Demand().Ports.
func (pod *PodSpec) StaticPorts() []PortKey {
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

// Demand returns what one task of the pod needs: the sum of its containers'
// resources, each dynamic port (number 0) counting one port, and its
// scratch volumes' sizes counting as disk. Its static ports are not
// counted (StaticPorts): they need their number free, not room in the
// node's range.
func (pod *PodSpec) Demand() Capacity {
	var d Capacity
	for _, c := range pod.Containers {
		d.CPU += c.Resources.CPU
		d.Memory += c.Resources.Memory
		d.GPUs += c.Resources.GPUs
		d.Disk += c.Resources.Disk
		for _, p := range c.Resources.Ports {
			if p.Port == 0 {
				d.Ports++
			}
		}
	}
	for _, v := range pod.Volumes {
		if v.Scratch != nil {
			d.Disk += v.Scratch.Size
		}
	}
	return d
}
