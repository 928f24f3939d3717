package server

import (
	"slices"
	"strings"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher"
	"github.com/sluicehq/sluice/dispatcher/fsm"
	"github.com/valyala/fasthttp"
)

// cluster serves GET /v1/cluster: the nodes' totals, queues (those a
// scoped submitter may use), task and job counts, and the recent rounds.
func (h *Handler) cluster(ctx *fasthttp.RequestCtx, p Principal, _ []string) *httpError {
	if e := checkQuery(ctx, "consistent"); e != nil {
		return e
	}
	if e := h.consistent(ctx); e != nil {
		return e
	}
	st := h.cfg.Raft.Status()
	out := api.ClusterStatus{Replica: st.ID, Leader: st.Leader, IsLeader: st.IsLeader, Term: st.Term,
		Applied: h.cfg.FSM.Applied(), Queues: []api.QueueSummary{}, Jobs: map[api.JobState]int64{}, Rounds: []api.RoundInfo{}}
	counts := h.cfg.FSM.QueueCounts()
	for _, name := range h.cfg.Dispatcher.WeightedQueues() {
		if i, found := slices.BinarySearchFunc(counts, name, func(q fsm.QueueCount, n string) int { return strings.Compare(q.Name, n) }); !found {
			counts = slices.Insert(counts, i, fsm.QueueCount{Name: name})
		}
	}
	for _, c := range counts {
		if !p.mayQueue(c.Name) {
			continue
		}
		q := api.QueueSummary{Name: c.Name, Weight: h.cfg.Dispatcher.QueueWeight(c.Name), Jobs: map[api.JobState]int64{},
			Tasks: api.TaskCounts{Total: c.Tasks.Count, Pending: c.Tasks.Pending, Retrying: c.Tasks.Retrying, Active: c.Tasks.Active,
				Succeeded: c.Tasks.Succeeded, Failed: c.Tasks.Failed, Killed: c.Tasks.Killed}, Used: c.Used}
		for s, n := range c.Jobs {
			if n > 0 {
				state := api.JobState(fsm.JobState(s).String())
				q.Jobs[state] = n
				out.Jobs[state] += n
			}
		}
		out.Tasks.Add(q.Tasks)
		out.Queues = append(out.Queues, q)
	}
	for _, r := range h.cfg.Dispatcher.Rounds() {
		out.Rounds = append(out.Rounds, roundInfo(&r))
	}
	t := h.cfg.Dispatcher.Totals()
	out.RoundTotals = api.RoundTotals{Rounds: t.Rounds, Placed: t.Placed, Rejected: t.Rejected, Preempted: t.Preempted}
	out.Nodes = h.nodeTotals()
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}

// nodeTotals sums the registered nodes, as GET /v1/nodes lists them.
func (h *Handler) nodeTotals() api.NodeTotals {
	out := api.NodeTotals{States: map[api.NodeState]int64{}}
	var usage api.NodeUsage
	add := func(sum *api.Usage, u api.Usage) {
		sum.CPU += u.CPU
		sum.Memory += u.Memory
	}
	for _, n := range h.cfg.FSM.Nodes() {
		out.Total++
		out.States[n.State]++
		a := n.Spec.Allocatable
		out.Allocatable.Online = out.Allocatable.Online.Plus(a.Online, 1)
		out.Allocatable.Offline = out.Allocatable.Offline.Plus(a.Offline, 1)
		out.Used.Online = out.Used.Online.Plus(n.Used.Online, 1)
		out.Used.Offline = out.Used.Offline.Plus(n.Used.Offline, 1)
		if u, _, ok := h.cfg.Dispatcher.NodeUsage(n.Spec.Name); ok {
			out.UsageNodes++
			add(&usage.Total, u.Total)
			add(&usage.Online, u.Online)
			add(&usage.Offline, u.Offline)
		}
	}
	if out.UsageNodes > 0 {
		out.Usage = &usage
	}
	return out
}

func roundInfo(r *dispatcher.RoundStat) api.RoundInfo {
	return api.RoundInfo{At: r.At.UTC(), Term: r.Term, Tasks: r.Tasks, Groups: r.Groups, Nodes: r.Nodes,
		Placed: r.Placed, Rejected: r.Rejected, Unplaced: r.Unplaced, Preempted: r.Preempted,
		FlowNodes: r.FlowNodes, FlowArcs: r.FlowArcs, Cost: r.Cost, Optimal: r.Optimal,
		Latency: r.Latency.Seconds(), Build: r.Build.Seconds(), Solve: r.Solve.Seconds(), Commit: r.Commit.Seconds(), Err: r.Err}
}

// whoami serves GET /v1/whoami.
func (h *Handler) whoami(ctx *fasthttp.RequestCtx, p Principal, _ []string) *httpError {
	if e := checkQuery(ctx); e != nil {
		return e
	}
	writeJSON(ctx, fasthttp.StatusOK, api.Whoami{Role: p.Role.String(), Queues: p.Queues, Node: p.Node, Job: p.Job,
		Auth: h.cfg.Tokens != nil})
	return nil
}

// getNode serves GET /v1/nodes/{name}: the node as listed, and the pods
// of its target with their tasks' states.
func (h *Handler) getNode(ctx *fasthttp.RequestCtx, p Principal, args []string) *httpError {
	if e := checkQuery(ctx, "consistent"); e != nil {
		return e
	}
	if e := h.consistent(ctx); e != nil {
		return e
	}
	name := args[0]
	var out api.NodeDetail
	n, found := h.cfg.FSM.Node(name)
	if found {
		out.NodeInfo = h.nodeInfo(&n)
	}
	_, pods, ok := h.cfg.FSM.NodeTarget(name)
	if !found || !ok {
		return errorf(fasthttp.StatusNotFound, api.CodeNotFound, "no node %q", clip(name, 80))
	}
	out.Pods = make([]api.NodePod, 0, len(pods))
	for i := range pods {
		tp := &pods[i]
		np := api.NodePod{TaskID: tp.TaskID, Job: tp.Job, Group: tp.Group, QoS: tp.QoS, Capbox: tp.Capbox, InCapbox: tp.InCapbox}
		for _, c := range tp.Pod.Containers {
			np.Resources.CPU += c.Resources.CPU
			np.Resources.Memory += c.Resources.Memory
			np.Resources.GPUs += c.Resources.GPUs
			np.Resources.Disk += c.Resources.Disk
		}
		if t, ok := h.cfg.FSM.Task(tp.TaskID); ok {
			np.State = t.State
		}
		out.Pods = append(out.Pods, np)
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}
