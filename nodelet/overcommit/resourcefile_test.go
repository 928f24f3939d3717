package overcommit_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/nodelet/overcommit"
)

// TestWriteResourceFile: the file reads back as written, readable by any
// user (a container's may not be root), and replacing it gives the path a
// new inode (why containers get the directory mounted, not the file); a
// directory that is not there is an error.
func TestWriteResourceFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resources.json")
	pr := overcommit.PodResources{ID: "p", Guaranteed: overcommit.Resources{CPUMillis: 250, MemoryBytes: 64 << 20}, Limit: overcommit.Resources{CPUMillis: 250, MemoryBytes: 64 << 20}}
	if err := overcommit.WriteResourceFile(path, pr); err != nil {
		t.Fatalf("WriteResourceFile: %v", err)
	}
	st1, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st1.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st1.Mode().Perm())
	}
	pr.Limit.CPUMillis = 900
	if err := overcommit.WriteResourceFile(path, pr); err != nil {
		t.Fatalf("WriteResourceFile again: %v", err)
	}
	raw, err := os.ReadFile(path)
	var got overcommit.PodResources
	if err != nil || json.Unmarshal(raw, &got) != nil || got != pr {
		t.Fatalf("file %s (%v), want %+v", raw, err, pr)
	}
	st2, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(st1, st2) {
		t.Errorf("the file was rewritten in place; the doc of ResourceDir expects a rename")
	}
	if err := overcommit.WriteResourceFile(filepath.Join(t.TempDir(), "gone", "resources.json"), pr); err == nil {
		t.Errorf("WriteResourceFile into a missing directory succeeded")
	}
}
