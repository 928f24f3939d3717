// Package server is the dispatcher's HTTP API on fasthttp and the wiring of
// one dispatcher replica process.
//
// It owns two things:
//
//   - Open starts a replica from a Config: the raft TCP transport (when the
//     replica has a raft address), the FSM and raftkv replica in Dir, the
//     Dispatcher, and the HTTP server on its own listener. Close undoes
//     it in order: it ends long-polls and streams, shuts the HTTP server
//     down, then closes the dispatcher, the raft replica and the
//     transport.
//   - Handler (NewHandler) serves the API for a replica someone else wired,
//     on any fasthttp.Server (NewHTTPServer sets the limits it needs) or
//     listener, such as fasthttputil's in-memory one in tests.
//
// # Endpoints
//
// The paths, bodies and codes are api's (api/wire.go, api/members.go). Every error reply is
// an api.ErrorResponse.
//
//	POST   /v1/jobs                 submit: one job, a JSON array or NDJSON; gzip or zstd; Idempotency-Key
//	GET    /v1/jobs                 list: state, queue, label=k=v, after, limit (default 100, max 10000)
//	GET    /v1/jobs/{id}            a job, with why its pending tasks are pending
//	DELETE /v1/jobs/{id}            cancel
//	GET    /v1/jobs/{id}/tasks      its placed tasks: state, after, limit
//	POST   /v1/jobs/{id}/capboxes   an appmaster's capbox requests (bodies as submit's); 409 not an appmaster or ended
//	GET    /v1/jobs/{id}/capboxes   its capboxes, and the index the list is current as of
//	DELETE /v1/jobs/{id}/capboxes   release capboxes named by id parameters, all or none
//	POST   /v1/jobs/{id}/captasks   start tasks in the appmaster's running capboxes, all or none; 409 no room
//	DELETE /v1/jobs/{id}/captasks   stop capbox tasks named by id parameters, all or none
//	GET    /v1/nodes                the registered nodes by name: state, after, limit (next: the next page's after)
//	POST   /v1/nodes                register a node (api.NodeSpec)
//	GET    /v1/nodes/{name}         a node and the pods of its target, with their tasks' states
//	GET    /v1/nodes/{name}/target  long-poll: generation, wait (default 30s, max 5m); 304 when unchanged
//	POST   /v1/nodes/{name}/reports task reports (api.ReportRequest); 204
//	GET    /v1/tasks/{id}/logs      the task's current attempt's output, proxied from its nodelet
//	GET    /v1/watch                NDJSON api.WatchEvents from an index (from), brief=1 without the specs' task groups; blank lines are keep-alives
//	GET    /v1/members              the replicas (api.MemberList) as this one sees them; consistent=1
//	POST   /v1/members              add a replica (api.AddMemberRequest, admin): learner, caught up, voter; 409 duplicate ID, address or URL
//	DELETE /v1/members/{id}         remove a replica (admin); 404 not a member, 409 the last voter or no live quorum left; the leader hands over and answers 307
//	GET    /metrics                 Prometheus metrics, text format (dispatcher/metrics); 404 with Config.DisableMetrics
//	GET    /v1/cluster              raft, the nodes' totals, each queue's weight, jobs, tasks and held resources, the recent rounds
//	GET    /v1/whoami               the role and scope of the request's token (any role)
//	GET    /ui/...                  the web UI's pages and files (package ui), no authentication: they hold no data
//	GET    /healthz, /readyz        no authentication
//
// A watch event carries a job's state after the raft entry at its Index
// changed it. Several jobs may share an index; a client that resumes with
// from=N sees every change after N, so one that stopped inside an index's
// events resumes from the index before it (events are states: a repeat is
// harmless). A watcher that falls behind sees each job's latest state, not
// every step. A job forgotten with a summary changes to it (History), at
// the forgetting command's index; one forgotten without, or whose summary
// is pruned, leaves the stream without an event.
//
// # Authentication
//
// With Tokens set, every request but /healthz and /readyz carries
// "Authorization: Bearer TOKEN" (401 without a known one). A token has a
// role (403 outside it):
//
//   - admin: everything, and alone adds and removes replicas;
//   - reader: every GET but the target long-poll, /metrics included;
//   - submitter: the reader's GETs, submit and cancel, restricted to its
//     queues when its token lists some (other queues' jobs are 403 and left
//     out of lists and the watch stream);
//   - nodelet: register, target long-poll and reports of its own node
//     alone. A nodelet token names its node in the token file; a request
//     for another node (POST /v1/nodes of another name, its target, its
//     reports) is a 403, and so is a report request naming the current
//     attempt of a task placed on another node: refused whole, never
//     applied. Both are counted (Handler.Refusals) and logged.
//
// The token file (LoadTokens) has one "TOKEN ROLE [QUEUE,...]" or "TOKEN
// nodelet NODE" per line; a node has one token.
//
// # Job tokens
//
// With JobKeys set (`sluice dispatcher --job-token-key`), the pods of an
// appmaster job's own task groups (not capboxes, nor the tasks in them)
// get their job's token, api.EnvToken, in their node's target (identity=1,
// the nodelet's own authenticated long-poll) and nowhere else: no job,
// task or node listing, nor the watch stream, shows one. A job token is
// derived, not stored (JobKeys: an HMAC of the job's ID and submit time
// under a key every replica holds), so the raft log and the FSM's records
// hold no secret, and any replica checks it at the header stage. It acts
// for its job alone (RoleJob), with or without Tokens:
//
//   - GET its job and its tasks; its capboxes (GET, POST, DELETE) and
//     the tasks in them (POST, DELETE captasks); the watch stream, which
//     shows it its job and its capbox sets alone and ends when the job
//     does;
//   - DELETE its job (cancel): the token already governs every capbox and
//     task of the job, so ending them all at once adds nothing to what it
//     may do, and it lets an appmaster give up its job without retries;
//   - anything else, or anything of another job (its capbox sets read
//     through its capboxes), is a 403 naming the token's job; a token
//     whose MAC, key, job or submit time does not check, or whose job is
//     not an appmaster, is a 401 "unknown token", and one whose job has
//     ended or been forgotten a 401 (expired, or unknown).
//
// # Nodes' addresses
//
// A node's address is a host and a port and nothing else
// (api.CheckAddress), checked at registration and again before use. The
// log proxy builds its URL from the parts, sends the node's own log token
// (api.NodeSpec.LogToken, which node lists never show) and follows no
// redirect.
//
// # Invariants
//
//   - A submit is all or nothing: every item is decoded, validated and
//     authorized before anything is proposed, and a bad request is
//     answered with every problem found.
//   - A submit is acknowledged only after its raft entry is committed and
//     applied: an acknowledged job is never lost. With an Idempotency-Key
//     (item i's job key becomes "KEY/i"), a retried submit returns the
//     same IDs and lists the items that existed in Existing.
//   - Writes (POST, DELETE, the target long-poll) reaching a follower are
//     answered 307 to the leader's URL with the same path and query (the
//     URL it was added with, replicated with the membership, else its
//     PeerHTTP entry), or 503 not_leader when no leader is known. Reads are served
//     from the local FSM; ?consistent=1 makes them linearizable (raft
//     ReadIndex first).
//   - A replica whose raft replica stopped on an error (its store failed:
//     a full or broken disk) serves nothing again: it ends its long-polls
//     and streams, answers /readyz 503 and every other request but
//     /healthz and /metrics 503 not_leader (nothing was done; another replica serves)
//     on a connection it closes, and Server.Failed is closed, on which
//     `sluice dispatcher` exits non-zero with the reason logged.
//   - A replica holds at most Config.Conns's connections open (shared by
//     the replicas of one process): at the limit a new connection takes
//     the place of the longest idle one, or waits in the listen queue
//     until one closes or goes idle, so the store and the raft peers
//     always have the file descriptors they need, even when every node
//     reconnects at once.
//   - A request's header is judged before any of its body is read
//     (Handler.HeaderReceived): its token and role (401, 403, the body
//     left unread and the connection closed) and its declared length
//     against its route's limit (413): writes take up to
//     api.MaxBodyBytes, a node's registration 1 MiB, reads and deletions
//     nothing.
//   - Bodies are read as they arrive and decompressed as they are read
//     (gzip; zstd with windows up to ZstdMaxWindow), limited before and
//     after decompression (413), into memory counted against
//     Config.BodyMemory across all connections: a body that would go
//     over it is answered 503 unavailable with Retry-After (/healthz and
//     /readyz take none of it), and its memory is given back when its
//     request ends, however it ends. No pool keeps a buffer over 1 MiB,
//     but for the two zstd decoders kept for the next bodies, each with
//     a window of up to ZstdMaxWindow.
//   - No input makes the server panic or answer 5xx (but that 503), and
//     internal errors are logged, not sent.
//
// # Usage
//
//	s, err := server.Open(server.Config{
//		ID: 1, Peers: map[uint64]string{1: ""}, Dir: dir, HTTPAddr: ":8001",
//	})
//	if err != nil {
//		return err
//	}
//	defer s.Close()
//	fmt.Println("serving on", s.Addr())
package server
