package fleet_test

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/bench/fleet"
)

// lockedBuffer is a bytes.Buffer safe for the fleet's writers and the
// test's reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPodLog runs a job of three tasks on two nodes with a pod log: each
// pod's start and end must be logged once, on the node that ran it, the
// end after the start by about the run time.
func TestPodLog(t *testing.T) {
	const tasks, run = 3, 100 * time.Millisecond
	s := openDispatcher(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var log lockedBuffer
	f, err := fleet.Start(ctx, fleet.Config{Addrs: []string{s.Addr()}, Nodes: 2, Pool: "sim", CPU: 4000, Memory: 8 << 30, PodLog: &log})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := api.NewClient(api.ClientConfig{Addrs: []string{s.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	job := api.JobSpec{Name: "logged", Pool: "sim", Tasks: []api.TaskGroupSpec{{Count: tasks, Pod: api.PodSpec{
		Containers: []api.ContainerSpec{{Image: api.Image{Rootfs: "/img"}, Command: []string{"/x"}, Resources: api.Resources{CPU: 1000, Memory: 1 << 30}}},
		Sim:        &api.SimSpec{RunTime: api.Duration(run)},
	}}}}
	res, err := c.Submit(ctx, []api.JobSpec{job}, api.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := awaitChange(ctx, s.Dispatcher(), func() (bool, error) { return jobDone(ctx, c, res.Jobs[0]) }); err != nil {
		t.Fatal(err)
	}
	// The job succeeded once every end was reported, which is after it
	// was logged.
	starts, ends := map[string]int64{}, map[string]int64{}
	nodeOf := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			t.Fatalf("line %q: want %s", line, fleet.PodLog)
		}
		at, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		switch {
		case f[0] == "start" && len(f) == 4:
			if _, dup := starts[f[3]]; dup {
				t.Errorf("pod %s started twice", f[3])
			}
			starts[f[3]], nodeOf[f[3]] = at, f[2]
		case f[0] == "end" && len(f) == 5 && f[4] == "0":
			if nodeOf[f[3]] != f[2] {
				t.Errorf("pod %s ended on %s, started on %q", f[3], f[2], nodeOf[f[3]])
			}
			ends[f[3]] = at
		default:
			t.Errorf("line %q: want %s", line, fleet.PodLog)
		}
	}
	for i := range tasks {
		id := fmt.Sprintf("%s.0.%d.1", res.Jobs[0], i)
		st, ok1 := starts[id]
		en, ok2 := ends[id]
		if !ok1 || !ok2 || time.Duration(en-st) < run/2 {
			t.Errorf("pod %s: start %v %d, end %v %d; want both, %v apart", id, ok1, st, ok2, en, run)
		}
	}
	if len(starts) != tasks {
		t.Errorf("%d pods started, want %d:\n%s", len(starts), tasks, log.String())
	}
}
