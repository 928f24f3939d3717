// Package placement decides where a scheduling round's tasks run: a pure
// function from a snapshot of the cluster (nodes with their free resources,
// labels, pools and cached slots) and the round's pending task groups to a
// plan (task-group → node assignments) and a diagnosis of what stays
// pending and why.
//
// A round is solved as one min-cost flow problem (Quincy and Firmament's
// model, DESIGN.md "Place"): every task group is a node whose supply is its
// pending count (identical tasks are never one node each); groups that are
// interchangeable for placement (same per-task demand, QoS class, pool,
// constraints, policy) share an equivalence class, which has arcs to its
// candidate cluster nodes with the capacity of how many of its tasks fit
// there and the cost its policy's scorers give; a group with preferred
// nodes also has arcs straight to them, cheaper by the locality bonus; every
// group can instead stay unscheduled at a cost that rises with its priority
// and its wait, so the solver places what it can, higher priority first.
// Within a priority, a task costs more to leave unscheduled the further
// below their fair shares its queue, then its job, are (weighted max-min
// fairness on the dominant resource between queues, Input.Queues giving
// weights and what queues run, then equal shares between a queue's jobs,
// Group.JobRunning giving what each runs; in eighths of the share, coarser
// when a round holds so many priorities that the solver's cost bound
// requires), so the queues and jobs furthest below their shares win
// contended capacity and none starves behind another's backlog; the wait
// then breaks ties.
// Filters (hard rules) decide which nodes are candidates and count what
// they reject; scorers (soft preferences) set costs. Both are plugins in a
// Registry, chosen per job by name with weights.
//
// The flow is single-commodity, so a node's arcs cannot express that tasks
// of different shapes share its resources: the plan is decoded into
// assignments and checked against every resource dimension in priority
// order, and what does not fit stays pending for the next round with a
// reason. A gang group is placed whole or not at all (when every group of
// a round is a gang that failed, the round is placed again without the
// last one, since gangs can crowd each other out).
//
// The flow network is kept from round to round (network.go): each round
// states its nodes and arcs by identity (a class by its key, a machine by
// name, a group by its key), and the kept graph is changed to match, so
// that a round that changed little is re-solved warm from the previous
// optimum. A busy scheduler round changes more of the network than it
// holds (BenchmarkRounds), and past one change per eight nodes and arcs
// the solve starts from zero, which is then cheaper.
//
// A Placer also keeps, for each class of its last round (up to
// maxCachedClasses), the verdict of the class's filters and scorers on
// every node. An input marked Kept lists the positions of the nodes that
// changed since the input the Placer last saw (Input.Changed), and only
// those are judged again; the cheapest candidates are then chosen by
// counting the admitted nodes per cost (costs run from 0 to a bound), not
// by sorting them. So a round on 10,000 nodes of which a hundred changed
// filters and scores a hundred per class. Filters and scorers must depend
// only on the class and the node they are given.
//
// A queue may have hard caps (Queue.Caps: CPU, memory, GPUs, active
// tasks). They are kept around the flow, which cannot hold a bound on a
// sum of demands of many shapes (quota.go): a group is offered only what
// fits under its queue's caps on its own, the fit check counts each
// queue's use in priority order and cuts what would pass a cap (a gang
// cut short is not placed), and a round that cut anything is placed again
// with the cut queues' groups offered what fitted, so that other queues
// get the capacity. Held tasks stay pending with QuotaReason's reason.
//
// Preempt is the second step of a round whose plan left offline groups
// pending for lack of capacity: it chooses running offline tasks of a lower
// priority to stop, at most a limit, per task the node where the fewest
// victims of the lowest priority make room (lowest priority first, then
// the most recently started), after counting what tasks already told to
// stop will release.
//
// # Invariants
//
//   - No queue is assigned a task that takes what its active tasks hold,
//     with the round's assignments, past any of its caps.
//   - No node is assigned more than its free resources in any dimension,
//     counting online work against the online pool and offline work
//     against the offline pool; a cached slot is reused at most once.
//   - Every pending task of the input is either assigned exactly once or
//     reported pending with a reason; the counts add up per group.
//   - Place does not change its input. It keeps the flow network and the
//     solver's last optimum between calls; a fresh Placer gives the same
//     input the same plan, and a kept one a plan of the same cost (which
//     gangs fail aside: several flows may be optimal).
package placement
