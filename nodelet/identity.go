package nodelet

import (
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet/runtime"
)

// identityEnv returns the environment the node gives every container of d
// (runtime.PodSpec's Env): the api.Env* variables, on node, with addr
// the dispatcher base URLs (none set when empty). A task's ID is
// job/group/index/attempt: index and attempt come from it. A capbox
// task's ID is its capbox's and its name: it gets api.EnvTaskName and
// api.EnvCapbox instead of the index, count and attempt. A pod whose task
// ID has another shape (not a dispatcher's) gets what its Group says. A
// capbox's placeholder runs no program and gets none. A pod of a group
// with a Token (an appmaster job's, not a capbox task) gets api.EnvToken.
//
// Each of d's Ports adds its api.PortEnvName variable, with its number on
// the node.
//
// The variables share one string: a pod start costs two allocations.
func identityEnv(node, addr, hostIP string, d *DesiredPod) []string {
	if d.Capbox {
		return nil
	}
	task := d.TaskID
	if task == "" {
		task = d.ID
	}
	var seg [5]string
	n := 0
	for rest, more := task, true; more; n++ {
		if n == len(seg) {
			n = 0 // more than five: no known shape
			break
		}
		seg[n], rest, more = strings.Cut(rest, "/")
	}
	if n != 4 && n != 5 || !digits(seg[1]) || !digits(seg[2]) || !digits(seg[3]) {
		n = 0
	}
	var g Group
	if d.Group != nil {
		g = *d.Group
	}
	if g.Job == "" && n > 0 {
		g.Job = seg[0]
	}
	var (
		b    strings.Builder
		ends [13]int
		k    int
	)
	b.Grow(180 + 2*len(task) + len(g.Job) + len(g.JobName) + len(g.Name) + len(node) + len(addr) + len(hostIP) + len(g.Token) + 32*len(d.Ports))
	add := func(name, value string) {
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(value)
		ends[k] = b.Len()
		k++
	}
	if g.Job != "" {
		add(api.EnvJobID, g.Job)
	}
	if g.JobName != "" {
		add(api.EnvJobName, g.JobName)
	}
	if g.Name != "" {
		add(api.EnvGroup, g.Name)
	}
	add(api.EnvTaskID, task)
	switch n {
	case 4:
		add(api.EnvTaskIndex, seg[2])
		if g.Count > 0 {
			add(api.EnvTaskCount, strconv.FormatInt(g.Count, 10))
		}
		add(api.EnvAttempt, seg[3])
	case 5:
		add(api.EnvTaskName, seg[4])
		add(api.EnvCapbox, task[:len(task)-len(seg[4])-1])
	}
	add(api.EnvNode, node)
	if addr != "" {
		add(api.EnvAddr, addr)
	}
	if hostIP != "" {
		add(api.EnvHostIP, hostIP)
	}
	if g.Token != "" && n != 5 {
		add(api.EnvToken, g.Token)
	}
	var portEnds []int
	for _, p := range d.Ports {
		b.WriteString(api.PortEnvName(p.Name))
		b.WriteByte('=')
		b.WriteString(strconv.Itoa(int(p.Port)))
		portEnds = append(portEnds, b.Len())
	}
	all := b.String()
	env := make([]string, k+len(portEnds))
	start := 0
	for i, end := range append(ends[:k], portEnds...) {
		env[i] = all[start:end]
		start = end
	}
	return env
}

// digits reports whether s is a number: one or more decimal digits.
func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// podAddr is addr, dispatcher base URLs separated by commas, as a pod in
// its own network namespace reaches them: each URL whose host is loopback
// (a loopback IP or "localhost") has hostIP as its host instead, keeping
// its port. Without hostIP, or with no such URL, it is addr.
func podAddr(addr, hostIP string) string {
	if hostIP == "" || addr == "" {
		return addr
	}
	urls := strings.Split(addr, ",")
	changed := false
	for i, raw := range urls {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil || u.Host == "" {
			continue
		}
		h := u.Hostname()
		ip, err := netip.ParseAddr(h)
		if h != "localhost" && (err != nil || !ip.IsLoopback()) {
			continue
		}
		if p := u.Port(); p != "" {
			u.Host = net.JoinHostPort(hostIP, p)
		} else if strings.Contains(hostIP, ":") {
			u.Host = "[" + hostIP + "]"
		} else {
			u.Host = hostIP
		}
		urls[i] = u.String()
		changed = true
	}
	if !changed {
		return addr
	}
	return strings.Join(urls, ",")
}

// portMappings returns the runtime's mappings of a pod's ports, nil for
// none. The dispatcher numbered them in 1..65535.
func portMappings(ports []api.Port) []runtime.PortMapping {
	if len(ports) == 0 {
		return nil
	}
	out := make([]runtime.PortMapping, len(ports))
	for i, p := range ports {
		out[i] = runtime.PortMapping{Name: p.Name, Port: uint16(p.Port), Protocol: p.Protocol}
	}
	return out
}
