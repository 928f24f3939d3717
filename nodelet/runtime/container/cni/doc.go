// Package cni attaches pods' network namespaces to the node's pod network
// through the standard CNI plugins (Debian's containernetworking-plugins),
// driven by libcni: bridge-mode pods of the container runtime.
//
// # Configuration
//
// The network is the first configuration list (*.conflist) in
// Config.ConfDir, used as it is. When there is none, New writes ConfFile
// there (DefaultConfList): a bridge Config.Bridge that is the pods'
// gateway at the first address of Config.PodCIDR and hairpins (a pod
// reaches itself through a mapped port); host-local addresses from the
// subnet, reserved in Config.StateDir/ipam; portmap for the pods' ports
// (the portMappings capability); loopback. For that list New also makes
// the bridge, with the gateway's address, and one iptables rule that
// masquerades the subnet's traffic leaving it (Masquerade), in place of
// the bridge plugin's ipMasq, which makes a chain of rules per pod: about
// six iptables runs per start and four per removal, each serialised on
// the xtables lock, which doubled a pod's start. New checks that every
// plugin the list names is installed in Config.BinDirs, and that the pod
// subnet overlaps no route or address of the host other than the
// bridge's own: two networks over one subnet would each lose traffic to
// the other. RemoveNetwork undoes the bridge and the rule.
//
// That network is IPv4 only, and IPv6 is off on its bridge and, before
// ADD, for the interfaces made in each pod's namespace: every interface
// that starts IPv6 sends neighbour discovery and multicast reports, which
// the bridge floods to every pod, so a start cost more the more pods the
// node ran (at 300 pods, IPv6 was a sixth of the CPU of a burst of starts).
//
// A pod without ports runs the list without portmap (which would map
// nothing) and loopback (the pod's sandbox brings lo up itself): each
// plugin is a process started for every ADD and DEL.
//
// # Pods
//
// Attach pins the pod's network namespace (that of its sandbox process)
// by a bind mount on Config.StateDir/netns/<pod ID>, as `ip netns` does,
// and runs ADD on that path. The pin keeps the namespace, and so the pod's
// veth, until Detach, even after every process of the pod has ended, so
// that DEL always finds the interface and its addresses: the bridge plugin
// derives the masquerade rules it removes from them, and without the
// namespace they would stay. Detach runs DEL (releasing the address, the
// masquerade and port rules and the veth) and removes the pin. A failed
// Attach undoes itself. Pinned lists the pins, so that a runtime restarted
// after a crash finds pods whose state is gone and detaches them
// (CachedPorts gives the ports to remove from the plugins' cache).
//
// # Invariants
//
//   - After Detach of every attached pod, the network holds no veth on the
//     bridge, no address reservation, no iptables rule naming a pod, and
//     no pinned namespace.
//   - Detach is idempotent.
package cni
