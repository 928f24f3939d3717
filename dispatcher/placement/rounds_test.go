package placement_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/placement"
	"github.com/sluicehq/sluice/internal/seedtest"
)

// TestRoundScripts runs the round-by-round scripts in testdata/rounds:
// one Placer places round after round while the script changes the
// cluster between them, as committed plans and new work do. Each round's
// plan must be valid, cost what a fresh Placer's plan of the same input
// costs (the kept network re-solved warm finds the same optimum), and
// match the script. Lines:
//
//	node NAME cpu=MILLI mem=GIB          add a node (both tiers)
//	group JOB/GROUP n=N cpu=MILLI mem=GIB [prio=P] [queue=Q] [qos=online] [gang] [distinct]
//	                                     add a group of N pending tasks
//	drop JOB/GROUP | down NAME           remove a group or a node
//	wait DURATION                        the groups have waited that much longer
//	round                                place; the lines after it, up to the
//	                                     next command, are the expected plan:
//	                                     "solve warm" or "solve cold" (the
//	                                     kept network re-solved from the last
//	                                     optimum, or from zero),
//	                                     "placed JOB/GROUP@NODE*N", "pending JOB/GROUP N REASON"
//	commit                               apply the last plan: the tasks leave
//	                                     their groups and take the nodes' room
func TestRoundScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/rounds/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			runRounds(t, string(b))
		})
	}
}

func runRounds(t *testing.T, script string) {
	in := &placement.Input{}
	p := placement.New(nil)
	var last *placement.Plan
	var want []string
	rounds := 0
	check := func(line int) {
		if last == nil {
			return
		}
		if got := describe(last); !slices.Equal(got, want) {
			t.Errorf("round %d (line %d): plan\n  %s\nwant\n  %s", rounds, line, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		want = nil
	}
	lines := strings.Split(script, "\n")
	expecting := false
	for n, line := range lines {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if expecting && (f[0] == "placed" || f[0] == "pending" || f[0] == "solve") {
			want = append(want, line)
			continue
		}
		if expecting {
			check(n + 1)
			expecting = false
		}
		kv := map[string]string{}
		for _, a := range f[1:] {
			k, v, _ := strings.Cut(a, "=")
			kv[k] = v
		}
		switch f[0] {
		case "node":
			c := api.Capacity{CPU: atoi(t, kv["cpu"]), Memory: atoi(t, kv["mem"]) << 30, Ports: 100}
			in.Nodes = append(in.Nodes, placement.Node{ID: f[1], Capacity: api.Allocatable{Online: c, Offline: c}, Free: api.Allocatable{Online: c, Offline: c}})
		case "group":
			job, grp, _ := strings.Cut(f[1], "/")
			g := placement.Group{Key: placement.GroupKey{Job: job, Group: grp}, Pending: atoi(t, kv["n"]),
				Demand: api.Capacity{CPU: atoi(t, kv["cpu"]), Memory: atoi(t, kv["mem"]) << 30}, QoS: api.QoSOffline,
				Priority: int32(atoi(t, kv["prio"])), Queue: kv["queue"]}
			if kv["qos"] == "online" {
				g.QoS = api.QoSOnline
			}
			_, g.Gang = kv["gang"]
			_, g.DistinctNodes = kv["distinct"]
			in.Groups = append(in.Groups, g)
		case "drop":
			in.Groups = slices.DeleteFunc(in.Groups, func(g placement.Group) bool { return g.Key.String() == f[1] })
		case "down":
			in.Nodes = slices.DeleteFunc(in.Nodes, func(nd placement.Node) bool { return nd.ID == f[1] })
		case "wait":
			d, err := time.ParseDuration(f[1])
			if err != nil {
				t.Fatalf("line %d: %v", n+1, err)
			}
			for i := range in.Groups {
				in.Groups[i].Waited += d
			}
		case "round":
			rounds++
			plan, err := p.Place(context.Background(), in)
			if err != nil {
				t.Fatalf("line %d: round %d: %v", n+1, rounds, err)
			}
			checkPlan(t, in, plan)
			fresh, err := placement.New(nil).Place(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if !gangFailed(plan) && !gangFailed(fresh) && plan.Stats.Cost != fresh.Stats.Cost {
				t.Errorf("line %d: round %d costs %d with the kept network, %d afresh", n+1, rounds, plan.Stats.Cost, fresh.Stats.Cost)
			}
			last, expecting = plan, true
		case "commit":
			commit(in, last)
		default:
			t.Fatalf("line %d: unknown command %q", n+1, f[0])
		}
	}
	if expecting {
		check(len(lines))
	}
}

// gangFailed reports whether a gang of the plan's round was left pending.
// Which gangs fail depends on the first solve's flow, of which several may
// be optimal; without a failed gang, the plan costs the optimum.
func gangFailed(p *placement.Plan) bool {
	return slices.ContainsFunc(p.Pending, func(pd placement.Pending) bool { return pd.Reason == placement.ReasonGang })
}

// describe lists a plan's assignments by group and node, then what stays
// pending.
func describe(p *placement.Plan) []string {
	out := []string{"solve cold"}
	if p.Stats.SolverAlgorithm != "cost scaling" {
		out[0] = "solve warm"
	}
	per := map[string]int64{}
	for _, a := range p.Assignments {
		per[a.Group.String()+"@"+a.Node] += a.Count
	}
	for _, k := range slices.Sorted(maps.Keys(per)) {
		out = append(out, fmt.Sprintf("placed %s*%d", k, per[k]))
	}
	for _, pd := range p.Pending {
		out = append(out, fmt.Sprintf("pending %s %d %s", pd.Group, pd.Count, strings.ReplaceAll(pd.Reason, " ", "-")))
	}
	return out
}

// commit applies plan to in as the FSM would: the placed tasks leave
// their groups and hold their nodes' resources (or the cached slots they
// reuse).
func commit(in *placement.Input, plan *placement.Plan) {
	for _, a := range plan.Assignments {
		gi := slices.IndexFunc(in.Groups, func(g placement.Group) bool { return g.Key == a.Group })
		ni := slices.IndexFunc(in.Nodes, func(n placement.Node) bool { return n.ID == a.Node })
		g, nd := &in.Groups[gi], &in.Nodes[ni]
		g.Pending -= a.Count
		nd.Free.AddTier(g.QoS, g.Demand, -(a.Count - int64(len(a.Slots))))
		nd.Slots = slices.DeleteFunc(nd.Slots, func(s placement.Slot) bool { return slices.Contains(a.Slots, s.ID) })
		if nd.Jobs == nil {
			nd.Jobs = map[string]bool{}
		}
		nd.Jobs[a.Group.Job] = true
	}
	in.Groups = slices.DeleteFunc(in.Groups, func(g placement.Group) bool { return g.Pending == 0 })
}

func atoi(t *testing.T, s string) int64 {
	if s == "" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("bad number %q", s)
	}
	return n
}

// TestRoundsRandom places random rounds with one Placer, committing each
// plan and changing the cluster between rounds (groups arrive and leave,
// nodes join, leave and free resources), and checks every round's plan
// against a fresh Placer's: valid, and of the same cost when no gang
// failed (the warm re-solve of the kept network finds the optimum).
func TestRoundsRandom(t *testing.T) {
	r := seedtest.Rand(t)
	warm, total := 0, 0
	for run := range 12 {
		in := randomInput(r, 10+r.IntN(30), 3+r.IntN(8))
		p := placement.New(nil)
		for round := range 12 {
			plan, err := p.Place(context.Background(), in)
			if err != nil {
				t.Fatalf("run %d round %d: %v", run, round, err)
			}
			checkPlan(t, in, plan)
			fresh, err := placement.New(nil).Place(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if !gangFailed(plan) && !gangFailed(fresh) && plan.Stats.Cost != fresh.Stats.Cost {
				t.Fatalf("run %d round %d: the kept network's plan costs %d, a fresh one's %d", run, round, plan.Stats.Cost, fresh.Stats.Cost)
			}
			total++
			if plan.Stats.SolverAlgorithm != "cost scaling" {
				warm++
			}
			if r.IntN(2) == 0 {
				// A quiet round: one node frees a little room.
				n := &in.Nodes[r.IntN(len(in.Nodes))]
				n.Free.Offline.CPU++
				continue
			}
			commit(in, plan)
			// Churn: new groups, a node leaves or joins, one frees room.
			more := randomInput(r, 2, 1+r.IntN(3))
			for i := range more.Groups {
				more.Groups[i].Key.Job = fmt.Sprintf("r%d-%d-%s", run, round, more.Groups[i].Key.Job)
			}
			in.Groups = append(in.Groups, more.Groups...)
			if len(in.Nodes) > 2 && r.IntN(3) == 0 {
				in.Nodes = slices.Delete(in.Nodes, 0, 1)
			}
			if r.IntN(3) == 0 {
				n := more.Nodes[0]
				n.ID = fmt.Sprintf("r%d-%d-%s", run, round, n.ID)
				in.Nodes = append(in.Nodes, n)
			}
			if len(in.Nodes) > 0 {
				n := &in.Nodes[r.IntN(len(in.Nodes))]
				n.Free = n.Capacity
				n.Jobs = nil
			}
			for i := range in.Groups {
				in.Groups[i].Waited += time.Duration(r.IntN(60)) * time.Second
			}
		}
	}
	t.Logf("%d of %d rounds re-solved warm", warm, total)
	if warm == 0 {
		t.Error("no round re-solved the kept network warm")
	}
}
