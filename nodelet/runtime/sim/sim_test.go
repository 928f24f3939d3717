package sim_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet/runtime"
	"github.com/sluicehq/sluice/nodelet/runtime/runtimetest"
	"github.com/sluicehq/sluice/nodelet/runtime/sim"
)

func factory(t *testing.T) runtimetest.Harness {
	h := sim.NewHost()
	t.Cleanup(h.Close)
	return runtimetest.Harness{
		Open: func(*testing.T) runtime.Runtime { return sim.New(h) },
		Pod: func(id string, bs ...runtimetest.Behavior) runtime.PodSpec {
			s := runtime.PodSpec{ID: id, Sim: &runtime.SimSpec{RunTime: bs[0].Sleep, ExitCode: bs[0].Exit}}
			for i := range bs {
				s.Containers = append(s.Containers, runtime.ContainerSpec{
					Name:  fmt.Sprintf("c%d", i),
					Image: api.Image{Rootfs: "/sim"},
					Args:  []string{"sim"},
				})
			}
			return s
		},
		Caps:        runtimetest.Caps{ExitAfterRestart: true},
		Concurrency: 64,
	}
}

func TestConformance(t *testing.T) { runtimetest.Run(t, factory) }

// TestThousands runs many pods in one process.
func TestThousands(t *testing.T) {
	h := sim.NewHost()
	defer h.Close()
	rt := sim.New(h)
	ctx := context.Background()
	const n = 10000
	for i := range n {
		spec := runtime.FromAPI(fmt.Sprintf("p%d", i), 1, "sluice/offline", &api.PodSpec{
			Containers: []api.ContainerSpec{{Name: "c0", Image: api.Image{Rootfs: "/x"}, Command: []string{"x"}}},
			Sim:        &api.SimSpec{RunTime: api.Duration(time.Duration(i%50) * time.Millisecond), ExitCode: int32(i % 256)},
		})
		if err := rt.Start(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		e, err := rt.Wait(ctx, fmt.Sprintf("p%d", i))
		if err != nil || e.Code != i%256 {
			t.Fatalf("p%d: %+v, %v", i, e, err)
		}
	}
	l, _ := rt.List(ctx)
	if len(l) != n {
		t.Fatalf("List has %d pods, want %d", len(l), n)
	}
}

func BenchmarkStart(b *testing.B) {
	h := sim.NewHost()
	defer h.Close()
	rt := sim.New(h)
	ctx := context.Background()
	spec := runtime.PodSpec{Containers: []runtime.ContainerSpec{{Name: "c0", Image: api.Image{Rootfs: "/x"}, Args: []string{"x"}}}}
	i := 0
	for b.Loop() {
		spec.ID = fmt.Sprintf("p%d", i)
		i++
		if err := rt.Start(ctx, spec); err != nil {
			b.Fatal(err)
		}
	}
}

// TestUsage checks what the Runtime reports as a runtime.Meter: a running
// pod's configured usage, its peak at the peak's time, nothing for a pod
// without usage, and no pod once it ended, was removed, never was, or the
// Runtime closed.
func TestUsage(t *testing.T) {
	h := sim.NewHost()
	defer h.Close()
	rt := sim.New(h)
	ctx := context.Background()
	pod := func(id string, u *api.SimUsage) runtime.PodSpec {
		return runtime.FromAPI(id, 1, "sluice/online", &api.PodSpec{
			Containers: []api.ContainerSpec{{Name: "c0", Image: api.Image{Rootfs: "/x"}, Command: []string{"x"}}},
			Sim:        &api.SimSpec{RunTime: api.Duration(time.Hour), Usage: u}, // runs until stopped
		})
	}
	usage := &api.SimUsage{CPU: 200, Memory: 64 << 20, Peak: &api.SimPeak{CPU: 1500, Memory: 1 << 30,
		Period: api.Duration(time.Minute), Length: api.Duration(10 * time.Second)}}
	for id, u := range map[string]*api.SimUsage{"used": usage, "idle": nil} {
		if err := rt.Start(ctx, pod(id, u)); err != nil {
			t.Fatal(err)
		}
	}
	minute := time.Unix(1_800_000_000-1_800_000_000%60, 0)
	for _, c := range []struct {
		id   string
		at   time.Time
		want api.Usage
	}{
		{"used", minute.Add(30 * time.Second), api.Usage{CPU: 200, Memory: 64 << 20}},
		{"used", minute.Add(5 * time.Second), api.Usage{CPU: 1500, Memory: 1 << 30}},
		{"idle", minute, api.Usage{}},
	} {
		if got, ok := rt.Usage(c.id, c.at); !ok || got != c.want {
			t.Errorf("Usage(%s, %v) = %+v, %v; want %+v, true", c.id, c.at.UTC(), got, ok, c.want)
		}
	}
	if _, ok := rt.Usage("absent", minute); ok {
		t.Error("a pod never started reports usage")
	}
	if err := rt.Stop(ctx, "used", time.Second); err != nil {
		t.Fatal(err)
	}
	if _, ok := rt.Usage("used", minute); ok {
		t.Error("a stopped pod reports usage")
	}
	if err := rt.Remove(ctx, "used"); err != nil {
		t.Fatal(err)
	}
	if _, ok := rt.Usage("used", minute); ok {
		t.Error("a removed pod reports usage")
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := rt.Usage("idle", minute); ok {
		t.Error("a closed Runtime reports usage")
	}
	if _, ok := sim.New(h).Usage("idle", minute); !ok {
		t.Error("a new Runtime over the host does not report its running pod")
	}
}
