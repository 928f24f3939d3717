package overcommit

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestResourceFileTolerance: a pod's resource file is rewritten for a new
// guarantee or a limit that moved 5% or more from the file's, not for less,
// and always says what was last written.
func TestResourceFileTolerance(t *testing.T) {
	l := &Loop{written: map[string]PodResources{}}
	path := filepath.Join(t.TempDir(), "res.json")
	base := PodResources{ID: "p", Guaranteed: Resources{CPUMillis: 500, MemoryBytes: 1 << 30}, Limit: Resources{CPUMillis: 1000, MemoryBytes: 2 << 30}}
	for i, tc := range []struct {
		change func(*PodResources)
		wrote  bool
	}{
		{func(*PodResources) {}, true}, // the first write
		{func(*PodResources) {}, false},
		{func(p *PodResources) { p.Limit.CPUMillis = 1049 }, false},
		{func(p *PodResources) { p.Limit.CPUMillis = 951 }, false},
		{func(p *PodResources) { p.Limit.CPUMillis = 1050 }, true},
		{func(p *PodResources) { p.Limit.CPUMillis = 1050; p.Limit.MemoryBytes = 2<<30 - 2<<30/10 }, true},
		{func(p *PodResources) {
			p.Limit.CPUMillis = 1050
			p.Limit.MemoryBytes = 2<<30 - 2<<30/10
			p.Guaranteed.CPUMillis = 501
		}, true},
	} {
		pr := base
		tc.change(&pr)
		wrote, err := l.writeResources(path, pr)
		if err != nil || wrote != tc.wrote {
			t.Fatalf("step %d: wrote %v (%v), want %v", i, wrote, err, tc.wrote)
		}
		raw, err := os.ReadFile(path)
		var got PodResources
		if err != nil || json.Unmarshal(raw, &got) != nil || got != l.written[path] {
			t.Fatalf("step %d: file %s (%v), want what was last written %+v", i, raw, err, l.written[path])
		}
	}
}
