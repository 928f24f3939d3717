package chaosbench

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Kind is a kind of fault.
type Kind string

// The fault kinds. Each names what is hit and how; the replica it hits is
// resolved when the fault is injected.
const (
	// KillLeader kills the leading replica with SIGKILL and restarts it on
	// its data directory after the hold.
	KillLeader Kind = "kill-leader"
	// KillFollower does the same to a follower.
	KillFollower Kind = "kill-follower"
	// KillAll kills the three replicas at once and restarts them all
	// after the hold.
	KillAll Kind = "kill-all"
	// DiskFull fills the tmpfs the leader's data directory lives on: its
	// store fails and the process exits. After the hold the filler is
	// removed and the replica restarted. Needs root (to mount the tmpfs).
	DiskFull Kind = "disk-full"
	// SlowDisk makes every sync of the leader's store wait SyncDelay for
	// the hold (the replicas run with sluice dispatcher's hidden
	// --fault-sync-delay-file).
	SlowDisk Kind = "slow-disk"
	// PartitionFollower drops the raft traffic between a follower and
	// the others for the hold: the minority side.
	PartitionFollower Kind = "partition-follower"
	// PartitionLeader drops the raft traffic between the leader and the
	// others for the hold: the old leader's side, which must step down
	// while the majority elects another.
	PartitionLeader Kind = "partition-leader"
	// DelayFollower delays the raft traffic between a follower and the
	// others by the configured delay for the hold.
	DelayFollower Kind = "delay-follower"
	// KillFleet kills the fleet process running the most pods with SIGKILL (its simulated pods
	// die with it) and restarts it after the hold: its nodes register
	// again under the same names.
	KillFleet Kind = "kill-fleet"
	// FreezeFleet stops the fleet process running the most pods (SIGSTOP) for the node TTL
	// plus the hold, then lets it go on (SIGCONT): its nodes are cut off
	// from the dispatchers for longer than the TTL, marked down, their
	// tasks run again elsewhere, and the nodes, back, must stop their
	// stale pods. Frozen, the nodes do nothing meanwhile; their pods are
	// counted as running throughout.
	FreezeFleet Kind = "freeze-fleet"
	// KillNodelet kills the real nodelet running the most pods with
	// SIGKILL and restarts it on its state after the hold: its pods, kept
	// running by the shim, must be adopted, not started again. Needs root
	// and the container runtime.
	KillNodelet Kind = "kill-nodelet"
	// CutNodelet cuts the real nodelet running the most pods off from
	// every replica (the proxies it reaches them through close its
	// connections) for the nodelets' long-poll wait (2 s), 5/4 of the
	// node TTL (the TTL and a sweep of the dispatcher's liveness check)
	// and the hold, then heals: its tasks
	// run again on the other nodelet, and the node, back, must stop its
	// stale pods. Needs root and the container runtime.
	CutNodelet Kind = "cut-nodelet"
)

// Kinds lists every fault kind, in the order a schedule draws from.
var Kinds = []Kind{KillLeader, KillFollower, KillAll, DiskFull, SlowDisk, PartitionFollower, PartitionLeader, DelayFollower, KillFleet, FreezeFleet, KillNodelet, CutNodelet}

// ParseKinds parses a comma-separated list of kinds; "all" is every kind.
func ParseKinds(s string) ([]Kind, error) {
	if strings.TrimSpace(s) == "all" {
		return slices.Clone(Kinds), nil
	}
	var out []Kind
	for part := range strings.SplitSeq(s, ",") {
		k := Kind(strings.TrimSpace(part))
		if !slices.Contains(Kinds, k) {
			return nil, fmt.Errorf("chaosbench: unknown fault %q (want all or some of %s)", part, joinKinds(Kinds))
		}
		if slices.Contains(out, k) {
			return nil, fmt.Errorf("chaosbench: fault %q given twice", k)
		}
		out = append(out, k)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("chaosbench: no fault kinds given")
	}
	return out, nil
}

func joinKinds(ks []Kind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// Fault is one planned fault: after Gap of calm (from the previous fault's
// heal, or the start of the load), Kind is injected and held for Hold,
// then healed. Pick chooses among equal candidates (followers, the
// fleet processes running the most pods) when the fault is injected: the
// candidate at Pick modulo their number, in ID order.
type Fault struct {
	Kind Kind          `json:"kind"`
	Gap  time.Duration `json:"gap_ns"`
	Hold time.Duration `json:"hold_ns"`
	Pick int           `json:"pick"`
}

func (f Fault) String() string {
	return fmt.Sprintf("%-18s after %5.1fs calm, held %5.1fs (pick %d)", f.Kind, f.Gap.Seconds(), f.Hold.Seconds(), f.Pick)
}

// Schedule draws Rounds×len(kinds) faults from seed: each round has every
// kind once, in an order drawn from the seed, each with a gap drawn from
// [minGap, 2·minGap) and a hold from [minHold, 2·minHold). The same
// arguments give the same schedule.
func Schedule(seed uint64, kinds []Kind, rounds int, minGap, minHold time.Duration) []Fault {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out []Fault
	for range rounds {
		order := slices.Clone(kinds)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, k := range order {
			out = append(out, Fault{
				Kind: k,
				Gap:  minGap + time.Duration(rng.Int64N(int64(minGap)+1)),
				Hold: minHold + time.Duration(rng.Int64N(int64(minHold)+1)),
				Pick: rng.IntN(1 << 16),
			})
		}
	}
	return out
}
