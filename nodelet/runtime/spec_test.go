package runtime_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet/runtime"
)

func TestFromAPI(t *testing.T) {
	p := &api.PodSpec{
		Containers: []api.ContainerSpec{{
			Name: "main", Image: api.Image{Rootfs: "/img"}, Command: []string{"/bin/x", "-a"}, Args: []string{"b"},
			Env: map[string]string{"B": "2", "A": "1"}, WorkingDir: "/w",
			Resources: api.Resources{CPU: 500, Memory: 64 << 20, Ports: []api.Port{{Name: "http", Port: 80}}},
			Security:  &api.ContainerSecurity{User: api.ContainerUser{UID: 1000, GID: 100}, ReadOnlyRootfs: true},
		}},
		Sim: &api.SimSpec{RunTime: api.Duration(time.Second), ExitCode: 3},
	}
	s := runtime.FromAPI("p1", 2, "sluice/online", p)
	c := s.Containers[0]
	if s.ID != "p1" || s.Generation != 2 || s.CgroupParent != "sluice/online" || s.Sim.RunTime != time.Second || s.Sim.ExitCode != 3 {
		t.Errorf("pod fields: %+v", s)
	}
	if !slices.Equal(c.Args, []string{"/bin/x", "-a", "b"}) || !slices.Equal(c.Env, []string{"A=1", "B=2"}) ||
		c.Resources.MilliCPU != 500 || c.Resources.MemoryBytes != 64<<20 || len(c.Ports) != 1 || c.WorkingDir != "/w" ||
		c.User == nil || *c.User != (runtime.User{UID: 1000, GID: 100}) || !c.ReadOnlyRootfs {
		t.Errorf("container: %+v", c)
	}
	if err := s.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	// With Args, the command line is new: it does not alias Command.
	p.Containers[0].Command[0] = "changed"
	if s.Containers[0].Args[0] != "/bin/x" {
		t.Errorf("FromAPI aliases Command")
	}
	// Without, it is Command, capped: an append copies.
	cmd := append(make([]string, 0, 4), "/bin/y")
	onlyCmd := runtime.FromAPI("p4", 1, "sluice/offline", &api.PodSpec{Containers: []api.ContainerSpec{{Name: "c", Image: api.Image{Rootfs: "/img"}, Command: cmd}}})
	if a := onlyCmd.Containers[0].Args; !slices.Equal(a, cmd) || cap(a) != len(a) {
		t.Errorf("args of a command without arguments: %q, capacity %d; want %q, capacity 1", a, cap(a), cmd)
	}
	// No environment, command or arguments: none converted, nil as before.
	bare := runtime.FromAPI("p2", 1, "sluice/offline", &api.PodSpec{Containers: []api.ContainerSpec{{Name: "c", Image: api.Image{Rootfs: "/img"}}}})
	if c := bare.Containers[0]; c.Env != nil || c.Args != nil || c.Name != "c" || bare.Sim != nil || c.User != nil || c.ReadOnlyRootfs {
		t.Errorf("bare pod: %+v", bare)
	}
	if none := runtime.FromAPI("p3", 1, "sluice/offline", &api.PodSpec{}); none.Containers != nil {
		t.Errorf("a pod without containers converted to %+v", none.Containers)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	s := runtime.PodSpec{
		ID:           "bad id",
		CgroupParent: "a/../b",
		Containers: []runtime.ContainerSpec{
			{Name: "c", Image: api.Image{Rootfs: "rel"}, Args: []string{""}, Env: []string{"NOEQ"}, WorkingDir: "w",
				Resources: runtime.Resources{MilliCPU: -1, MemoryBytes: -1, Pids: -1}, User: &runtime.User{UID: -1}},
			{Name: "c", Args: nil},
		},
		Env: []string{"SLUICE_NODE=n1", "=x"},
		Sim: &runtime.SimSpec{RunTime: -1, ExitCode: 256, Usage: &api.SimUsage{CPU: -1,
			Peak: &api.SimPeak{Period: api.Duration(time.Second), Length: api.Duration(time.Second)}}},
		ResourceDir: "run/x",
		Network:     "overlay",
		Ports: []runtime.PortMapping{
			{Name: "a", Port: 0}, {Name: "b", Port: 80, Protocol: "sctp"},
			{Name: "c", Port: 8080}, {Name: "d", Port: 8080, Protocol: "tcp"}, {Name: "e", Port: 8080, Protocol: "udp"},
		},
	}
	err := s.Validate()
	var se *runtime.SpecError
	if !errors.Is(err, runtime.ErrBadSpec) || !errors.As(err, &se) {
		t.Fatalf("Validate = %v, want a *SpecError", err)
	}
	want := []string{"id", "cgroup_parent", "resource_dir", "network", "ports[0].port", "ports[1].protocol", "ports[3].port", "env[1]", "sim.run_time", "sim.exit_code", "sim.usage", "sim.usage.peak", "containers[0].args[0]", "containers[0].env[0]",
		"containers[0].working_dir", "containers[0].image.rootfs", "containers[0].resources.cpu", "containers[0].resources.memory",
		"containers[0].resources.pids", "containers[0].user", "containers[1].name", "containers[1].args", "containers[1].image"}
	var got []string
	for _, p := range se.Problems {
		got = append(got, p.Field)
	}
	for _, f := range want {
		if !slices.Contains(got, f) {
			t.Errorf("no problem for %s in %v", f, err)
		}
	}
	if slices.Contains(got, "env[0]") {
		t.Errorf("a good pod env entry refused: %v", err)
	}
	if slices.Contains(got, "ports[2].port") || slices.Contains(got, "ports[4].port") {
		t.Errorf("a good port refused (8080/udp beside 8080/tcp is no duplicate): %v", err)
	}
	if !strings.HasPrefix(err.Error(), "runtime: bad pod spec: id: ") {
		t.Errorf("message = %q", err)
	}
}

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"a", "pod-1", "P_2.x", strings.Repeat("a", runtime.MaxIDLen)} {
		if msg := runtime.CheckName(ok); msg != "" {
			t.Errorf("CheckName(%q) = %q", ok, msg)
		}
	}
	for _, bad := range []string{"", "-a", ".a", "_a", "a/b", "..", "a b", strings.Repeat("a", runtime.MaxIDLen+1)} {
		if runtime.CheckName(bad) == "" {
			t.Errorf("CheckName(%q) accepted", bad)
		}
	}
}

func TestValidatePlaceholder(t *testing.T) {
	ok := runtime.PodSpec{ID: "cb", Placeholder: true, Containers: []runtime.ContainerSpec{
		{Name: "capbox", Resources: runtime.Resources{MilliCPU: 500, MemoryBytes: 1 << 20}}}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("placeholder: %v", err)
	}
	for name, mut := range map[string]func(*runtime.PodSpec){
		"an image":       func(s *runtime.PodSpec) { s.Containers[0].Image = api.Image{Rootfs: "/img"} },
		"args":           func(s *runtime.PodSpec) { s.Containers[0].Args = []string{"/bin/x"} },
		"two containers": func(s *runtime.PodSpec) { s.Containers = append(s.Containers, runtime.ContainerSpec{Name: "b"}) },
		"no container":   func(s *runtime.PodSpec) { s.Containers = nil },
	} {
		s := ok
		s.Containers = slices.Clone(ok.Containers)
		mut(&s)
		if err := s.Validate(); !errors.Is(err, runtime.ErrBadSpec) {
			t.Errorf("placeholder with %s: %v", name, err)
		}
	}
}

// BenchmarkFromAPI converts the load generator's pod: one container with a
// command, resources and a simulated run time, no environment.
func BenchmarkFromAPI(b *testing.B) {
	p := &api.PodSpec{
		Containers: []api.ContainerSpec{{
			Name: "c0", Image: api.Image{Rootfs: "/sim"}, Command: []string{"/bin/sim", "--run"},
			Resources: api.Resources{CPU: 100, Memory: 64 << 20},
		}},
		Sim: &api.SimSpec{RunTime: api.Duration(time.Second)},
	}
	for b.Loop() {
		runtime.FromAPI("p1", 2, "sluice/offline", p)
	}
}
