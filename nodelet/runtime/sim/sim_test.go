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
