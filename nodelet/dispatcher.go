package nodelet

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet/cgroup"
)

// Dispatcher is the agent's view of the dispatcher: where its target comes
// from and where its reports go. The HTTP client implements it; tests use
// a fake. Both methods are called from the agent's own goroutines, at most
// one call of each at a time. A Dispatcher may also implement
// UsageReporter.
type Dispatcher interface {
	// Target long-polls for the node's target: it returns the current one
	// as soon as its generation differs from knownGeneration, or blocks
	// until it does or ctx is done. A returned error is retried with
	// backoff. When knownGeneration is not zero and is the Generation of
	// the target this Dispatcher returned last, it may return only the
	// changes since (Target.Base): the agent then does work in proportion
	// to the changes, not to the pods on the node.
	Target(ctx context.Context, node string, knownGeneration uint64) (Target, error)
	// Report delivers state changes, oldest first. Returning nil
	// acknowledges all of them; on an error the agent sends the same
	// reports again (plus newer ones) after a backoff, so delivery is at
	// least once and in order: the dispatcher must treat a repeated
	// report as a no-op. The agent reuses the slice reports after the
	// call returns: Report must not keep it.
	Report(ctx context.Context, node string, reports []PodReport) error
}

// UsageReporter is an optional capability of a Dispatcher: one that
// implements it receives the node's usage, a heartbeat, every
// Config.HeartbeatPeriod while the agent runs an overcommit loop
// (Config.Overcommit), the source of the usage; without one the agent
// sends none. Heartbeat is called from one goroutine of the agent, at most
// one call at a time, concurrently with Target and Report; its context
// ends after one HeartbeatPeriod. An error is logged and counted, not
// retried: the next period sends the newest usage then.
type UsageReporter interface {
	// Heartbeat delivers the node's usage now: per tier, and the tiers'
	// sum as the total.
	Heartbeat(ctx context.Context, node string, usage api.NodeUsage) error
}

// Target is the set of pods the dispatcher wants on the node, whole or as
// the changes since the previous one.
type Target struct {
	// Generation increases with every change of the set.
	Generation uint64
	// Base is zero for a whole target: Pods are the desired pods. When not
	// zero, the target is the one of generation Base (the knownGeneration
	// of the Target call) changed: Pods are the pods added or changed, and
	// Removed the IDs of pods no longer desired.
	Base uint64
	// Pods are the desired pods, or those added or changed since Base;
	// their IDs are unique.
	Pods []DesiredPod
	// Removed are the IDs of the pods of the target of generation Base
	// that are no longer desired (only when Base is not zero).
	Removed []string
}

// DesiredPod is one pod the dispatcher wants running.
type DesiredPod struct {
	// ID names the pod on the host (runtime.CheckName rules).
	ID string
	// TaskID is the dispatcher's task the pod runs; reports carry it.
	// Default: ID.
	TaskID string
	// Generation tells successive pods of one task apart: a pod running
	// with another generation is stopped and the new one started.
	Generation int64
	// Tier is the cgroup tier the pod runs in: cgroup.Online or
	// cgroup.Offline. Empty means offline (api's default QoS).
	Tier cgroup.Tier
	// Priority orders offline pods for the memory killer: lower dies
	// first. It is the api's int32, and it shares a word with Capbox:
	// the struct stays within 128 bytes, up to which Go's maps keep
	// their values in place rather than each in an allocation of its own
	// (the agent and the remote Dispatcher keep maps of them, an entry a
	// pod).
	Priority int32
	// Capbox makes the pod a capbox's placeholder (runtime.PodSpec's
	// Placeholder): Pod's one container only says what it holds.
	Capbox bool
	// Pod is the pod's api spec, as decoded (defaulted) by api; never
	// nil. The pods of a task group may share it: treat it as read-only.
	// A pointer keeps DesiredPod within 128 bytes (see Priority).
	Pod *api.PodSpec
	// Group is the pod's task group and job, which the pods of a group
	// may share: treat it as read-only. Nil: none known (no run time
	// limit; the identity the containers get comes from TaskID alone).
	Group *Group
	// InCapbox is, for a task an appmaster runs in a capbox, the ID of
	// the capbox's placeholder pod (runtime.PodSpec's InPod).
	InCapbox string
	// Ports are the pod's ports as the dispatcher placed them (numbered
	// on the node, in the order its containers list them): each becomes
	// a runtime.PortMapping and its api.PortEnvName variable. Nil for
	// none.
	Ports []api.Port
}

// Group is what the pods of one task group share: their job and group,
// which the node gives their containers (api.EnvJobID and the others),
// and the job's run time limit.
type Group struct {
	// Job is the job's ID; JobName its name.
	Job, JobName string
	// Name is the group's name, and Count its number of tasks (0:
	// unknown, as from a dispatcher of the release before).
	Name  string
	Count int64
	// Token is, for an appmaster job's own groups, the job's token
	// (api.TargetPod.Token), which the containers get as api.EnvToken;
	// empty for every other group. A secret: never logged.
	Token string
	// MaxRunTime, when positive, is how long the pod may run: the agent
	// stops it that long after it started (for an adopted pod, after the
	// runtime says it started) and reports it killed with
	// api.ReasonTimeLimit.
	MaxRunTime time.Duration
}

// maxRunTime is d's Group's MaxRunTime, 0 without a Group.
func (d *DesiredPod) maxRunTime() time.Duration {
	if d.Group == nil {
		return 0
	}
	return d.Group.MaxRunTime
}

// PodReport is a state change of one pod: the task report the dispatcher
// consumes plus the pod's identity on the host.
type PodReport struct {
	// PodID and Generation name the pod; TaskReport.TaskID its task.
	PodID      string
	Generation int64
	api.TaskReport
}
