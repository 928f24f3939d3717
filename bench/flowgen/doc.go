// Package flowgen generates seeded min-cost-flow instances shaped like a
// cluster scheduler's (Quincy's, as Firmament builds them) for the solver
// benchmarks: Generate builds one from a Config, Perturb changes it as one
// scheduling round would.
//
// # The workload
//
// Machines are split into racks and have 0 to Slots free slots each
// (uniform). Jobs hold the pending tasks (Tasks in all, split among Jobs
// evenly or with skewed sizes) and have each waited 0 to 1800 s (uniform).
// A data set is an input of 1 to 64 GB with three replicas: one machine in
// one rack and two machines in another; there are as many data sets as
// machines. A job's tasks are split into task groups of identical tasks:
// its tasks that read no data set form one group; the others
// (LocalShare of them, rounded at random per job) form groups of 1 to 15
// tasks, each group reading one data set drawn uniformly.
//
// # The network
//
// Per task (Config.Aggregated false), one node per task, supply 1:
//
//	         wait: 100 + seconds waited
//	task ──────────────────────────────► U_j ───────────────────────┐
//	  │ 8/GB (8 if no data)     0-16           4 per used slot        ▼
//	  ├──────────────────► X ────────► R_r ──────────────► M_m ────► sink
//	  │ 2/GB: the 2 racks of its data    ▲                  ▲  free    demand:
//	  ├──────────────────────────────────┘                  │  slots   all tasks
//	  │ 0: the 3 machines of its data                       │
//	  └─────────────────────────────────────────────────────┘
//
// Aggregated, one node per task group with supply = its count, feeding the
// equivalence class (EC) of its data set: one class node per data set in
// use and one for the groups that read none. The class carries the arcs a
// task would have to X and to its preferred racks and machines, with the
// same costs:
//
//	group ── wait ──► U_j ──► sink
//	  │ 0
//	  ▼
//	  EC ──► X, and for a data set: its 2 racks R_r and 3 machines M_m
//
// Capacities: a task's arcs carry 1 and a group's arcs its count; a class's
// arcs carry the tasks of its groups; U_j → sink carries job j's tasks, so
// every task can stay unscheduled and the instance is always feasible;
// M_m → sink and R_r → M_m carry the machine's free slots and X → R_r the
// rack's. Load costs: R_r → M_m costs 4 per used slot of the machine, and
// X → R_r 16 times the used fraction of the rack's slots, rounded. The
// sink's demand is the total supply. Lower bounds are all 0; every cost is
// between 0 and 1,900.
//
// Both renderings of one Config describe the same tasks with the same
// choices and costs, so their optimal costs are equal. Perturb's doc says
// exactly what one round of change does to either.
//
// # Sizes
//
// With R racks, M machines, J jobs, T tasks of which L read a data set, G
// groups and C class nodes of which C_L are for a data set (see Shape):
//
//	per task:    nodes = 2 + R + M + J + T        arcs = R + 2M + J + 2T + 5L
//	aggregated:  nodes = 2 + R + M + J + G + C    arcs = R + 2M + J + 2G + C + 5·C_L
//
// Nodes are added in this order: sink, X, racks, machines, (aggregated)
// classes, then for each job its U_j and its groups' or tasks' nodes. For
// the default Config (1,000 machines, 10,000 tasks) a per-task instance has
// about 11,100 nodes and 47,000 arcs; an aggregated one about 2,400 nodes
// and 6,600 arcs.
//
// # Usage
//
//	in, err := flowgen.Generate(flowgen.Config{Machines: 5000, Seed: 1})
//	if err != nil { ... }
//	var s flowsolver.Solver
//	sol, err := s.Solve(ctx, in.Graph)
//	ch, err := flowgen.Perturb(in, 0.01, rand.New(rand.NewPCG(1, 2)))
//	sol, err = s.Solve(ctx, in.Graph) // warm, from the previous optimum
package flowgen
