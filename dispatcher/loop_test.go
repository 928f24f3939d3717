package dispatcher_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/dispatcher"
	"github.com/sluicehq/sluice/dispatcher/sched"
	"github.com/sluicehq/sluice/internal/scripttest"
)

// TestLoopScripts runs the scheduling loop of one replica (raft and pebble
// real, the Dispatcher's Clock manual) from testdata/*.txt. A script is a
// sequence of blocks, each a command line, a "----" line and the expected
// output, ended by a blank line; lines starting with '#' are comments.
// After each command the test waits until the scheduling shell has settled
// (nothing in flight, nothing queued), then prints the actions the shell
// carried out meanwhile and the command's own output. The Dispatcher's time
// moves only by advance, which should stop at each time the core wakes at
// (a timer armed in reaction to another that fires within the same advance
// would be missed). Commands:
//
//	start [max_wait=D] [period=D] [ttl=D] [max_tasks=N]
//	    a replica that leads, its clock at 0s
//	register NODE CPU           register a node of CPU millicores
//	submit JOB COUNT CPU        submit COUNT tasks of CPU millicores
//	advance D                   move the clock by D
//	jobs                        each job's pending and active tasks
//	nodes                       each node's state
func TestLoopScripts(t *testing.T) {
	scripttest.Run(t, func(t *testing.T) func(string) string {
		s := &loopScript{t: t, ids: map[string]string{}}
		return s.run
	})
}

type loopScript struct {
	t     *testing.T
	clock *clock.Manual
	start time.Time
	r     *replica
	jobs  []string          // job names, in submit order
	ids   map[string]string // job name → ID

	mu      sync.Mutex
	actions []string
}

func (s *loopScript) num(v string) int64 {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		s.t.Fatal(err)
	}
	return n
}

func (s *loopScript) dur(v string) time.Duration {
	d, err := time.ParseDuration(v)
	if err != nil {
		s.t.Fatal(err)
	}
	return d
}

// settle waits until d's scheduling shell has settled. Nothing signals
// that, so it polls, within a deadline: settled twice in a row a
// millisecond apart, since an event may be on its way into the shell.
func settle(t testing.TB, d *dispatcher.Dispatcher) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	streak := 0
	for streak < 2 {
		if dispatcher.Settled(d) {
			streak++
		} else {
			streak = 0
		}
		if time.Now().After(deadline) {
			t.Fatal("the scheduling shell did not settle within 10s")
		}
		<-tick.C
	}
}

func (s *loopScript) run(line string) string {
	f := strings.Fields(line)
	cmd, args := f[0], f[1:]
	if cmd != "start" && s.r == nil {
		s.t.Fatalf("%q before start", line)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []string
	switch cmd {
	case "start":
		s.clock = clock.NewManual(time.Time{})
		s.start = s.clock.Now()
		c := newCluster(s.t, 1, func(cfg *dispatcher.Config) {
			cfg.Clock, cfg.MaxWait, cfg.Period = s.clock, 5*time.Millisecond, time.Second
			for _, a := range args {
				k, v, _ := strings.Cut(a, "=")
				switch k {
				case "max_wait":
					cfg.MaxWait = s.dur(v)
				case "period":
					cfg.Period = s.dur(v)
				case "ttl":
					cfg.NodeTTL, cfg.NodeTTLPerNode = s.dur(v), -1
				case "max_tasks":
					cfg.MaxTasks = s.num(v)
				default:
					s.t.Fatalf("start: unknown argument %q", a)
				}
			}
			dispatcher.SetTrace(cfg, func(a sched.Action) {
				s.mu.Lock()
				s.actions = append(s.actions, a.Kind.String())
				s.mu.Unlock()
			})
		})
		s.r = c.leader()
	case "register":
		if err := s.r.d.Register(ctx, nodeSpec(args[0], s.num(args[1]))); err != nil {
			s.t.Fatal(err)
		}
	case "submit":
		id := s.r.submit(s.t, ctx, jobSpec(args[0], s.num(args[1]), s.num(args[2]), 0, time.Hour))
		s.jobs = append(s.jobs, args[0])
		s.ids[args[0]] = id
	case "advance":
		s.clock.Advance(s.dur(args[0]))
	case "jobs", "nodes":
	default:
		s.t.Fatalf("unknown command %q", line)
	}
	settle(s.t, s.r.d)
	switch cmd {
	case "jobs":
		for _, name := range s.jobs {
			j, _ := s.r.f.Job(s.ids[name])
			out = append(out, fmt.Sprintf("%s: pending=%d active=%d", name, j.Groups[0].Pending, j.Groups[0].Active))
		}
	case "nodes":
		for _, n := range s.r.f.AppendNodeStates(nil) {
			out = append(out, fmt.Sprintf("%s: %s", n.Name, n.State))
		}
	}
	s.mu.Lock()
	acts := strings.Join(s.actions, " ")
	s.actions = nil
	s.mu.Unlock()
	if acts == "" {
		acts = "(none)"
	}
	head := fmt.Sprintf("t=%s actions: %s", s.clock.Now().Sub(s.start), acts)
	return strings.Join(append([]string{head}, out...), "\n")
}
