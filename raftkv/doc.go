// Package raftkv is Sluice's replicated store: etcd raft's RawNode driven by
// one goroutine, with the raft log, the raft state and the state machine's
// data in one pebble database per replica.
//
// # What it owns
//
//   - Node: one replica. Open bootstraps, restarts or joins it; Propose
//     replicates a command and returns the state machine's result once it is
//     applied; ReadIndex, LinearizableGet, Get and Scan read; AddMember,
//     CatchUp, PromoteMember, RemoveMember and TransferLeadership manage
//     the cluster (a member's address and the application's Member.Meta
//     ride in the conf change and are replicated with the member table);
//     Status, Metrics and Err report, and LeadershipChanged pushes each
//     change of leadership or term to whoever waits on it;
//   - the raft.Storage over pebble (storage.go), with the recent log cached in
//     memory, and log truncation by range deletion;
//   - the StateMachine seam: Apply writes through a Batch confined to the
//     state machine's keyspace; snapshots serialize that keyspace; a state
//     machine that implements EntryAware learns when every command of the
//     entries up to an index has been applied (an entry may carry several
//     commands, each applied with the entry's index);
//   - KV, the built-in state machine (put, delete, compare-and-swap);
//   - the Transport seam (seam.go). The TCP transport lives in transport*.go,
//     with mutual TLS when configured (transport_tls.go; see Security).
//
// # Invariants
//
// Key layout (keys.go): 0x01 meta (hard state, conf state, applied index,
// truncation point, replica ID, member addresses and metadata), 0x02+index
// log entries, 0x03+key the state machine's data. Indexes are big-endian so
// the log is one ordered range.
//
// Exactly-once apply: the applied state — the state machine's writes since
// it was last stored, the applied index, the conf state and the member
// table — is written as one pebble batch. A crash loses either all of it or
// none of it; on restart raft hands back exactly the entries after the
// stored applied index. A state machine that implements Deferrer keeps
// back the records it changes often and writes each once per stored
// state, and its writes wait in memory (where its reads see them) for up
// to Config.ApplyWriteInterval: the log already holds their commands,
// synced before they were applied. (Any other state machine's writes are
// stored with each Ready: waiting would save it nothing, and one large
// write a second stalls the loop longer than many small ones.) The state
// is stored earlier when a membership change is
// applied (with it), before a snapshot replaces it, before the log is
// truncated past it (the log keeps every entry after the stored applied
// index), for Get and Scan, and at Close. On disk, at every
// prefix of pebble's WAL: truncation point ≤ applied ≤ last index. The
// stored commit index may lag the applied one (the hard state that raised
// it is written by the appender, the apply batch by the loop, in either
// order); a restart raises it to the applied index, as what was applied was
// committed.
//
// Raft runs with AsyncStorageWrites: a Ready is a set of messages, and two
// goroutines share the storage work.
//
//   - The Ready loop (loop.go) is the only goroutine that touches the
//     RawNode. It sends the messages for peers at once (appends,
//     heartbeats, vote requests: raft holds back whatever depends on a
//     write as a response of that write), hands each MsgStorageAppend to
//     the appender, applies each MsgStorageApply's committed entries (raft
//     hands out only entries already durable here) and answers their
//     callers, then hands out ReadIndex results and truncates the log when
//     due. It never waits on an fsync, and applies at most about a tick
//     (Config.TickInterval) of entries before it ticks and steps what came
//     again, so that a replica behind in its applying (committed entries
//     pile up when the leader commits faster than it applies) still
//     answers heartbeats and appends: a leader that hears from no quorum
//     for an election timeout steps down.
//   - The appender (append.go) writes the MsgStorageAppends in order
//     (snapshot, entries, hard state), syncs once for all that queued up
//     while it was writing (pebble spaces syncs Config.SyncInterval apart
//     when it is set, so that under load more writes share each), and
//     only then sends their responses (the acknowledgements of appends,
//     votes granted) to the peers and hands the ones for this replica
//     back to the loop, which steps them (taking in a snapshot first).
//
// Proposals are queued on a channel; the loop drains all that are queued,
// packs them into as few entries as Config.MaxEntryBytes allows, and
// proposes them in one step. While the appender is writing, the leader
// holds proposals back (up to an entry's worth of bytes) and proposes them
// together when the write ends, so concurrent proposals share an entry and
// an fsync (group commit). Commands of Config.CompressThreshold bytes or more
// are s2-compressed by the proposing goroutine; apply decompresses them.
// Callers wait for their command to be applied. A proposal from term T whose
// entry did not show up by the time an entry of a later term is applied was
// dropped (log terms never decrease), and its caller gets ErrProposalDropped.
//
// Reads: ReadIndex requests arriving while one is in flight are batched into
// the next; they complete once the replica has applied the read index.
// Leader leases are off unless Config.LeaseReads.
//
// Failures: any pebble error on the write path, or a read error, stops the
// replica (Err, Status.Err, every call returns an error matching
// ErrStorage); it never serves reads after that.
//
// # Security
//
// The TCP transport trusts whoever speaks its wire format unless
// TCPConfig.TLS is set. Without TLS, anyone who can reach a replica's raft
// port can read the replicated data and send raft messages under any node
// ID: keep that port on a network only the replicas reach.
//
// With TLS, every connection is mutual TLS 1.3 and both ends check the
// other's certificate before a byte of the wire format passes:
//
//   - the listener requires a client certificate that chains to the
//     cluster CA (for client authentication), and refuses the connection
//     otherwise: a plaintext dialer, one without a certificate or with a
//     certificate of another CA is cut off after the failed TLS handshake,
//     counted in TCPStats.TLSHandshakeFailures and logged, and none of its
//     bytes reach raft. The TLS handshake and the hello must end within
//     TCPConfig.DialTimeout, so a slow or silent dialer holds a goroutine
//     no longer than that;
//   - the dialer requires a server certificate that chains to the cluster
//     CA (for server authentication) and is valid for the host of the
//     address it dials (the peer's address as the member table has it),
//     and sends nothing otherwise.
//
// What a certificate proves, then, is membership of the cluster, and on
// the listener's side nothing finer: the node ID a dialer claims in its
// hello is not bound to its certificate, because a replica may hear from
// a member before it has applied the change that gave it the member's
// address (a replica catching up from a leader added while it was down
// does), and refusing it then would keep it from ever catching up. Any
// holder of a certificate of the cluster CA can therefore speak raft as
// any node ID to a replica that accepts its connection: the CA must sign
// certificates for the replicas of this cluster only (not the HTTP API's,
// not another cluster's), and a replica's key is as sensitive as its
// data. The dialer's check does bind the peer's address: a certificate
// of the cluster CA for another host does not pass for a replica's, so
// taking over a replica's address is not enough to receive its traffic.
// Replicas sharing a host share that binding.
//
// # Usage
//
//	n, err := raftkv.Open(raftkv.Config{
//		ID:        1,
//		Dir:       "/var/lib/sluice/raft",
//		Peers:     map[uint64]string{1: "10.0.0.1:7000", 2: "10.0.0.2:7000", 3: "10.0.0.3:7000"},
//		Transport: tr,
//	})
//	if err != nil { ... }
//	defer n.Close()
//	_, err = n.Propose(ctx, raftkv.PutCommand([]byte("k"), []byte("v")))
//	var nl *raftkv.NotLeaderError
//	if errors.As(err, &nl) { /* forward to nl.LeaderAddr */ }
//	v, err := n.LinearizableGet(ctx, []byte("k"))
package raftkv
