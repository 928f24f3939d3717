package raftkv

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestPebbleWorkLog: a replica's pebble logs its flushes and compactions
// at debug level and its write stalls, with how long they lasted, at
// warning level. The flush and the compaction are real; a stall is hard
// to bring about on purpose, so its callbacks are called as pebble would.
func TestPebbleWorkLog(t *testing.T) {
	var buf bytes.Buffer
	cfg := Config{FS: vfs.NewMem(), Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	opts := pebbleOptions(cfg.withDefaults(), quietLogger{}, func(err error) { t.Errorf("corruption: %v", err) })
	db, err := pebble.Open("db", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, k := range []string{"a", "b"} {
		if err := db.Set([]byte(k), []byte("v"), pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Compact(t.Context(), []byte("a"), []byte("c"), true); err != nil {
		t.Fatal(err)
	}
	opts.EventListener.WriteStallBegin(pebble.WriteStallBeginInfo{Reason: "memtable count limit reached"})
	opts.EventListener.WriteStallEnd()
	got := buf.String()
	for _, want := range []string{
		`level=DEBUG msg="raftkv: pebble flushed memtables" memtables=1`,
		`level=DEBUG msg="raftkv: pebble compacted" reason=`,
		`level=WARN msg="raftkv: pebble stalls writes" reason="memtable count limit reached"`,
		`level=WARN msg="raftkv: pebble writes resume" stalled=`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the log lacks %q:\n%s", want, got)
		}
	}
}
