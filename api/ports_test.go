package api_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/api"
)

func TestParsePortRange(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want api.PortRange
		size int64
	}{
		{"20000-32767", api.DefaultPortRange, 12768},
		{"1-65535", api.PortRange{Lo: 1, Hi: 65535}, 65535},
		{"8080-8080", api.PortRange{Lo: 8080, Hi: 8080}, 1},
	} {
		got, err := api.ParsePortRange(tc.in)
		if err != nil || got != tc.want || got.Size() != tc.size || got.String() != tc.in {
			t.Errorf("ParsePortRange(%q) = %v (size %d), %v; want %v of size %d", tc.in, got, got.Size(), err, tc.want, tc.size)
		}
	}
	for _, in := range []string{"", "20000", "0-10", "10-0", "20-10", "1-65536", "a-b", "010-20", "-5", "5-"} {
		if got, err := api.ParsePortRange(in); err == nil || !strings.Contains(err.Error(), "port range") {
			t.Errorf("ParsePortRange(%q) = %v, %v; want an error naming the port range", in, got, err)
		}
	}
	r := api.PortRange{Lo: 100, Hi: 200}
	for p, want := range map[int32]bool{99: false, 100: true, 150: true, 200: true, 201: false, 0: false} {
		if r.Contains(p) != want {
			t.Errorf("%v.Contains(%d) = %v, want %v", r, p, !want, want)
		}
	}
	if (api.PortRange{}).Contains(0) || (api.PortRange{}).Size() != 0 {
		t.Errorf("the zero range holds ports")
	}
}

func TestPortEnvName(t *testing.T) {
	for in, want := range map[string]string{
		"http":        "SLUICE_PORT_HTTP",
		"http-alt":    "SLUICE_PORT_HTTP_ALT",
		"grpc.v2_x":   "SLUICE_PORT_GRPC_V2_X",
		"9p":          "SLUICE_PORT_9P",
		"Mixed-Case1": "SLUICE_PORT_MIXED_CASE1",
	} {
		if got := api.PortEnvName(in); got != want {
			t.Errorf("PortEnvName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPortKeys(t *testing.T) {
	pod := api.PodSpec{Containers: []api.ContainerSpec{
		{Resources: api.Resources{Ports: []api.Port{{Name: "a", Port: 8080, Protocol: "tcp"}, {Name: "b"}, {Name: "c", Port: 53, Protocol: "udp"}}}},
		{Resources: api.Resources{Ports: []api.Port{{Name: "d", Port: 53, Protocol: "tcp"}, {Name: "e", Protocol: "udp"}}}},
	}}
	want := []api.PortKey{api.MakePortKey(53, "tcp"), api.MakePortKey(8080, "tcp"), api.MakePortKey(53, "udp")}
	if got := pod.StaticPorts(); !reflect.DeepEqual(got, want) {
		t.Errorf("StaticPorts = %v, want %v", got, want)
	}
	if d := pod.Demand(); d.Ports != 2 {
		t.Errorf("Demand counts %d ports, want the 2 dynamic ones", d.Ports)
	}
	if k := api.MakePortKey(53, "udp"); k.Port() != 53 || k.Protocol() != "udp" || k.String() != "53/udp" {
		t.Errorf("key %d: %d %s %s", k, k.Port(), k.Protocol(), k)
	}
	if empty := (api.PodSpec{Containers: []api.ContainerSpec{{}}}); empty.StaticPorts() != nil {
		t.Errorf("a pod without ports has static ports")
	}
}
