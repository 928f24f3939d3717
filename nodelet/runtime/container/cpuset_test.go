package container

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCpusetParentsCloneChildren: after prepare, a new cgroup under the
// parent has its CPUs and memory nodes from the kernel, with nothing
// written, and parents that existed without them get them.
func TestCpusetParentsCloneChildren(t *testing.T) {
	c := newCpusetParents()
	if os.Geteuid() != 0 || c.root == "" {
		t.Skip("needs root and a cgroup v1 cpuset hierarchy")
	}
	top := filepath.Join(c.root, "sluicetest-cpuset")
	// An ancestor that exists already, made the way a plain mkdir makes
	// it: no CPUs, no memory nodes, no clone_children.
	if err := os.Mkdir(top, 0o755); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, d := range []string{"a/b/pod", "a/b", "a", ""} {
			_ = os.Remove(filepath.Join(top, d))
		}
	}()
	read := func(dir, file string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if got := read(top, "cpuset.cpus"); got != "" {
		t.Fatalf("a new cpuset cgroup has CPUs %q; the test assumes none", got)
	}
	if err := c.prepare("sluicetest-cpuset/a/b"); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	parent := filepath.Join(top, "a", "b")
	if err := os.Mkdir(filepath.Join(parent, "pod"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		want := read(c.root, f)
		for _, d := range []string{top, filepath.Join(top, "a"), parent, filepath.Join(parent, "pod")} {
			if got := read(d, f); got != want {
				t.Errorf("%s/%s = %q, want the root's %q", d, f, got, want)
			}
		}
	}
	if got := read(filepath.Join(parent, "pod"), "cgroup.clone_children"); got != "1" {
		t.Errorf("a pod cgroup's clone_children = %q, want 1 (inherited)", got)
	}
	// Once per parent, however it is spelled.
	if err := c.prepare("/sluicetest-cpuset/a/b/"); err != nil || len(c.done) != 1 {
		t.Fatalf("second prepare: %v, %d parents recorded; want nil, 1", err, len(c.done))
	}
}
