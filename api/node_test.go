package api_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
)

func validNode() api.NodeSpec {
	c := api.Capacity{CPU: 8000, Memory: 32 << 30, Disk: 100 << 30, Ports: 1000}
	return api.NodeSpec{
		Name: "node-1", Address: "127.0.0.1:7070", Labels: map[string]string{"zone": "a"},
		Capacity:    c,
		Allocatable: api.Allocatable{Online: c, Offline: api.Capacity{CPU: 12000, Memory: 40 << 30}},
	}
}

func TestNodeSpecValidate(t *testing.T) {
	n := validNode()
	if err := n.Validate(); err != nil {
		t.Fatalf("valid node: %v", err)
	}
	if n.LogToken = api.NewLogToken(); n.Validate() != nil || n.LogToken == api.NewLogToken() {
		t.Fatalf("NewLogToken %q: %v, or not fresh", n.LogToken, n.Validate())
	}
	for _, ip := range []string{"10.1.2.3", "192.0.2.1", "2001:db8::1"} {
		if n.HostIP = ip; n.Validate() != nil {
			t.Errorf("host IP %s: %v", ip, n.Validate())
		}
	}
	for _, tc := range []struct {
		edit func(*api.NodeSpec)
		want string
	}{
		{func(n *api.NodeSpec) { n.Name = "" }, "name: is required"},
		{func(n *api.NodeSpec) { n.Address = "nohost" }, "address: must be host:port"},
		{func(n *api.NodeSpec) { n.Address = "h:80/logs?x=1#" }, `address: port "80/logs?x=1#"`},
		{func(n *api.NodeSpec) { n.LogToken = "short" }, "log_token: must be 16 to 128 bytes"},
		{func(n *api.NodeSpec) { n.LogToken = strings.Repeat("x", 20) + "\r\n" }, "log_token"},
		{func(n *api.NodeSpec) { n.HostIP = "node-1" }, `host_ip: "node-1" is not an IP address`},
		{func(n *api.NodeSpec) { n.HostIP = "10.1.2.3:80" }, `host_ip: "10.1.2.3:80" is not an IP address`},
		{func(n *api.NodeSpec) { n.HostIP = "fe80::1%eth0" }, `host_ip: "fe80::1%eth0" is not an IP address (without a zone)`},
		{func(n *api.NodeSpec) { n.HostIP = "127.0.0.1" }, "host_ip: 127.0.0.1 must be an address other hosts and the node's pods reach, not loopback"},
		{func(n *api.NodeSpec) { n.HostIP = "127.8.9.10" }, "host_ip: 127.8.9.10 must be"},
		{func(n *api.NodeSpec) { n.HostIP = "::1" }, "host_ip: ::1 must be"},
		{func(n *api.NodeSpec) { n.HostIP = "::ffff:127.0.0.1" }, "host_ip: ::ffff:127.0.0.1 must be"},
		{func(n *api.NodeSpec) { n.HostIP = "0.0.0.0" }, "host_ip: 0.0.0.0 must be"},
		{func(n *api.NodeSpec) { n.Capacity.CPU = 0 }, "capacity.cpu: must be positive"},
		{func(n *api.NodeSpec) { n.Capacity.GPUs = -1 }, "capacity.gpus: must not be negative"},
		{func(n *api.NodeSpec) { n.Allocatable.Online.Memory = 33 << 30 }, "allocatable.online.memory: 35433480192 is more than the capacity 34359738368"},
		{func(n *api.NodeSpec) { n.Allocatable.Offline.CPU = 40000 }, "allocatable.offline.cpu: 40000 is more than 4 times the capacity 8000"},
		{func(n *api.NodeSpec) { n.Labels = map[string]string{"bad key": ""} }, `labels["bad key"]: label key must be`},
		{func(n *api.NodeSpec) { n.Ports = api.PortRange{Lo: 0, Hi: 10} }, "ports: range 0-10: want 1 <= lo <= hi <= 65535"},
		{func(n *api.NodeSpec) { n.Ports = api.PortRange{Lo: 30, Hi: 20} }, "ports: range 30-20"},
		{func(n *api.NodeSpec) { n.Ports = api.PortRange{Lo: 20000, Hi: 20099} }, "capacity.ports: 1000 is more than the port range 20000-20099 holds (100)"},
	} {
		n := validNode()
		tc.edit(&n)
		err := n.Validate()
		if !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want a problem %q", err, tc.want)
		}
	}
}

func TestTaskReportValidate(t *testing.T) {
	ok := api.TaskReport{TaskID: "j1/g0/7", State: api.TaskFailed, Reason: api.ReasonExited, ExitCode: 3, Time: time.Unix(1, 0)}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid report: %v", err)
	}
	bad := api.TaskReport{State: api.TaskState(42), Reason: "bored", ExitCode: 256, Message: "a\x00b"}
	err := bad.Validate()
	var ve *api.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("got %v, want a *ValidationError", err)
	}
	var paths []string
	for _, p := range ve.Problems {
		paths = append(paths, p.Path)
	}
	if got, want := strings.Join(paths, " "), "task_id state reason exit_code message time"; got != want {
		t.Errorf("problems at %q, want %q", got, want)
	}
}

// TestCheckAddress refuses every address that is more than a host and a
// port, so that none can carry a scheme, user, path, query or fragment
// into a URL built from it.
func TestCheckAddress(t *testing.T) {
	for _, ok := range []string{
		"127.0.0.1:7070", "10.1.2.3:1", "[::1]:7070", "[2001:db8::1]:65535", "node-1:80",
		"node-1.rack-2.example.com:7070", "n.example.:80", "1host:80", strings.Repeat("a", 63) + ".b:1",
	} {
		if err := api.CheckAddress(ok); err != nil {
			t.Errorf("CheckAddress(%q) = %v, want nil", ok, err)
		}
	}
	for bad, want := range map[string]string{
		"":                                   "host:port",
		"host":                               "host:port",
		"h:80/any/path#":                     "port",
		"h:80?q=1":                           "port",
		"h:80#frag":                          "port",
		"h/x:80":                             "DNS name",
		"user@h:80":                          "DNS name",
		"http://h:80":                        "port",
		"h:0":                                "port",
		"h:65536":                            "port",
		"h:080":                              "port",
		"h:+80":                              "port",
		"h:":                                 "port",
		":80":                                "DNS name",
		" h:80":                              "DNS name",
		"h :80":                              "DNS name",
		"-h:80":                              "DNS name",
		"h-:80":                              "DNS name",
		"h_x:80":                             "DNS name",
		"a..b:80":                            "DNS name",
		"::1:80":                             "brackets",
		"[::1%eth0]:80":                      "zone",
		"[::1:80":                            "brackets",
		"[127.0.0.1]:80":                     "IPv6",
		"[::ffff:1.2.3.4%x]:80":              "zone",
		"h\x00:80":                           "DNS name",
		"h\r\nX-Evil: 1:80":                  "brackets",
		"h\r\nX-Evil:80":                     "DNS name",
		strings.Repeat("a", 64) + ".b:1":     "DNS name",
		strings.Repeat("a.", 130) + "com:80": "longer",
		"::ffff:127.0.0.1:80":                "brackets",
		"[fe80::1%25en0]:80":                 "zone",
		"0x7f.0.0.1:80":                      "",
		"127.1:80":                           "",
		"h:80:80":                            "brackets",
		"h:٨٠":                               "port",
		"ĥ:80":                               "DNS name",
	} {
		err := api.CheckAddress(bad)
		if want == "" {
			continue // accepted as a DNS name; names nothing but a host
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckAddress(%q) = %v, want an error with %q", bad, err, want)
		}
	}
}
