package nodelet_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet"
	"github.com/sluicehq/sluice/nodelet/runtime"
	"github.com/sluicehq/sluice/nodelet/runtime/sim"
)

// TestPortEnv: a pod's ports, as the dispatcher placed them, reach the
// runtime as its PortMappings and every container's environment as
// SLUICE_PORT_<NAME> (upper-cased, '-' and '.' made '_'), after the
// identity; pods of one group sharing their api spec each get their own
// numbers; a pod without ports gets neither.
func TestPortEnv(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	d := newFakeDispatcher()
	newHarness(t, host, d, nil)

	group := &nodelet.Group{Job: "j1", JobName: "srv", Name: "web", Count: 2}
	a := simPod("a", 1, 0, 0)
	a.TaskID, a.Group = "j1/0/0/1", group
	a.Ports = []api.Port{{Name: "http-alt", Port: 20000, Protocol: "tcp"}, {Name: "dns.v2", Port: 53, Protocol: "udp"}}
	b := simPod("b", 1, 0, 0)
	b.TaskID, b.Group, b.Pod = "j1/0/1/1", group, a.Pod // one group's pods share their spec's memory
	b.Ports = []api.Port{{Name: "http-alt", Port: 20001, Protocol: "tcp"}, {Name: "dns.v2", Port: 53, Protocol: "udp"}}
	plain := simPod("plain", 1, 0, 0)
	plain.TaskID = "j2/0/0/1"
	d.setTarget(1, a, b, plain)

	rt := sim.New(host)
	eventually(t, 5*time.Second, "every pod running", func() bool { return len(running(t, rt)) == 3 })
	for id, want := range map[string]struct {
		env  []string
		maps []runtime.PortMapping
	}{
		"a": {[]string{"SLUICE_PORT_HTTP_ALT=20000", "SLUICE_PORT_DNS_V2=53"},
			[]runtime.PortMapping{{Name: "http-alt", Port: 20000, Protocol: "tcp"}, {Name: "dns.v2", Port: 53, Protocol: "udp"}}},
		"b": {[]string{"SLUICE_PORT_HTTP_ALT=20001", "SLUICE_PORT_DNS_V2=53"},
			[]runtime.PortMapping{{Name: "http-alt", Port: 20001, Protocol: "tcp"}, {Name: "dns.v2", Port: 53, Protocol: "udp"}}},
		"plain": {nil, nil},
	} {
		spec, err := rt.Spec(id)
		if err != nil {
			t.Fatalf("Spec(%s): %v", id, err)
		}
		var ports []string
		for _, kv := range spec.Env {
			if strings.HasPrefix(kv, api.EnvPortPrefix) {
				ports = append(ports, kv)
			}
		}
		if !slices.Equal(ports, want.env) || !slices.Equal(spec.Ports, want.maps) {
			t.Errorf("pod %s: port env %q, mappings %+v; want %q, %+v", id, ports, spec.Ports, want.env, want.maps)
		}
		if !slices.Contains(spec.Env, "SLUICE_TASK_ID="+map[string]string{"a": "j1/0/0/1", "b": "j1/0/1/1", "plain": "j2/0/0/1"}[id]) {
			t.Errorf("pod %s: the identity is gone: %q", id, spec.Env)
		}
	}
}

// TestPortMappingValidate: a runtime refuses a mapping of port 0, of an
// unknown protocol, or of one port twice.
func TestPortMappingValidate(t *testing.T) {
	base := runtime.PodSpec{ID: "p", Containers: []runtime.ContainerSpec{{Name: "c", Image: api.Image{Rootfs: "/img"}, Args: []string{"/x"}}}}
	for _, tc := range []struct {
		ports []runtime.PortMapping
		want  string
	}{
		{[]runtime.PortMapping{{Name: "a", Port: 0, Protocol: "tcp"}}, "ports[0].port"},
		{[]runtime.PortMapping{{Name: "a", Port: 80, Protocol: "sctp"}}, "ports[0].protocol"},
		{[]runtime.PortMapping{{Name: "a", Port: 80, Protocol: "tcp"}, {Name: "b", Port: 80, Protocol: "udp"}, {Name: "c", Port: 80, Protocol: "tcp"}}, "ports[2].port: tcp port 80 is mapped twice"},
	} {
		s := base
		s.Ports = tc.ports
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ports %+v: %v; want a problem %q", tc.ports, err, tc.want)
		}
	}
	s := base
	s.Ports = []runtime.PortMapping{{Name: "a", Port: 80, Protocol: "tcp"}, {Name: "b", Port: 80, Protocol: "udp"}}
	if err := s.Validate(); err != nil {
		t.Errorf("valid ports: %v", err)
	}
}
