package server

import (
	"sync"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher"
	"github.com/sluicehq/sluice/dispatcher/fsm"
)

// servedTargets remembers, per node, the last target served to a long-poll
// that asked for differences (diff=1): its generation and its pods' task
// IDs and priorities. A node whose next poll names that generation gets
// only what changed since: the pods added and the task IDs removed, rather
// than every pod it already runs. The memory is this replica's alone; a
// new leader, or a poll naming another generation, gets the whole target.
type servedTargets struct {
	mu sync.Mutex
	m  map[string]servedTarget
}

type servedTarget struct {
	gen  uint64
	pods map[string]int32 // task ID → priority
}

// answer turns t, the target for a poll of node that knew generation
// known, into the response: with diff, the change since known when this
// replica served known last, else the whole target.
func (s *servedTargets) answer(node string, known uint64, diff bool, t dispatcher.Target) api.NodeTarget {
	if !diff {
		return api.NodeTarget{Generation: t.Generation, Pods: targetPods(t.Pods, nil)}
	}
	cur := make(map[string]int32, len(t.Pods))
	for _, p := range t.Pods {
		cur[p.TaskID] = p.Priority
	}
	s.mu.Lock()
	prev, ok := s.m[node]
	if s.m == nil {
		s.m = map[string]servedTarget{}
	}
	s.m[node] = servedTarget{gen: t.Generation, pods: cur}
	s.mu.Unlock()
	if !ok || prev.gen != known {
		return api.NodeTarget{Generation: t.Generation, Pods: targetPods(t.Pods, nil)}
	}
	out := api.NodeTarget{Generation: t.Generation, Base: known, Pods: targetPods(t.Pods, prev.pods)}
	for id := range prev.pods {
		if _, ok := cur[id]; !ok {
			out.Removed = append(out.Removed, id)
		}
	}
	return out
}

// targetPods converts pods to the api's, leaving out those already in
// known with the same priority.
func targetPods(pods []fsm.Pod, known map[string]int32) []api.TargetPod {
	out := make([]api.TargetPod, 0, len(pods))
	for _, p := range pods {
		if prio, ok := known[p.TaskID]; ok && prio == p.Priority {
			continue
		}
		out = append(out, api.TargetPod{TaskID: p.TaskID, Job: p.Job, Group: p.Group, QoS: p.QoS, Priority: p.Priority,
			MaxRunTime: api.Duration(p.MaxRunTime), Capbox: p.Capbox, InCapbox: p.InCapbox, Pod: p.Spec})
	}
	return out
}
