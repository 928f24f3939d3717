package nodelet_test

import (
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet"
	"github.com/sluicehq/sluice/nodelet/cgroup"
	"github.com/sluicehq/sluice/nodelet/runtime/sim"
)

// recorder is an Observer that keeps what it is told.
type recorder struct {
	mu                   sync.Mutex
	started              map[cgroup.Tier]int
	polls, reports, errs int
}

func (r *recorder) PodStarted(tier cgroup.Tier, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d < 0 {
		r.errs++
	}
	r.started[tier]++
}

func (r *recorder) TargetPolled(d time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.polls++
}

func (r *recorder) Reported(d time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil || d < 0 {
		r.errs++
	}
	r.reports++
}

// TestStatsByTierAndObserver checks the per-tier pod counts and the
// reasons of stops and start failures in Stats, and that the Observer is
// told of every start, poll and report.
func TestStatsByTierAndObserver(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	d := newFakeDispatcher()
	rec := &recorder{started: map[cgroup.Tier]int{}}
	h := newHarness(t, host, d, func(c *nodelet.Config) { c.Observer = rec })

	online := simPod("on", 1, 0, 0)
	online.Tier = cgroup.Online
	bad := simPod("bad", 1, 0, 0)
	bad.Pod.Volumes = []api.Volume{{Name: "v", HostPath: &api.HostPathVolume{Path: "/etc"}}}
	bad.Pod.Containers[0].Mounts = []api.Mount{{Volume: "v", Path: "/v"}}
	d.setTarget(1, online, simPod("off1", 1, 0, 0), simPod("off2", 1, 0, 0), bad)
	eventually(t, 5*time.Second, "three pods running", func() bool {
		s := h.agent.Stats()
		return s.Running == 3 && s.StartFailures == 1 && s.PendingReports == 0
	})
	h.barrier()
	s := h.agent.Stats()
	if s.RunningOnline != 1 || s.Starting != 0 || s.StartingOnline != 0 || s.VolumeDenied != 1 || s.ImageDenied != 0 {
		t.Errorf("stats = %+v: want 1 online of 3 running, none starting, one start refused for a volume", s)
	}

	d.setTarget(2, simPod("off1", 1, 0, 0))
	eventually(t, 5*time.Second, "the online pod and off2 stopped", func() bool {
		s := h.agent.Stats()
		return s.Running == 1 && s.PendingReports == 0
	})
	h.barrier()
	if s := h.agent.Stats(); s.RunningOnline != 0 || s.Stops != 2 || s.TimeLimits != 0 || s.Kills != 0 {
		t.Errorf("stats = %+v: want 2 stops, no online pod running", s)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.started[cgroup.Online] != 1 || rec.started[cgroup.Offline] != 2 || rec.polls < 2 || rec.reports < 1 || rec.errs != 0 {
		t.Errorf("observer: started %v, %d polls, %d reports, %d errors", rec.started, rec.polls, rec.reports, rec.errs)
	}
}
