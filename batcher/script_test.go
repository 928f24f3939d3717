package batcher_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/batcher"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/scripttest"
)

// A script (testdata/*.txt) is a sequence of blocks, each a command line,
// a "----" line and the expected output, ended by a blank line. Lines
// starting with '#' are comments. Commands:
//
//	config [max_items=N] [max_wait=D] [default_weight=N] [weights=q:W,...]
//	    start a fresh batcher[string] on a manual clock at 0s
//	add QUEUE [p=N] [at=D] VALUE...
//	    add values to QUEUE ("-" is the empty name) at priority N (default
//	    0), enqueued at D after the start (default: now)
//	addn QUEUE N VALUE [p=N]
//	    add N copies of VALUE to QUEUE with AddN
//	due            print when a round may next be ready (Due)
//	advance D      move the clock forward by D
//	next [verbose] take a round if one is ready (TryNext)
//	requeue D VALUE...
//	    put back values handed out by earlier rounds, with backoff D
//	stats          print the counters
//	close          close the batcher and print what it still held
func TestScripts(t *testing.T) {
	scripttest.Run(t, func(t *testing.T) func(string) string {
		s := &script{t: t}
		return s.run
	})
}

// script is the state of a running script.
type script struct {
	t     *testing.T
	clock *clock.Manual
	start time.Time
	b     *batcher.Batcher[string]
	// out holds the items handed out by rounds, by value, for requeue.
	out map[string]batcher.Item[string]
}

// run executes one command line and returns its output.
func (s *script) run(line string) string {
	fields := strings.Fields(line)
	cmd, args := fields[0], fields[1:]
	if cmd != "config" && s.b == nil {
		s.t.Fatalf("%q before config", line)
	}
	var out string
	var err error
	switch cmd {
	case "config":
		out, err = s.config(args)
	case "add":
		out, err = s.add(args)
	case "addn":
		out, err = s.addn(args)
	case "due":
		if at, ok := s.b.Due(); ok {
			out = "at " + at.Sub(s.start).String()
		} else {
			out = "none"
		}
	case "advance":
		out, err = s.advance(args)
	case "next":
		out = s.next(len(args) == 1 && args[0] == "verbose")
	case "requeue":
		out, err = s.requeue(args)
	case "stats":
		st := s.b.Stats()
		out = fmt.Sprintf("added=%d requeued=%d taken=%d rounds_by_size=%d rounds_by_wait=%d pending=%d delayed=%d",
			st.Added, st.Requeued, st.Taken, st.RoundsBySize, st.RoundsByWait, st.Pending, st.Delayed)
	case "close":
		left := s.b.Close()
		vals := make([]string, len(left))
		for i, it := range left {
			vals[i] = it.Value
		}
		out = "left: " + listOrNone(vals)
	default:
		s.t.Fatalf("unknown command %q", line)
	}
	if err != nil {
		return "error: " + err.Error()
	}
	return out
}

func (s *script) config(args []string) (string, error) {
	var cfg batcher.Config
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "max_items":
			cfg.MaxItems = s.atoi(v)
		case "max_wait":
			cfg.MaxWait = s.duration(v)
		case "default_weight":
			cfg.DefaultWeight = s.atoi(v)
		case "weights":
			cfg.Weights = map[string]int{}
			for _, qw := range strings.Split(v, ",") {
				q, w, _ := strings.Cut(qw, ":")
				cfg.Weights[q] = s.atoi(w)
			}
		default:
			s.t.Fatalf("config: unknown argument %q", a)
		}
	}
	s.clock = clock.NewManual(time.Time{})
	s.start = s.clock.Now()
	s.out = map[string]batcher.Item[string]{}
	cfg.Clock = s.clock
	b, err := batcher.New[string](cfg)
	if err != nil {
		return "", err
	}
	s.b = b
	return "ok", nil
}

func (s *script) addn(args []string) (string, error) {
	if len(args) < 3 {
		s.t.Fatal("addn: want QUEUE N VALUE")
	}
	it := batcher.Item[string]{Queue: args[0], Value: args[2]}
	if it.Queue == "-" {
		it.Queue = ""
	}
	for _, a := range args[3:] {
		k, v, _ := strings.Cut(a, "=")
		if k != "p" {
			s.t.Fatalf("addn: unknown argument %q", a)
		}
		it.Priority = s.atoi(v)
	}
	if err := s.b.AddN(it, s.atoi(args[1])); err != nil {
		return "", err
	}
	return "ok", nil
}

func (s *script) add(args []string) (string, error) {
	if len(args) == 0 {
		s.t.Fatal("add: missing queue")
	}
	queue := args[0]
	if queue == "-" {
		queue = ""
	}
	var items []batcher.Item[string]
	prio := 0
	var at time.Time
	for _, a := range args[1:] {
		switch k, v, ok := strings.Cut(a, "="); {
		case ok && k == "p":
			prio = s.atoi(v)
		case ok && k == "at":
			at = s.start.Add(s.duration(v))
		case ok:
			s.t.Fatalf("add: unknown argument %q", a)
		default:
			items = append(items, batcher.Item[string]{Value: a, Queue: queue, Priority: prio})
		}
	}
	for i := range items {
		items[i].Enqueued = at
	}
	if err := s.b.Add(items...); err != nil {
		return "", err
	}
	return "ok", nil
}

func (s *script) advance(args []string) (string, error) {
	if len(args) != 1 {
		s.t.Fatal("advance: want one duration")
	}
	s.clock.Advance(s.duration(args[0]))
	return "now=" + s.clock.Now().Sub(s.start).String(), nil
}

func (s *script) next(verbose bool) string {
	r, ok := s.b.TryNext()
	if !ok {
		return "(none)"
	}
	vals := make([]string, len(r.Items))
	for i, it := range r.Items {
		vals[i] = it.Value
		s.out[it.Value] = it
	}
	head := fmt.Sprintf("round reason=%s at=%s n=%d", r.Reason, r.At.Sub(s.start), len(r.Items))
	if !verbose {
		return head + ": " + strings.Join(vals, " ")
	}
	lines := []string{head}
	for _, it := range r.Items {
		lines = append(lines, fmt.Sprintf("  %s queue=%s p=%d enqueued=%s", it.Value, it.Queue, it.Priority, it.Enqueued.Sub(s.start)))
	}
	return strings.Join(lines, "\n")
}

func (s *script) requeue(args []string) (string, error) {
	if len(args) < 2 {
		s.t.Fatal("requeue: want a backoff and values")
	}
	backoff := s.duration(args[0])
	var items []batcher.Item[string]
	for _, v := range args[1:] {
		it, ok := s.out[v]
		if !ok {
			return "", errors.New("requeue: " + v + " was not handed out")
		}
		delete(s.out, v)
		items = append(items, it)
	}
	if err := s.b.Requeue(items, backoff); err != nil {
		return "", err
	}
	return "ok", nil
}

func (s *script) atoi(v string) int {
	n, err := strconv.Atoi(v)
	if err != nil {
		s.t.Fatal(err)
	}
	return n
}

func (s *script) duration(v string) time.Duration {
	d, err := time.ParseDuration(v)
	if err != nil {
		s.t.Fatal(err)
	}
	return d
}

// listOrNone joins vals with spaces, or returns "(none)".
func listOrNone(vals []string) string {
	if len(vals) == 0 {
		return "(none)"
	}
	return strings.Join(vals, " ")
}
