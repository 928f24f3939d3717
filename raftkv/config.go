package raftkv

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Config configures one replica. The zero value of every field but ID, Dir
// and (for more than one replica) Peers and Transport means the documented
// default.
type Config struct {
	// ID is the replica's raft ID: non-zero, and never reused in a cluster,
	// even after the replica was removed.
	ID uint64
	// Dir is the directory of the replica's pebble database.
	Dir string
	// FS is the filesystem pebble uses. Default: the operating system's. Tests
	// pass pebble's in-memory crashable FS or its error-injecting FS.
	FS vfs.FS

	// Peers maps the IDs of the initial members (this replica included) to
	// their addresses. It is read on first boot only: a new cluster is
	// bootstrapped with exactly these voters (every initial replica must be
	// given the same map). With Join, Peers only tells the transport where the
	// existing members are until the first snapshot brings the real member
	// table. After the first boot, members come from the replicated member
	// table on disk.
	Peers map[uint64]string
	// PeerMeta is the initial members' Member.Meta by ID, read with Peers
	// on first boot only (not with Join). Default: none.
	PeerMeta map[uint64]string
	// Join starts an empty replica that waits to be added to an existing
	// cluster (AddMember on the leader) and catches up by snapshot.
	Join bool
	// Transport carries raft messages. Open starts it and the Node's Close
	// closes it (if Open fails, the caller still owns it). It may be nil for
	// a single-replica cluster.
	Transport Transport
	// StateMachine applies committed commands. Default: the built-in KV.
	StateMachine StateMachine

	// TickInterval is the raft tick. Default 100ms.
	TickInterval time.Duration
	// ElectionTicks is the election timeout in ticks. Default 10.
	ElectionTicks int
	// HeartbeatTicks is the leader's heartbeat period in ticks. Default 1.
	HeartbeatTicks int

	// SnapshotEntries is how many applied entries the log may hold before it is
	// truncated. Default 10000.
	SnapshotEntries uint64
	// SnapshotCatchUpEntries is how many applied entries a truncation keeps, so
	// that a follower that lags a little catches up from the log rather than a
	// snapshot. Default SnapshotEntries/2.
	SnapshotCatchUpEntries uint64
	// SnapshotLogBytes truncates the log when the entries appended since the
	// last truncation exceed this many bytes; the truncation then keeps at
	// most half of it. Default a quarter of PebbleMemTableBytes, so that most
	// of the log is deleted while still in the memtable and never written
	// to an sstable.
	SnapshotLogBytes uint64

	// ApplyWriteInterval is how long the applied writes of a state
	// machine that implements Deferrer may stay in memory (where reads
	// see them) before they are written to the store, together with the
	// applied index; meanwhile the log, synced before anything is
	// applied, holds their commands, and a restart applies them again.
	// The records it defers that change many times in between reach the
	// store once. Default 3s: a dispatcher's task (placed, running and
	// ended within two seconds) then mostly reaches the store once, where
	// 1s writes it twice or more (`sluice bench e2e` at 30k tasks/s: 230
	// store bytes a task against 300). Negative: the writes of each Ready
	// are stored with it, as they always are for a state machine that
	// defers nothing.
	ApplyWriteInterval time.Duration
	// ApplyWriteBytes stores the applied writes early once the writes not
	// deferred (a dispatcher's submitted jobs) hold this many bytes.
	// Default 16 MiB, so that the interval, not the bytes, decides under
	// load: a dispatcher's submissions fill 1 MiB in about a second at
	// 30k tasks/s, and 16 MiB holds 3 s of them at 100k.
	ApplyWriteBytes int
	// SyncInterval is the least time between two syncs of the log (pebble's
	// WALMinSyncInterval): a write that asks for a sync sooner waits for
	// it, and shares it with every write that arrives meanwhile; one asked
	// for after a quiet spell is not delayed. Under a load that arrives
	// whatever the latency (a cluster's nodes and users), fewer and larger
	// syncs and Readys cost less CPU in all, for some milliseconds of
	// commit latency; a client that waits for each write before the next
	// gets at most one commit an interval, so closed-loop throughput
	// falls. Default 0 (as does a negative interval): sync as soon as
	// asked.
	SyncInterval time.Duration

	// MaxEntryBytes bounds how many bytes of commands one raft entry packs.
	// Concurrent proposals are packed into as few entries as this allows.
	// Default 1 MiB.
	MaxEntryBytes int
	// MaxCommandsPerEntry bounds how many commands one entry packs; 1 gives
	// every proposal its own entry. Default 0: no bound but MaxEntryBytes.
	MaxCommandsPerEntry int
	// MaxCommandBytes is the largest command Propose accepts. Default 64 MiB.
	MaxCommandBytes int
	// CompressThreshold: commands at least this large are compressed (s2)
	// before they enter the log, if that makes them smaller. Default 4 KiB;
	// negative disables compression.
	CompressThreshold int

	// MaxSizePerMsg bounds the entries of one append message. Default 1 MiB.
	MaxSizePerMsg uint64
	// MaxInflightMsgs bounds the append messages in flight to one follower.
	// Default 256.
	MaxInflightMsgs int
	// MaxInflightBytes bounds the bytes in flight to one follower. Default 32 MiB.
	MaxInflightBytes uint64
	// MaxUncommittedEntriesSize bounds the leader's uncommitted log tail; past
	// it proposals fail with ErrProposalDropped. Default 64 MiB.
	MaxUncommittedEntriesSize uint64
	// EntryCacheBytes bounds the recent log entries kept in memory. Default 64 MiB.
	EntryCacheBytes int
	// LeaseReads serves ReadIndex from the leader's lease instead of a quorum
	// round; it relies on bounded clock drift. Default false.
	LeaseReads bool

	// PebbleCacheBytes is the size of pebble's block cache. Default 64 MiB.
	PebbleCacheBytes int64
	// PebbleMemTableBytes is the size of one pebble memtable. Default 256
	// MiB (pebble starts small and grows its memtables to it): a state
	// machine whose records die young (the dispatcher's tasks, forgotten
	// soon after they end) then mostly writes and deletes them in memory,
	// and flushes and compactions are fewer; `sluice bench e2e` at 20k
	// tasks/s gives p99 submit→placed 0.2–0.45 s against 0.74–1.26 s at 64
	// MiB, and 3–5% less CPU a task.
	PebbleMemTableBytes uint64

	// Logger receives the replica's logs (and raft's and pebble's). Default:
	// discard.
	Logger *slog.Logger
}

// withDefaults returns a copy of c with defaults filled in.
func (c Config) withDefaults() Config {
	if c.FS == nil {
		c.FS = vfs.Default
	}
	if c.StateMachine == nil {
		c.StateMachine = NewKV()
	}
	if c.TickInterval == 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.ElectionTicks == 0 {
		c.ElectionTicks = 10
	}
	if c.HeartbeatTicks == 0 {
		c.HeartbeatTicks = 1
	}
	if c.SnapshotEntries == 0 {
		c.SnapshotEntries = 10000
	}
	if c.SnapshotCatchUpEntries == 0 {
		c.SnapshotCatchUpEntries = c.SnapshotEntries / 2
	}

	if c.ApplyWriteInterval == 0 {
		c.ApplyWriteInterval = 3 * time.Second
	}
	if c.ApplyWriteBytes == 0 {
		c.ApplyWriteBytes = 16 << 20
	}
	if c.MaxEntryBytes == 0 {
		c.MaxEntryBytes = 1 << 20
	}
	if c.MaxCommandBytes == 0 {
		c.MaxCommandBytes = 64 << 20
	}
	if c.CompressThreshold == 0 {
		c.CompressThreshold = 4 << 10
	}
	if c.MaxSizePerMsg == 0 {
		c.MaxSizePerMsg = 1 << 20
	}
	if c.MaxInflightMsgs == 0 {
		c.MaxInflightMsgs = 256
	}
	if c.MaxInflightBytes == 0 {
		c.MaxInflightBytes = 32 << 20
	}
	if c.MaxUncommittedEntriesSize == 0 {
		c.MaxUncommittedEntriesSize = 64 << 20
	}
	if c.EntryCacheBytes == 0 {
		c.EntryCacheBytes = 64 << 20
	}
	if c.PebbleCacheBytes == 0 {
		c.PebbleCacheBytes = 64 << 20
	}
	if c.PebbleMemTableBytes == 0 {
		c.PebbleMemTableBytes = 256 << 20
	}
	if c.SnapshotLogBytes == 0 {
		c.SnapshotLogBytes = c.PebbleMemTableBytes / 4
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every problem with c at once.
func (c Config) Validate() error {
	var errs []error
	if c.ID == 0 {
		errs = append(errs, errors.New("the replica ID must be non-zero"))
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("a Dir is required"))
	}
	if c.Join && (c.Transport == nil || len(c.Peers) == 0) {
		errs = append(errs, errors.New("joining needs a Transport and the Peers already in the cluster"))
	}
	if len(c.Peers) > 1 && c.Transport == nil {
		errs = append(errs, errors.New("more than one peer needs a Transport"))
	}
	for id := range c.Peers {
		if id == 0 {
			errs = append(errs, errors.New("a peer has ID 0"))
		}
	}
	if c.TickInterval < 0 {
		errs = append(errs, fmt.Errorf("TickInterval %v must be positive", c.TickInterval))
	}
	if c.ElectionTicks != 0 && c.HeartbeatTicks != 0 && c.ElectionTicks <= c.HeartbeatTicks {
		errs = append(errs, fmt.Errorf("ElectionTicks %d must exceed HeartbeatTicks %d", c.ElectionTicks, c.HeartbeatTicks))
	}
	if c.ElectionTicks < 0 || c.HeartbeatTicks < 0 {
		errs = append(errs, errors.New("ElectionTicks and HeartbeatTicks must not be negative"))
	}
	if c.SnapshotEntries != 0 && c.SnapshotCatchUpEntries > c.SnapshotEntries {
		errs = append(errs, fmt.Errorf("SnapshotCatchUpEntries %d must not exceed SnapshotEntries %d", c.SnapshotCatchUpEntries, c.SnapshotEntries))
	}
	if c.MaxCommandBytes > MaxCommandLimit {
		errs = append(errs, fmt.Errorf("MaxCommandBytes %d exceeds %d", c.MaxCommandBytes, MaxCommandLimit))
	}
	if c.MaxEntryBytes < 0 || c.ApplyWriteBytes < 0 || c.MaxCommandsPerEntry < 0 || c.MaxCommandBytes < 0 || c.MaxInflightMsgs < 0 || c.EntryCacheBytes < 0 || c.PebbleCacheBytes < 0 {
		errs = append(errs, errors.New("sizes and counts must not be negative"))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("raftkv: invalid config: %w", errors.Join(errs...))
}
