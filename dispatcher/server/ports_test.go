package server_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
)

// TestPortsEndToEnd: over HTTP, two jobs that want static port 8080 land
// on different nodes, a third waits; dynamic ports come from the node's
// range; a node polling with identity=1 gets each pod's ports, one
// without gets none; the job's task listing shows the node's host and
// the ports; a static port out of range or twice in a pod is a 400 with
// its field path.
func TestPortsEndToEnd(t *testing.T) {
	s := openOne(t, nil)
	base := s.Addr()
	for i, name := range []string{"n1", "n2"} {
		body := fmt.Sprintf(`{"name":%q,"address":"10.0.0.%d:7070","capacity":{"cpu":8000,"memory":8589934592,"ports":100},`+
			`"allocatable":{"online":{"cpu":8000,"memory":8589934592,"ports":100},"offline":{"cpu":8000,"memory":8589934592,"ports":100}},"ports":{"lo":20000,"hi":20099}}`, name, i+1)
		decode[api.RegisterResponse](t, do(t, req{method: "POST", url: base + api.PathNodes, body: []byte(body)}), 200)
	}
	job := func(name, ports string) string {
		return fmt.Sprintf(`{"name":%q,"tasks":[{"count":1,"pod":{"sim":{"run_time":"1h"},"containers":[{"image":{"rootfs":"/r"},"command":["x"],"resources":{"cpu":100,"memory":"1Mi","ports":%s}}]}}]}`, name, ports)
	}
	var ids []string
	for _, j := range []string{job("s1", `[{"name":"http","port":8080}]`), job("s2", `[{"name":"http","port":8080}]`), job("s3", `[{"name":"http","port":8080}]`),
		job("dyn", `[{"name":"web-ui"},{"name":"stats","protocol":"udp"}]`)} {
		ids = append(ids, submit(t, base, "", j, nil).Jobs[0])
	}

	// Targets with identity=1 carry the ports.
	pods := map[string]api.TargetPod{}
	waitFor(t, 20*time.Second, "three tasks placed", func() bool {
		clear(pods)
		for _, n := range []string{"n1", "n2"} {
			r := do(t, req{method: "GET", url: fmt.Sprintf("%s%s%s/target?wait=0s&identity=1", base, api.PathNode, n)})
			if r.status == 304 {
				continue // nothing placed on n yet: its target is generation 0
			}
			tg := decode[api.NodeTarget](t, r, 200)
			for _, p := range tg.Pods {
				pods[n+" "+p.TaskID] = p
			}
		}
		return len(pods) == 3
	})
	http := map[string]int{}
	for key, p := range pods {
		node, _, _ := strings.Cut(key, " ")
		if p.Job == ids[3] {
			if len(p.Ports) != 2 || p.Ports[0] != (api.Port{Name: "web-ui", Port: 20000, Protocol: "tcp"}) || p.Ports[1] != (api.Port{Name: "stats", Port: 20000, Protocol: "udp"}) {
				t.Errorf("dynamic pod %s ports %+v", key, p.Ports)
			}
			continue
		}
		if len(p.Ports) != 1 || p.Ports[0] != (api.Port{Name: "http", Port: 8080, Protocol: "tcp"}) {
			t.Errorf("static pod %s ports %+v", key, p.Ports)
		}
		http[node]++
	}
	if http["n1"] != 1 || http["n2"] != 1 {
		t.Fatalf("pods with static port 8080 by node: %v; want one on each", http)
	}
	// The third is pending, and says why.
	placed := map[string]bool{}
	for _, p := range pods {
		placed[p.Job] = true
	}
	i := slices.IndexFunc(ids[:3], func(id string) bool { return !placed[id] })
	if i < 0 {
		t.Fatalf("every static-port job placed: %v", placed)
	}
	waitFor(t, 10*time.Second, "the pending job's diagnosis", func() bool {
		st := decode[api.JobStatus](t, do(t, req{method: "GET", url: base + api.PathJob + ids[i]}), 200)
		return len(st.Pending) == 1 && strings.Contains(st.Pending[0].Reason, "ports ruled out 2")
	})

	// A poll without identity (a nodelet of the release before) gets no
	// ports.
	bare := decode[api.NodeTarget](t, do(t, req{method: "GET", url: fmt.Sprintf("%s%sn1/target?wait=0s", base, api.PathNode)}), 200)
	for _, p := range bare.Pods {
		if p.Ports != nil {
			t.Errorf("pod %s of a poll without identity has ports %+v", p.TaskID, p.Ports)
		}
	}

	// The task listing shows where to reach each task.
	list := decode[api.TaskList](t, do(t, req{method: "GET", url: base + api.PathJob + ids[3] + "/tasks"}), 200)
	if len(list.Tasks) != 1 || !strings.HasPrefix(list.Tasks[0].Host, "10.0.0.") || len(list.Tasks[0].Ports) != 2 || list.Tasks[0].Ports[0].Port != 20000 {
		t.Errorf("task list %+v", list)
	}

	// Refusals at submit, with field paths.
	for _, tc := range []struct{ ports, want string }{
		{`[{"name":"a","port":70000}]`, "jobs[0].tasks[0].pod.containers[0].resources.ports[0].port: must be 0 (assigned by the node) or a port from 1 to 65535"},
		{`[{"name":"a","port":-1}]`, "resources.ports[0].port: must be 0"},
		{`[{"name":"a","port":80},{"name":"b","port":80}]`, "resources.ports[1].port: 80/tcp is asked for twice in the pod"},
		{`[{"name":"a-b"},{"name":"a_b"}]`, "resources.ports[1].name: \"a_b\" has the environment name SLUICE_PORT_A_B"},
	} {
		r := do(t, req{method: "POST", url: base + api.PathJobs, body: []byte(job("bad", tc.ports))})
		errorReply(t, r, 400, api.CodeInvalid, tc.want)
	}
}

// TestPortsListingShowsHostIP: a node that registers a host IP (its
// address being loopback, a pod's own) has its tasks listed at that IP;
// a loopback or malformed host IP is a 400 naming host_ip.
func TestPortsListingShowsHostIP(t *testing.T) {
	s := openOne(t, nil)
	base := s.Addr()
	node := func(hostIP string) []byte {
		return fmt.Appendf(nil, `{"name":"n1","address":"127.0.0.1:7070","host_ip":%q,"capacity":{"cpu":8000,"memory":8589934592,"ports":100},`+
			`"allocatable":{"online":{"cpu":8000,"memory":8589934592,"ports":100},"offline":{"cpu":8000,"memory":8589934592,"ports":100}},"ports":{"lo":20000,"hi":20099}}`, hostIP)
	}
	for hostIP, want := range map[string]string{
		"127.0.0.1": "host_ip: 127.0.0.1 must be an address other hosts and the node's pods reach, not loopback",
		"node-1":    `host_ip: "node-1" is not an IP address`,
	} {
		errorReply(t, do(t, req{method: "POST", url: base + api.PathNodes, body: node(hostIP)}), 400, api.CodeInvalid, want)
	}
	decode[api.RegisterResponse](t, do(t, req{method: "POST", url: base + api.PathNodes, body: node("192.0.2.7")}), 200)
	id := submit(t, base, "", `{"name":"srv","tasks":[{"name":"server","count":1,"pod":{"sim":{"run_time":"1h"},"containers":[{"image":{"rootfs":"/r"},"command":["x"],"resources":{"cpu":100,"memory":"1Mi","ports":[{"name":"http"}]}}]}}]}`, nil).Jobs[0]
	var list api.TaskList
	waitFor(t, 20*time.Second, "the task placed", func() bool {
		list = decode[api.TaskList](t, do(t, req{method: "GET", url: base + api.PathJob + id + "/tasks"}), 200)
		return len(list.Tasks) == 1
	})
	if tk := list.Tasks[0]; tk.Host != "192.0.2.7" || len(tk.Ports) != 1 || tk.Ports[0].Port != 20000 {
		t.Errorf("listed task %+v; want host 192.0.2.7 and port 20000", tk)
	}
}
