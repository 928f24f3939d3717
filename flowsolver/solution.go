package flowsolver

// Solution is a flow for a Graph and what proves it optimal.
type Solution struct {
	// Flow is the flow on each arc, by ArcID (len = Graph.ArcCap(); zero for
	// IDs not in use).
	Flow []int64
	// Potential is a price per node, by NodeID (len = Graph.NodeCap()), such
	// that every residual arc has a non-negative reduced cost
	// cost(u,v) + Potential[u] - Potential[v]: the certificate that Flow is
	// optimal. It is nil when Optimal is false.
	Potential []int64
	// Cost is the total cost: the sum over arcs of Flow times cost.
	Cost int64
	// Optimal is false when the solve stopped at its context's deadline
	// with a feasible flow that is not proven optimal.
	Optimal bool
	// Stats counts the work done.
	Stats Stats
}

// The algorithms a Stats.Algorithm names.
const (
	// AlgorithmCostScaling is cost scaling from zero flow.
	AlgorithmCostScaling = "cost scaling"
	// AlgorithmRepair is a warm start finished by successive shortest paths.
	AlgorithmRepair = "successive shortest paths"
	// AlgorithmRepairThenScaling is a warm start whose shortest paths ran
	// over budget, finished by cost scaling.
	AlgorithmRepairThenScaling = "successive shortest paths, then cost scaling"
)

// Stats counts a solve's work, for benchmarks and for tuning.
type Stats struct {
	// Algorithm names the algorithm that produced the flow: one of the
	// Algorithm constants.
	Algorithm string
	// Incremental is true when the solve started from the previous flow and
	// potentials rather than from zero.
	Incremental bool
	// Patched is true when an incremental solve brought the previous
	// residual network up to date in place, from the graph's journal of
	// changes, rather than laying it out afresh.
	Patched bool
	// Phases is the number of scaling phases (cost scaling) or of
	// shortest-path rounds (successive shortest paths).
	Phases int64
	// Pushes, Relabels and Augmentations count the basic operations.
	Pushes, Relabels, Augmentations int64
	// GlobalUpdates counts price updates by shortest-path search.
	GlobalUpdates int64
	// EarlyTermination is true when the flow was proven optimal before ε
	// reached its last phase.
	EarlyTermination bool
	// StartedOver is true when a warm start's cost scaling ran past its
	// budget and the solve started over from zero flow and prices.
	StartedOver bool
}
