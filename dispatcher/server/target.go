package server

import (
	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/fsm"
)

// targetPods converts a target's pods to the api's.
func targetPods(pods []fsm.Pod) []api.TargetPod {
	out := make([]api.TargetPod, 0, len(pods))
	for _, p := range pods {
		out = append(out, api.TargetPod{TaskID: p.TaskID, Job: p.Job, Group: p.Group, QoS: p.QoS, Priority: p.Priority,
			MaxRunTime: api.Duration(p.MaxRunTime), Capbox: p.Capbox, InCapbox: p.InCapbox, Pod: p.Spec})
	}
	return out
}
