// Package fsm is the dispatcher's state machine: the only writer of
// dispatcher state. It is a raftkv.StateMachine (and raftkv.Loader): every
// change is a committed raft command applied by Apply, in log order, on every
// replica, deterministically. It owns jobs, task groups, tasks, nodes and
// the pending queues, cached slots and capboxes.
//
// # Tasks without a key per pending task
//
// A task group of Count tasks costs no key at submit, however large the
// array, and one group record once its first task is placed or dropped:
// the group keeps its counters, the next never-placed task index, and a
// list of requeued indexes (retries, each with the time it may run again).
// A group without a record is in its initial state (nothing placed), which
// Load gives every group before it reads the records; a group never
// returns to that state (its next index only grows). A task gets a record
// when a plan first places it; reports update it. At all times, per group,
//
//	(count - next) + len(requeue) + active + succeeded + failed + killed == count
//
// A task's ID names its attempt: "<job>/<group index>/<task index>/<attempt>"
// (for example "j7/0/42/1"), so a late report about an earlier attempt is
// recognised as stale and ignored.
//
// # Key layout (relative to the state machine's keyspace)
//
//	s/job                                 next job number (8 bytes big-endian)
//	m/planterm                            highest term of a committed plan
//	m/applied                             index of the last applied command
//	J/<job u64 BE>                        the new jobs of one submit, from this
//	                                      number on: submit time, spec layout,
//	                                      count, block of specs (compressed
//	                                      when large);
//	                                      deleted with the last of its jobs
//	f/<job u64 BE>                        (empty) a job forgotten while its
//	                                      submit record holds others, so that
//	                                      Load leaves it out; deleted with the
//	                                      record
//	j/<job u64 BE>                        job: submit time, cancelled, spec
//	                                      layout, spec (binary);
//	                                      written when a job changes (a cancel),
//	                                      superseding its submit record's copy
//	g/<job u64 BE><group u16 BE>          group counters and requeue list
//	                                      (none while nothing was placed)
//	t/<job u64 BE><group u16 BE><idx u32 BE>   task record (binary): the
//	                                      group's placed tasks from idx, a
//	                                      multiple of 64 (taskChunk), up to
//	                                      64 of them, their nodes named once
//	n/<node name>                         node: state, spec (JSON), drain
//	                                      (a flag and a deadline)
//	N/<node name>                         its target generation (8 bytes
//	                                      big-endian), apart: it changes with
//	                                      nearly every command that places or
//	                                      ends a task there, the spec hardly
//	                                      ever, and a command then writes 8
//	                                      bytes for the node, not its spec
//	i/<idempotency key>                   job number
//	s/slot                                next cached slot number
//	c/<node name>\x00<slot id>            cached slot: QoS, shape, expiry
//	b/<set u64 BE>                        capbox set: submit time, released,
//	                                      appmaster's number, request (JSON)
//	k/<set u64 BE><0 u16><idx u32 BE><name>  capbox task: state, stop, exit,
//	                                      reason, updated, pod (JSON)
//	h/<job u64 BE>                        summary of a forgotten job (history.go):
//	                                      submit, start and end times, final
//	                                      state, name, queue, labels, task
//	                                      counts, first failure
//	q/<queue name>                        queue settings (SetQueue): weight,
//	                                      caps on cpu, memory, gpus, tasks
//
// Per-job scans ("t/<job>", "g/<job>") are range scans, and forgetting
// jobs deletes ranges (one per prefix for each run of numbers all
// forgotten); what each node holds is derived from the task records by
// Load, not stored. Every record but the plain numbers (s/, m/, i/, N/)
// and the markers (f/) starts with a version byte: 1, 6 for job
// records (binary spec since 2, appmaster since 3, pod networks and
// volumes since 4, simulated usage since 5, the spec's layout since 6), 5
// for submit records (a block of specs since 2, pod networks and volumes
// since 3, simulated usage since 4, the specs' layout since 5), 3 for node
// records (no generation since 2, the drain since 3), 2 for group records
// (the group's start since 2; Load reads 1 as a group without one), 4 for
// task records (up to 64 tasks since 2, their nodes named once since 3,
// each task's ports since 4). Load reads job records from 3 and submit
// records from 2 (before the layout byte, their specs are of layout 0), a
// task record of 3 as tasks without ports, a node record of 2 as drained
// without a deadline when draining, and rejects any other version with
// ErrCorrupt. A node spec is JSON, so a node record of the release before
// (without a port range) reads as a node without one.
//
// # In memory
//
// Jobs (capbox sets included) are numbered densely from 1, so they live
// in a table indexed by number, in pages freed once every job of theirs
// is forgotten; Load refuses a record numbered outside 1 to the job
// sequence. The groups with tasks waiting for
// placement form a set kept in a slice, each group knowing its place in it;
// the groups and nodes a command changes are listed once each (a mark on
// the element) and settled (pending set, the job's last change, target
// generation, the command's change set) when the command ends. Specs decoded from one command or one load share
// the maps (labels, environment) that encode alike; decoded specs are
// never changed.
//
// # Deferred records
//
// The records that change most — task records (placed, running, ended
// within a second or two), group records and target generations (with
// nearly every command that places or ends a task) — are not written by
// the command that changes them. The task, group or node is listed once
// (a mark on it), and WriteDeferred (raftkv.Deferrer) writes each listed
// record as it is then, with the applied index (m/applied), when the
// replica stores its applied state (raftkv.Config.ApplyWriteInterval,
// 3 s by default): a task mostly costs the store one record write instead
// of three, and a node one generation per stored state instead of one per
// command. A task record holds up to 64 tasks of a group, so the tasks of
// an array that change together (placed together, running together) reach
// the store as one write, not one each: pebble's memtable inserts are a
// large share of a loaded dispatcher's CPU, and task records most of them.
// The records of a job forgotten in between are not written (its range
// deletions came first). What the store holds is therefore the state as of the
// stored applied index, which is what Load and a snapshot need; the log
// holds the commands after it, and a restart applies them again.
//
// # Commands
//
// A command is a tag byte, a version byte, the proposer's clock (varint unix
// nanoseconds; Apply never reads a clock) and a payload. Commands are
// hand-encoded varints and strings; node specs are JSON inside their
// commands and records. Apply reads the commands of the versions before
// too (from oldestCommandVersion), so a log written by the releases before
// replays. Update commands carry two reports a task: a report names its
// node only where it changes (a node's reports come together), and its
// reason as a code: 17 bytes in all.
//
// Job specs are binary (spec_codec.go): every field of api.JobSpec in
// declaration order, strings length-prefixed, integers and durations as
// varints, pointers behind a presence byte, maps in sorted key order, empty
// collections decoding as nil as api.DecodeJobs reads what encoding/json
// writes. The codec is generated from api's types (spec_bin_gen.go,
// written by internal/codecgen through the generate directive in
// spec_codec.go; TestGeneratedCodecsCurrent fails while it is stale): the
// append and decode functions of each spec type, min<T>Bytes (the fewest
// bytes of each), and the skim's walk over the fields (skimJobSpec and the
// skimmers it calls: what apply does not need is skipped, each field it
// takes is handed to a skimmer method). Every stored spec is of a layout,
// stored beside it: submit commands, submit records and job records carry
// it. The codec writes the current layout, specLayout, and reads every
// one before it; layout 0 is the releases before's, whose pods had a
// hand-written layout (decodePodSpecLegacy), and apply converts a submit
// command's specs of an earlier layout to the current one before reading
// them. Adding a field to a spec type is, after api (see its doc),
// tagging it codec:"since=N" (N one past the current layout, which then
// becomes N), go generate ./dispatcher/fsm, and writing the new layout's
// corpus (go test ./dispatcher/fsm -run TestSpecLayouts
// -update-spec-layouts): TestSpecLayouts fails until both are done, and
// for a field added without since=. The skim skips the field unless
// apply needs it, when it joins the directive's -read list with a skimmer
// method.
//
// A submit command is the specs' layout, a count and each spec
// length-prefixed, with its defaults applied: SubmitJobs validates the specs with
// api.ValidateJobs before it encodes them, so an invalid spec is never
// proposed, and apply trusts them (validating again on every replica would
// cost apply time, and would let a replay under a version whose validation
// differs diverge from the first run). Apply only skims them
// (skimSpec, a reader by index that builds nothing else): it copies into
// the job the fields that applying later commands needs (queue, pool, QoS,
// priority, distinct nodes, appmaster, retry policy, constraints; each
// group's name, count, and demand summed over its pod's containers). The
// skim accepts exactly the encodings the full decoder accepts (FuzzSkim).
// The spec stays encoded in one shared copy of the command until the
// leader's rounds or node targets, or a read, decode it, once
// (job.specOf), so a follower never decodes one: a decoded spec and its
// task groups would be a large part of a submitted job's memory on every
// replica, with the page faults and collector work that memory costs. It
// stores the new jobs' specs' bytes, as submitted, in one submit record: a
// submit of a thousand jobs writes one key, not a thousand, which spares
// the store a thousand memtable inserts and their rewrites in every flush
// and compaction. The command carries its specs as one block, s2-compressed
// by SubmitJobs when it is 4 KiB or more (bulk submits repeat images,
// commands and resources from job to job: the benchmark's thousand specs
// take 96 KB plain and 10 KB compressed), and the submit record keeps that
// block as it came, so the specs are compressed once, on the leader, and
// every replica writes the small form to its store. Apply decompresses the
// block into the memory its jobs' strings then share.
//
//	SubmitJobs      many jobs; validated with api.ValidateJobs when the command
//	                is built, rejected whole with every problem named;
//	                idempotency keys answer with the first job's ID
//	RegisterNode    a node joins, or updates its spec
//	SetNodeState    ready, draining, down; down ends its tasks as lost and
//	                retries them per their job's retry policy; a drained
//	                node that was down comes back draining; draining
//	                drains without a deadline, ready undrains
//	DrainNode       an operator drains a node (drain.go): it takes no new
//	                task and keeps its drain through re-registering and
//	                going down; at its deadline EndDrain, proposed by the
//	                leader by its clock, ends its active tasks as a node
//	                going down does, but requeued at once whatever their
//	                attempts, with reason drained
//	UndrainNode     the drain ends; the node is ready unless down
//	RemoveNode      a drained or down node without active tasks is
//	                forgotten (ErrNodeBusy otherwise); its name registers
//	                afresh
//	CommitPlan      a round's assignments: each is checked (job exists and not
//	                cancelled, group has that many eligible pending tasks, node
//	                exists, is ready and matches pool and constraints, distinct
//	                nodes, every resource dimension fits the node's free
//	                capacity for the job's QoS tier, the pod's ports fit:
//	                ports.go) and applied, or rejected alone with a
//	                RejectCode (Nomad's plan applier); a task's dynamic
//	                ports are assigned as it is applied. A plan from a term
//	                older than a committed plan's is rejected whole.
//	UpdateTasks     nodelet reports (UpdateTasksCaching: a task that ends on its
//	                own leaves its resources cached on its node as a slot for
//	                the command's TTL; a plan's assignment may name slots of
//	                its node to reuse, each of the task's class and holding
//	                its demand; slots end at their TTL, checked after every
//	                command by its clock, or when the node goes down); each transition checked with
//	                api.CheckTaskTransition; a repeat of the current state is a
//	                no-op and a late repeat of an earlier one (running after
//	                succeeded) is stale; one illegal transition rejects the
//	                whole command;
//	                failures with attempts left are requeued with backoff
//	                (not tasks the nodelet stopped at their job's MaxRunTime)
//	CancelJob       pending tasks dropped, active tasks leave their nodes'
//	                targets and free their resources when reported stopped
//	PreemptTasks    running offline tasks stopped for a pending offline group
//	                of a strictly higher priority: each checked and applied or
//	                rejected alone (like a plan's assignments, and refused
//	                whole from an older term); a victim leaves its node's
//	                target, its resources count as releasing until it is
//	                reported stopped, and it is then requeued at once
//	                whatever its attempts, with reason preempted
//	CreateCapboxes  an appmaster job (JobSpec.Appmaster) asks for capboxes:
//	                each request becomes a capbox set, a job of its own
//	                numbered with the jobs, whose one group holds the
//	                request's capboxes as tasks (queue, pool, priority and
//	                QoS from the appmaster; never retried, never preempted;
//	                AllOrNothing makes the group a gang). A capbox's ID is
//	                its task's only attempt ("j9/0/3/1"). Targets mark its
//	                pod as a capbox placeholder
//	ReleaseCapboxes capboxes by ID: pending ones are dropped (one in the
//	                middle of the never-placed range first gets records for
//	                the indexes before it, requeued), active ones told to
//	                stop as a cancel does. Cancelling an appmaster, or its
//	                tasks all ending, releases its capbox sets
//	StartCapTasks   an appmaster's tasks in its running capboxes, all or
//	                none: each fits in its capbox beside the capbox's tasks
//	                that have not ended, or the command is rejected; a name
//	                taken in the capbox answers with its task. A capbox task
//	                ("j9/0/3/1/name") starts assigned in its node's target,
//	                is never retried, and ends by its node's report, with its
//	                capbox (told to stop when the capbox is, killed or lost
//	                when it ends), or stopped by StopCapTasks
//	ForgetJobs      finished jobs by ID (the leader names those finished for
//	                its retention: Forgettable): each finished one is removed
//	                from memory and store, records, tasks, idempotency key
//	                and, for an appmaster, capbox sets; the others named are
//	                kept. A job is finished once it ended (succeeded, failed,
//	                cancelled) with no task pending or active, and so did its
//	                capbox sets; nothing brings it back, so the check is the
//	                same on every replica whatever each thinks its end time
//	                (Load takes its tasks' last change)
//	                (ForgetJobsToHistory: each job forgotten leaves its
//	                summary, written by the same command, so every replica
//	                holds the same history)
//	PruneHistory    summaries by ID (the leader names those past
//	                HistoryPrunable's age or count); the others named are
//	                kept
//
// # Invariants
//
// A command that fails has written nothing and changed nothing: every check
// runs before the first write or in-memory change (UpdateTasks checks all its
// reports against an overlay first; a plan's per-assignment checks cannot
// fail the command). No node holds more than its allocatable in any
// dimension of either tier (unless a re-registration shrank it). A task is
// active on at most one node. The in-memory indexes (resources held per
// node, active tasks per node and per group, pending groups per queue,
// target generations) are derived from the store by Load and kept in step by
// Apply; the tests rebuild them after every random command and compare.
//
// Every finished job not forgotten is in the finished queue exactly once,
// in the order the jobs finished; idempotency keys and their jobs name
// each other; each submit record counts the jobs of it not forgotten; and
// the store holds no record numbered by a forgotten job (the tests check
// these after every random command).
//
// A round's input is read through ReadRound (RoundRead: the nodes, the
// pending groups and the queues' use, under the read lock, in the FSM's
// own terms); the view that builds placement's input from it, and keeps
// it from round to round, is package dispatcher/roundinput. Each
// command's change set names the nodes whose part of a round's input
// (spec, held and releasing resources, cached slots, distinct-node jobs,
// ports) it changed, and says when which nodes are ready may have changed
// (a node joins or changes state), which is what that view needs to read
// again only the nodes that changed. The random-command tests check after
// every command that an input so kept is the one read whole.
//
// A node's target (NodeTarget) has a generation, stored, which a command
// that changes the target moves once. The FSM keeps no journal of the
// changes: each command's change set lists, in TargetChanges, the task
// attempts whose presence in a node's target it may have changed, each
// under the generation it is journaled under, and where a node's journal
// restarts (a capbox's change: the pods of the tasks in it come and go
// with it). A view in package dispatcher keeps the journals, so that a
// node that holds an earlier target is answered with the changes since,
// at a cost in proportion to them (NodeTargetChanges gives their pods)
// and not to the node's pods: a node packed with hundreds of short tasks
// sees its target change hundreds of times a second. A task its node
// reports ended leaves the target without a new generation (the node
// knows; waking its long-poll to say so would add an HTTP exchange per
// task): the change is journaled under the next generation, which the
// next change of the target brings. The tests check, after every random
// command, that the target changes and generations of the change sets
// name every change of every node's target.
//
// # History
//
// A job forgotten by ForgetJobsToHistory leaves a summary: its name,
// queue and labels (taken from its encoded spec without decoding it:
// specHead), its submit time, its start (when a plan first placed a task
// of it: group.started, in the group record), its end (its tasks' last
// change, or its submit: what every replica derives alike, unlike the
// time each saw it finish), its final state, its tasks' final counts, and
// its first failure (the task whose current attempt failed, was lost, or
// was killed but not by a cancel, earliest). Jobs lists summaries among
// the live jobs by number (JobStatus.History), Summary finds one by ID,
// and PruneHistory drops them.
//
// Every summary is in memory, as its record's bytes (a string) and the
// fields listings filter on (number, end, state, queue), in two slices:
// by number (listing, paging and lookups by binary search) and by end
// (what is due to be pruned is a prefix). A listing decodes only the
// summaries it returns. Keeping them all costs little: a summary of a
// named job with two labels takes 90 bytes of store and 171 bytes of heap
// (BenchmarkHistorySummary), and the watch feed's entry for it 24 more, so
// the dispatcher's default bound of 100,000 is about 19 MiB of every
// replica's heap, against about 70 MiB for as
// many finished jobs of one task kept before they are forgotten
// (BenchmarkRetainedJobs). Reading
// older summaries from the store on demand instead would make a listing
// read a store that lags the applied state (deferred writes) and that the
// FSM does not hold outside Load; the bound (dispatcher.MaxHistoryMax)
// keeps the whole history's memory in proportion instead.
//
// # Change sets
//
// The FSM owns the replicated state and what applying commands needs of it
// (the indexes above, and the nodes' target generations, which are
// stored). What readers derive from the course of changes lives outside
// it, in package dispatcher and those under it, in views fed by change
// sets: the kept round input (roundinput), the watch feed (jobfeed), the
// nodes' target journals and the wake-ups of long-polls. It imports no
// package of the dispatcher's (internal/lint keeps it so). After each
// command that applied, Apply publishes its
// change set (Changes, ChangeApplied): the jobs (capbox sets included)
// whose counters or state it changed, the capbox sets among them, the
// jobs it forgot, the groups, the tasks whose state, attempt or node it
// changed, the nodes whose target generation it moved (with their
// generations now), the entries of the nodes' target journals (as the
// commands made them), and the nodes whose
// part of a round's input it changed (and whether which nodes are ready
// may have), at its index.
// EntriesApplied publishes a completion (every command up to an index is
// applied) and Load a reset (what was derived before is void). Each job
// keeps the index of its last change (the applied index after a Load),
// which a view compares with its own to know whether the FSM is ahead.
//
// Publishing is outside the FSM's lock, on the apply goroutine, to the
// functions given to Subscribe, in order, one at a time; a subscriber
// gets a reset first. A command's lists are gathered as it applies
// (through the marks that list each group, node and task once) in memory
// kept from command to command, so a change set costs no allocation once
// the lists have grown to the largest command's. A change set names what
// changed; a subscriber reads the FSM for the rest, and, since the FSM
// may be ahead of it, tolerates reading a change before its change set.
// Every job's last change is the index of the last change set that named
// it since the last reset (or as the reset read it), and a job forgotten
// was named in Forgotten; a
// change set lists its jobs and groups in order and each task once (the
// tests check these after every random command).
//
// # Files
//
// The tables: state.go (jobs, groups, tasks, nodes, slots), jobtable.go
// and paged.go (the table of jobs by number), ports.go (a node's port
// ranges). The apply machinery: fsm.go (the FSM, Apply, settling a
// command, deferred records), changes.go (change sets and subscribers).
// The commands, as applied: submit.go, nodes.go (register, node state),
// plan.go and slots.go (placing tasks, cached slots), update.go (reports),
// stop.go (tasks ending: finish, cancel, preempt), journal.go (the target
// changes a command publishes), capbox.go and captask.go, forget.go,
// history.go (summaries of forgotten jobs). The codec: commands.go
// (the command constructors and results), codec.go, keys.go, spec_codec.go
// and skim.go (job specs). Reading: load.go (Load), read.go (statuses),
// target.go (node targets), roundread.go (what a round's input is read
// from).
//
// # Usage
//
//	f := fsm.New()
//	kv, err := raftkv.Open(raftkv.Config{ID: 1, Dir: dir, Peers: peers, StateMachine: f})
//	unsubscribe := f.Subscribe(func(c *fsm.Changes) { ... }) // a view's consumer
//	cmd, err := fsm.SubmitJobs(time.Now(), specs)
//	res, err := kv.Propose(ctx, cmd)
//	ids, err := fsm.DecodeSubmitResult(res)
//	f.ReadRound(func(r fsm.RoundRead) { for n := range r.Nodes() { ... } })
//	gen, pods, ok := f.NodeTarget("node-1")
//	gen, added, removed, whole, ok := f.NodeTargetSince("node-1", gen)
package fsm
