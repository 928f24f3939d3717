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

// netPod is a simulated pod asking for network mode (empty: the node's
// default).
func netPod(id, mode string) nodelet.DesiredPod {
	p := simPod(id, 1, 0, 0)
	p.TaskID = "j1/0/" + strings.TrimPrefix(id, "t") + "/1"
	p.Pod.Network.Mode = mode
	return p
}

// TestHostNetworkDenied: without AllowHostNetwork a pod in host mode,
// asked for or by the node's default, fails at once as network_denied
// with a message naming the flag, and never runs; the other modes run.
func TestHostNetworkDenied(t *testing.T) {
	for _, tc := range []struct {
		name   string
		def    string
		denied []string
	}{
		{"asked", "", []string{"t1"}},
		{"by default", runtime.NetworkHost, []string{"t1", "t0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := sim.NewHost()
			defer host.Close()
			d := newFakeDispatcher()
			h := newHarness(t, host, d, func(c *nodelet.Config) { c.DefaultNetwork = tc.def })
			d.setTarget(1, netPod("t0", ""), netPod("t1", runtime.NetworkHost), netPod("t2", runtime.NetworkBridge), netPod("t3", runtime.NetworkNone))
			eventually(t, 5*time.Second, "every pod running or failed", func() bool {
				return len(running(t, h.rt))+len(d.find("t1", api.TaskFailed))+len(d.find("t0", api.TaskFailed)) == 4
			})
			for _, id := range tc.denied {
				r := d.find(id, api.TaskFailed)
				if len(r) != 1 || r[0].Reason != api.ReasonNetworkDenied || !strings.Contains(r[0].Message, "--allow-host-network") {
					t.Errorf("%s: failure reports %+v, want one network_denied naming --allow-host-network", id, r)
				}
				if n := h.rt.startCounts()[id+"/1"]; n != 0 {
					t.Errorf("%s: started %d times, want never", id, n)
				}
			}
		})
	}
}

// TestHostNetworkAllowed: with AllowHostNetwork host mode runs, and the
// runtime sees each pod's resolved mode (the node's default for none
// asked, bridge unless configured otherwise).
func TestHostNetworkAllowed(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	d := newFakeDispatcher()
	h := newHarness(t, host, d, func(c *nodelet.Config) { c.AllowHostNetwork = true })
	d.setTarget(1, netPod("t0", ""), netPod("t1", runtime.NetworkHost), netPod("t3", runtime.NetworkNone))
	eventually(t, 5*time.Second, "every pod running", func() bool { return len(running(t, h.rt)) == 3 })
	rt := sim.New(host)
	for id, want := range map[string]string{"t0": runtime.NetworkBridge, "t1": runtime.NetworkHost, "t3": runtime.NetworkNone} {
		spec, err := rt.Spec(id)
		if err != nil {
			t.Fatalf("Spec(%s): %v", id, err)
		}
		if spec.Network != want {
			t.Errorf("%s: network %q, want %q", id, spec.Network, want)
		}
	}
}

// TestHostIPAndPodAddr: every container gets SLUICE_HOST_IP; a
// bridge-mode pod's SLUICE_ADDR has its loopback hosts replaced by it
// (loopback in the pod is the pod), a host-mode pod's is as the node's.
func TestHostIPAndPodAddr(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	d := newFakeDispatcher()
	const addr = "http://127.0.0.1:7001,https://localhost:7002/x,http://10.1.1.1:7003,http://[::1]:7004"
	newHarness(t, host, d, func(c *nodelet.Config) {
		c.Addr, c.HostIP, c.AllowHostNetwork = addr, "10.213.0.1", true
	})
	d.setTarget(1, netPod("t0", runtime.NetworkBridge), netPod("t1", runtime.NetworkHost))
	rt := sim.New(host)
	eventually(t, 5*time.Second, "both pods running", func() bool { return len(running(t, rt)) == 2 })
	for id, wantAddr := range map[string]string{
		"t0": "http://10.213.0.1:7001,https://10.213.0.1:7002/x,http://10.1.1.1:7003,http://10.213.0.1:7004",
		"t1": addr,
	} {
		spec, err := rt.Spec(id)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(spec.Env, api.EnvAddr+"="+wantAddr) || !slices.Contains(spec.Env, api.EnvHostIP+"=10.213.0.1") {
			t.Errorf("%s: env %q, want %s=%s and %s=10.213.0.1", id, spec.Env, api.EnvAddr, wantAddr, api.EnvHostIP)
		}
	}
}

func TestConfigNetwork(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	for _, c := range []struct{ def, hostIP, want string }{
		{"overlay", "", "DefaultNetwork"},
		{"", "127.0.0.1", "HostIP 127.0.0.1"},
		{"", "0.0.0.0", "HostIP 0.0.0.0"},
		{"", "node-1", "HostIP \"node-1\""},
	} {
		_, err := nodelet.New(nodelet.Config{Node: "n", Runtime: sim.New(host), Dispatcher: newFakeDispatcher(), DefaultNetwork: c.def, HostIP: c.hostIP})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(DefaultNetwork %q, HostIP %q) = %v, want an error naming %s", c.def, c.hostIP, err, c.want)
		}
	}
}
