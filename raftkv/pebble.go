package raftkv

import (
	"bytes"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// pebbleOptions returns the options of a replica's database. The database
// mostly absorbs a stream of log appends (written once, read back from the
// entry cache, range-deleted soon after) and the state machine's writes.
func pebbleOptions(cfg Config, logger pebble.Logger, onCorruption func(error)) *pebble.Options {
	o := &pebble.Options{
		FS:                 cfg.FS,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             logger,
		// A big memtable lets most log entries be appended and range-deleted
		// (after truncation) before they are ever flushed, and makes flushes
		// (and so L0 files and compactions) rarer under a steady write stream.
		MemTableSize: cfg.PebbleMemTableBytes,
		// Keep writing while one memtable flushes and another fills.
		MemTableStopWritesThreshold: 4,
		// Every Ready ends in a synced WAL write anyway; syncing the WAL in the
		// background every 1 MiB keeps unsynced apply batches (written NoSync)
		// from piling up in the page cache and turning the next fsync into a
		// latency spike.
		WALBytesPerSync: 1 << 20,
		// Same for sstables written by flushes and compactions.
		BytesPerSync: 1 << 20,
		// Bursts of appends fill L0 faster than it compacts; tolerate more
		// read amplification there before stalling writes (a stall stops the
		// Ready loop, which stops heartbeats and costs the leadership).
		L0CompactionThreshold: 4,
		L0StopWritesThreshold: 32,
		LBaseMaxBytes:         256 << 20,
		CacheSize:             cfg.PebbleCacheBytes,
		// The log is deleted in ranges; flush a memtable holding a range
		// deletion after a while so that the disk space comes back. Not
		// sooner than a minute: every memtable holds one (truncations come
		// every few seconds under load), and a shorter delay would flush
		// them well before they are full, with the records that would have
		// died in them.
		FlushDelayDeleteRange: time.Minute,
	}
	if iv := cfg.SyncInterval; iv > 0 {
		o.WALMinSyncInterval = func() time.Duration { return iv }
	}
	o.EnsureDefaults()
	// Point lookups (Get on the state machine's keys, the meta keys) skip
	// sstables through bloom filters.
	for i := range o.Levels {
		o.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	// Background work is logged: flushes and compactions at debug level
	// with what they took, write stalls (which stop the Ready loop) at
	// warning level with how long they lasted.
	var stalledAt atomic.Int64 // UnixNano of the stall in progress
	o.EventListener = &pebble.EventListener{
		BackgroundError: func(err error) {
			logger.Errorf("background error: %v", err)
		},
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			onCorruption(fmt.Errorf("pebble: data corruption in %s: %w", info.Path, info.Details))
		},
		FlushEnd: func(info pebble.FlushInfo) {
			cfg.Logger.Debug("raftkv: pebble flushed memtables", "memtables", info.Input, "bytes", info.InputBytes,
				"took", info.TotalDuration, "err", info.Err)
		},
		CompactionEnd: func(info pebble.CompactionInfo) {
			cfg.Logger.Debug("raftkv: pebble compacted", "reason", info.Reason, "to_level", info.Output.Level,
				"took", info.TotalDuration, "err", info.Err)
		},
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			stalledAt.Store(time.Now().UnixNano())
			cfg.Logger.Warn("raftkv: pebble stalls writes", "reason", info.Reason)
		},
		WriteStallEnd: func() {
			cfg.Logger.Warn("raftkv: pebble writes resume", "stalled", time.Since(time.Unix(0, stalledAt.Load())))
		},
	}
	return o
}

// fatalGuard turns pebble's fatal errors into replica failures. Pebble calls
// Logger.Fatalf when its commit pipeline or manifest can no longer be
// trusted (for example when a WAL write fails) and expects the process to
// die; Commit would even return nil afterwards. Instead the replica records
// the error and stops: on a goroutine of ours the Fatalf call panics, and
// the guard around every pebble call recovers it into an error; on one of
// pebble's own goroutines it ends that goroutine.
type fatalGuard struct {
	log     *slog.Logger
	onFatal func(error)
	owners  sync.Map // goroutine id → struct{}
}

type fatalPanic struct{ err error }

// pebbleFatal is the error of a pebble Fatalf call; it unwraps to the error
// among Fatalf's arguments, if any.
type pebbleFatal struct {
	msg   string
	cause error
}

func (e *pebbleFatal) Error() string { return e.msg }
func (e *pebbleFatal) Unwrap() error { return e.cause }

// enter marks the calling goroutine as one whose pebble calls are guarded and
// returns the function that unmarks it.
func (g *fatalGuard) enter() func() {
	id := goroutineID()
	g.owners.Store(id, struct{}{})
	return func() { g.owners.Delete(id) }
}

// Infof implements pebble.Logger.
func (g *fatalGuard) Infof(format string, args ...any) {
	g.log.Debug("pebble: " + fmt.Sprintf(format, args...))
}

// Errorf implements pebble.Logger.
func (g *fatalGuard) Errorf(format string, args ...any) {
	g.log.Error("pebble: " + fmt.Sprintf(format, args...))
}

// Fatalf implements pebble.Logger.
func (g *fatalGuard) Fatalf(format string, args ...any) {
	if !strings.HasPrefix(format, "pebble") {
		format = "pebble: " + format
	}
	err := error(&pebbleFatal{msg: fmt.Sprintf(format, args...)})
	for _, a := range args {
		if cause, ok := a.(error); ok {
			err.(*pebbleFatal).cause = cause
			break
		}
	}
	g.log.Error("pebble fatal error; replica stops", "err", err)
	g.onFatal(err)
	if _, ok := g.owners.Load(goroutineID()); ok {
		panic(fatalPanic{err})
	}
	runtime.Goexit()
}

// goroutineID returns the calling goroutine's id, parsed from its stack
// header ("goroutine 123 [running]:").
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseUint(string(b), 10, 64)
	return id
}

// openPebble opens the replica's database under the guard.
func openPebble(cfg Config, g *fatalGuard) (db *pebble.DB, err error) {
	defer g.enter()()
	defer recoverFatal(&err, "open")
	opts := pebbleOptions(cfg, g, g.onFatal)
	if err := mkdirAllSynced(cfg.FS, cfg.Dir); err != nil {
		return nil, storageError("open: mkdir", err)
	}
	db, err = pebble.Open(cfg.Dir, opts)
	if err != nil {
		return nil, storageError("open", err)
	}
	return db, nil
}

// recoverFatal turns a fatalPanic into *errp; it re-panics anything else.
func recoverFatal(errp *error, op string) {
	if r := recover(); r != nil {
		fp, ok := r.(fatalPanic)
		if !ok {
			panic(r)
		}
		*errp = storageError(op, fp.err)
	}
}

// mkdirAllSynced creates dir and its missing parents and syncs the parent of
// every directory it created, so that a crash cannot lose the replica's
// directory (and with it every acknowledged write).
func mkdirAllSynced(fs vfs.FS, dir string) error {
	var created []string
	for d := dir; ; {
		if _, err := fs.Stat(d); err == nil {
			break
		}
		created = append(created, d)
		parent := fs.PathDir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range created {
		parent := fs.PathDir(d)
		if parent == d {
			continue
		}
		f, err := fs.OpenDir(parent)
		if err != nil {
			return err
		}
		serr := f.Sync()
		if cerr := f.Close(); serr == nil {
			serr = cerr
		}
		if serr != nil {
			return fmt.Errorf("sync %s: %w", parent, serr)
		}
	}
	return nil
}
