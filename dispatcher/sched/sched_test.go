package sched_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dispatcher/sched"
	"github.com/sluicehq/sluice/internal/scripttest"
)

// A script (testdata/*.txt) is a sequence of blocks, each a command line,
// a "----" line and the expected output (the actions the event produced,
// then when the core wants to be woken, relative to the script's start),
// ended by a blank line. Lines starting with '#' are comments. Time moves
// only by advance. Commands:
//
//	config [max_wait=D] [max_tasks=N] [period=D] [liveness=D] [forget=D]
//	    a fresh core, following, at 0s
//	lead TERM | follow          a leadership event
//	work N                      N tasks arrived
//	advance D                   a tick D later
//	barrier ok|fail [term=T]    the barrier finished
//	round [placed=N] [again] [preempt] [deposed] [term=T]
//	preempted N [deposed] [term=T]
//	liveness [term=T] | forget [term=T]   housekeeping finished
func TestScripts(t *testing.T) {
	scripttest.Run(t, func(t *testing.T) func(string) string {
		s := &script{t: t, start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		return s.run
	})
}

type script struct {
	t     *testing.T
	start time.Time
	now   time.Time
	c     *sched.Core
}

// args splits key=value arguments from flags; it fails on anything not in
// allowed.
func (s *script) args(args []string, allowed ...string) map[string]string {
	m := map[string]string{}
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		ok := false
		for _, w := range allowed {
			ok = ok || w == k
		}
		if !ok {
			s.t.Fatalf("unknown argument %q", a)
		}
		m[k] = v
	}
	return m
}

func (s *script) dur(v string) time.Duration {
	d, err := time.ParseDuration(v)
	if err != nil {
		s.t.Fatal(err)
	}
	return d
}

func (s *script) num(v string) int64 {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		s.t.Fatal(err)
	}
	return n
}

// term is the term=T argument, or the core's term.
func (s *script) term(m map[string]string) uint64 {
	if v, ok := m["term"]; ok {
		return uint64(s.num(v))
	}
	term, _ := s.c.Leading()
	return term
}

func (s *script) run(line string) string {
	f := strings.Fields(line)
	cmd, args := f[0], f[1:]
	if cmd != "config" && s.c == nil {
		s.t.Fatalf("%q before config", line)
	}
	switch cmd {
	case "config":
		m := s.args(args, "max_wait", "max_tasks", "period", "liveness", "forget")
		cfg := sched.Config{MaxTasks: 1000, Period: time.Second, LivenessEvery: 2 * time.Second}
		for k, v := range m {
			switch k {
			case "max_wait":
				cfg.MaxWait = s.dur(v)
			case "max_tasks":
				cfg.MaxTasks = int(s.num(v))
			case "period":
				cfg.Period = s.dur(v)
			case "liveness":
				cfg.LivenessEvery = s.dur(v)
			case "forget":
				cfg.ForgetEvery = s.dur(v)
			}
		}
		s.now = s.start
		c, err := sched.New(cfg, s.now)
		if err != nil {
			return "error: " + err.Error()
		}
		s.c = c
		return "ok"
	case "lead":
		s.c.Leadership(s.now, true, uint64(s.num(args[0])))
	case "follow":
		s.c.Leadership(s.now, false, 0)
	case "work":
		s.c.Work(s.now, int(s.num(args[0])))
	case "advance":
		s.now = s.now.Add(s.dur(args[0]))
		s.c.Tick(s.now)
	case "barrier":
		m := s.args(args[1:], "term")
		s.c.BarrierDone(s.now, s.term(m), args[0] == "ok")
	case "round":
		m := s.args(args, "placed", "again", "preempt", "deposed", "term")
		r := sched.RoundResult{}
		_, r.Again = m["again"]
		_, r.Preempt = m["preempt"]
		_, r.Deposed = m["deposed"]
		if v, ok := m["placed"]; ok {
			r.Placed = s.num(v)
		}
		s.c.RoundDone(s.now, s.term(m), r)
	case "preempted":
		m := s.args(args[1:], "deposed", "term")
		_, dep := m["deposed"]
		s.c.PreemptDone(s.now, s.term(m), sched.PreemptResult{Preempted: s.num(args[0]), Deposed: dep})
	case "liveness":
		s.c.LivenessDone(s.now, s.term(s.args(args, "term")))
	case "forget":
		s.c.ForgetDone(s.now, s.term(s.args(args, "term")))
	default:
		s.t.Fatalf("unknown command %q", line)
	}
	var out []string
	for _, a := range s.c.Ready() {
		out = append(out, fmt.Sprintf("%s@%d", a.Kind, a.Term))
	}
	if len(out) == 0 {
		out = append(out, "(nothing)")
	}
	wake := "wake: none"
	if at, ok := s.c.Wake(); ok {
		wake = "wake: " + at.Sub(s.start).String()
	}
	return fmt.Sprintf("t=%s %s\n%s", s.now.Sub(s.start), strings.Join(out, " "), wake)
}

func TestConfigRefusals(t *testing.T) {
	_, err := sched.New(sched.Config{MaxWait: -1, MaxTasks: 0, Period: 0, LivenessEvery: -1, ForgetEvery: -1}, time.Time{})
	if !errors.Is(err, sched.ErrConfig) {
		t.Fatalf("New: %v, want ErrConfig", err)
	}
	for _, want := range []string{"MaxWait", "MaxTasks", "Period", "LivenessEvery", "ForgetEvery"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}
