package dispatcher

import (
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/fsm"
	"github.com/sluicehq/sluice/dispatcher/placement"
)

// usageEstimate is the leader's estimate of what one task of a group uses
// (Hippo's app+role estimate), from the per-task usage of the nodes'
// heartbeats: a larger sample raises it at once; smaller ones lower it by
// estimateDecay of the difference per Config.EstimateDecayEvery, so it follows
// peaks more than troughs. The decay is by time, not by sample: a group
// of ten thousand tasks sends ten thousand samples a heartbeat period, and
// a decay per sample would drop its estimate to a trough within one.
type usageEstimate struct {
	cpu, mem float64
	at       time.Time // the last sample
}

// estimateDecay is how far smaller samples lower an estimate in
// Config.EstimateDecayEvery, as a share of the difference.
const estimateDecay = 0.2

// add folds sample u, taken at at, into e; every is
// Config.EstimateDecayEvery.
func (e *usageEstimate) add(u api.Usage, at time.Time, every time.Duration) {
	w := estimateDecay
	if !e.at.IsZero() {
		w *= min(1, max(0, float64(at.Sub(e.at))/float64(every)))
	}
	follow := func(est float64, sample int64) float64 {
		s := float64(sample)
		if s >= est {
			return s
		}
		return est - w*(est-s)
	}
	e.cpu, e.mem, e.at = follow(e.cpu, u.CPU), follow(e.mem, u.Memory), at
}

// estimateLocked folds a heartbeat's per-task usage into the groups'
// estimates and records in b what the node's reported online tasks are
// estimated to use and what they asked for. d.mu is held.
func (d *Dispatcher) estimateLocked(b *beat, tasks []api.TaskUsage, demands []fsm.TaskDemand, now time.Time) {
	b.onlineEst, b.onlineAsked = api.Capacity{}, api.Capacity{}
	for i, t := range tasks {
		dm := demands[i]
		if !dm.OK {
			continue
		}
		key := placement.GroupKey(dm.Group)
		e := d.mu.estimates[key]
		if e == nil {
			e = &usageEstimate{}
			d.mu.estimates[key] = e
		}
		e.add(t.Usage, now, d.cfg.EstimateDecayEvery)
		if dm.QoS == api.QoSOnline {
			b.onlineEst.CPU += int64(e.cpu)
			b.onlineEst.Memory += int64(e.mem)
			b.onlineAsked = b.onlineAsked.Plus(dm.Demand, 1)
		}
	}
}

// pruneEstimates drops the estimates of groups not heard of for
// EstimateMaxAge.
func (d *Dispatcher) pruneEstimates(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, e := range d.mu.estimates {
		if now.Sub(e.at) > d.cfg.EstimateMaxAge {
			delete(d.mu.estimates, k)
		}
	}
}

// estimateOffline lowers each node's free offline capacity in a round's
// input to what the node's online work leaves idle by the estimates: the
// node's online capacity, less its online tasks' estimated usage (those
// its last heartbeat reported; the others at what they asked for) with
// EstimateHeadroom on top, less what offline tasks hold. Nodes without a
// heartbeat of this term younger than EstimateMaxAge keep their static
// offline capacity, which also bounds the estimate. A node whose free
// offline capacity so differs from what the last round's placement saw is
// listed in in.Changed, for a Kept input. It reports whether it lowered
// any node's.
func (d *Dispatcher) estimateOffline(in *placement.Input) bool {
	if d.cfg.EstimateMaxAge <= 0 {
		return false
	}
	now := d.cfg.Clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.mu.leading {
		in.Kept = false // the last round's estimates are not known to hold
		return false
	}
	if d.mu.usageBeats == 0 {
		// No node sent usage this term: nothing is lowered, and the
		// nodes need no look each. What placement saw is no longer
		// recorded: the next pass starts afresh.
		d.mu.beatOf = nil
		return false
	}
	if len(d.mu.beatOf) != len(in.Nodes) {
		d.mu.beatOf = make([]nodeBeat, len(in.Nodes))
		in.Kept = false
	}
	lowered := false
	for i := range in.Nodes {
		n := &in.Nodes[i]
		nb := &d.mu.beatOf[i]
		if nb.b == nil || nb.id != n.ID {
			*nb = nodeBeat{id: n.ID, b: d.mu.beats[n.ID], offline: nb.offline}
		}
		raw := n.Free.Offline
		d.estimateNode(n, nb.b, now)
		lowered = lowered || n.Free.Offline != raw
		if n.Free.Offline != nb.offline {
			nb.offline = n.Free.Offline
			in.Changed = append(in.Changed, int32(i))
		}
	}
	return lowered
}

// estimateNode lowers n's free offline capacity by its beat b's usage, if
// b is of this term and fresh. d.mu is held.
func (d *Dispatcher) estimateNode(n *placement.Node, b *beat, now time.Time) {
	if b == nil || b.usageTerm != d.mu.term || b.usageAt.IsZero() || now.Sub(b.usageAt) > d.cfg.EstimateMaxAge {
		return
	}
	usedOnline := n.Capacity.Online.Plus(n.Free.Online, -1)
	usedOffline := n.Capacity.Offline.Plus(n.Free.Offline, -1)
	unreported := usedOnline.Plus(b.onlineAsked, -1)
	headroom := 1 + d.cfg.EstimateHeadroom
	idle := func(capacity, est, unrep, offline int64) int64 {
		return capacity - int64(float64(est)*headroom) - max(unrep, 0) - offline
	}
	n.Free.Offline.CPU = max(0, min(n.Free.Offline.CPU, idle(n.Capacity.Online.CPU, b.onlineEst.CPU, unreported.CPU, usedOffline.CPU)))
	n.Free.Offline.Memory = max(0, min(n.Free.Offline.Memory, idle(n.Capacity.Online.Memory, b.onlineEst.Memory, unreported.Memory, usedOffline.Memory)))
}

// EstimateTotals sums the usage estimates over the nodes whose offline
// capacity they lower: those with a heartbeat of this term younger than
// EstimateMaxAge.
type EstimateTotals struct {
	// Nodes is how many nodes the sums cover.
	Nodes int
	// OnlineUsage is what their last heartbeats said their online tiers
	// use.
	OnlineUsage api.Usage
	// OnlineEstimate is what the estimates say the online tasks of those
	// heartbeats use, before EstimateHeadroom; OnlineAsked what those
	// tasks asked for.
	OnlineEstimate, OnlineAsked api.Capacity
}

// EstimateTotals returns the sums of the usage estimates now; ok is false
// unless the replica leads (only the leader keeps estimates) and
// estimates are on (EstimateMaxAge above 0).
func (d *Dispatcher) EstimateTotals() (t EstimateTotals, ok bool) {
	now := d.cfg.Clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.mu.leading || d.cfg.EstimateMaxAge <= 0 {
		return t, false
	}
	for _, b := range d.mu.beats {
		if b.usageTerm != d.mu.term || b.usageAt.IsZero() || now.Sub(b.usageAt) > d.cfg.EstimateMaxAge {
			continue
		}
		t.Nodes++
		t.OnlineUsage.CPU += b.usage.Online.CPU
		t.OnlineUsage.Memory += b.usage.Online.Memory
		t.OnlineEstimate = t.OnlineEstimate.Plus(b.onlineEst, 1)
		t.OnlineAsked = t.OnlineAsked.Plus(b.onlineAsked, 1)
	}
	return t, true
}
