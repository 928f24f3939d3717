package e2ebench

import (
	"strings"
	"testing"
	"time"
)

// TestJudge pins what makes a step sustained: the knee is found by it.
func TestJudge(t *testing.T) {
	cfg := Config{P99PlacedLimit: time.Second, P99RunningLimit: 2 * time.Second}
	good := Step{OfferedTasksPerSec: 1000, PlacedTasksPerSec: 950, P99SubmitToPlacedMs: 900, P99SubmitToRunningMs: 1900, RunningTasks: 10}
	if why := cfg.judge(good); why != nil {
		t.Errorf("a good step: %q", why)
	}
	for _, tc := range []struct {
		change func(*Step)
		want   string
	}{
		{func(s *Step) { s.PlacedTasksPerSec = 899 }, "placed 899 of 1000 tasks/s offered (90%"},
		{func(s *Step) { s.OfferedTasksPerSec, s.PlacedTasksPerSec = 0, 0 }, "placed 0 of 0"},
		{func(s *Step) { s.Errors = 2 }, "2 requests failed"},
		{func(s *Step) { s.P99SubmitToPlacedMs = 1001 }, "p99 submit→placed 1001 ms above 1000 ms"},
		{func(s *Step) { s.P99SubmitToRunningMs = 2001 }, "p99 submit→running 2001 ms above 2000 ms"},
		{func(s *Step) { s.RunningTasks = 0 }, "no task seen running"},
	} {
		s := good
		tc.change(&s)
		why := cfg.judge(s)
		if len(why) != 1 || !strings.Contains(why[0], tc.want) {
			t.Errorf("judge = %q, want one reason with %q", why, tc.want)
		}
	}
}
