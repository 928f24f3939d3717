package lint

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/sluicehq/sluice"

// rooms lists, for each top-level folder, the folders of ours its packages
// may depend on, directly or not (DESIGN.md, "Packages"). Sub-packages belong
// to their top-level folder's room. A folder missing here is an error: add it
// to DESIGN.md's table and here together.
var rooms = map[string][]string{
	"clock":      nil,
	"api":        {"clock"},
	"flowsolver": nil,
	"batcher":    {"clock"},
	"raftkv":     {"clock"},
	"dispatcher": {"clock", "api", "flowsolver", "batcher", "raftkv"},
	"nodelet":    {"clock", "api"},
	"appmaster":  {"clock", "api"},
	"loadgen":    {"clock", "api"},
	"bench":      {"clock", "api", "flowsolver", "batcher", "raftkv", "dispatcher", "nodelet", "appmaster", "loadgen"},
	"cmd":        {"clock", "api", "flowsolver", "batcher", "raftkv", "dispatcher", "nodelet", "appmaster", "loadgen", "bench"},
	"internal":   nil,
	// examples are programs a user would write: on the public API and
	// the appmaster SDK alone (and the clock their configs take).
	"examples": {"clock", "api", "appmaster"},
}

// room returns the top-level folder of one of our packages, or "" for a
// package that is not ours.
func room(pkg string) string {
	rest, ok := strings.CutPrefix(pkg, module+"/")
	if !ok {
		return ""
	}
	top, _, _ := strings.Cut(rest, "/")
	return top
}

// violations checks an import graph (package → its transitive dependencies)
// against rooms and returns one line per forbidden dependency, sorted.
func violations(deps map[string][]string) []string {
	var out []string
	for pkg, ds := range deps {
		from := room(pkg)
		if from == "" {
			continue
		}
		allowed, known := rooms[from]
		if !known {
			out = append(out, fmt.Sprintf("%s: folder %q is not in the layering table", pkg, from))
			continue
		}
		for _, d := range ds {
			to := room(d)
			if to == "" || to == from || slices.Contains(allowed, to) {
				continue
			}
			out = append(out, fmt.Sprintf("%s depends on %s: %s may use only %v", pkg, d, from, allowed))
		}
	}
	sort.Strings(out)
	return out
}

func TestLayering(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	deps := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 0 {
			deps[fields[0]] = fields[1:]
		}
	}
	if len(deps) < 3 {
		t.Fatalf("go list found only %d packages", len(deps))
	}
	for _, v := range violations(deps) {
		t.Error(v)
	}
}

// TestViolations shows that the rule catches what it must, on a made-up
// graph.
func TestViolations(t *testing.T) {
	m := func(s string) string { return module + "/" + s }
	got := violations(map[string][]string{
		m("api"):                  {"fmt", m("batcher"), m("clock")},
		m("clock"):                {"sync", m("api")},
		m("batcher"):              {m("clock")},
		m("nodelet/container"):    {m("api"), m("nodelet"), m("dispatcher")},
		m("dispatcher"):           {m("api"), m("raftkv"), m("flowsolver"), m("batcher")},
		m("loadgen"):              {m("bench")},
		m("cmd/sluice"):           {m("bench"), m("dispatcher")},
		m("scheduler"):            {m("api")},
		m("batcher/batchertest"):  {m("batcher")},
		"example.com/other/thing": {m("cmd/sluice")},
	})
	want := []string{
		m("api") + " depends on " + m("batcher") + ": api may use only [clock]",
		m("clock") + " depends on " + m("api") + ": clock may use only []",
		m("loadgen") + " depends on " + m("bench") + ": loadgen may use only [clock api]",
		m("nodelet/container") + " depends on " + m("dispatcher") + ": nodelet may use only [clock api]",
		m("scheduler") + `: folder "scheduler" is not in the layering table`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSluiceBinaryDeps keeps heavy packages out of the sluice binary: every
// pod's sandbox re-executes it, and so does every container's init when
// no sluice-shim is installed beside it, paying for every package's
// initialization. The etcd client has its own binary (cmd/etcdload), the
// plots theirs (cmd/benchplot).
func TestSluiceBinaryDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", module+"/cmd/sluice").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, heavy := range []string{"go.etcd.io/etcd/client/v3", "gonum.org/v1/plot"} {
		for dep := range strings.Lines(string(out)) {
			if strings.TrimSpace(dep) == heavy {
				t.Errorf("cmd/sluice depends on %s", heavy)
			}
		}
	}
}

// TestShimBinaryDeps keeps sluice-shim small: each container's init boots
// it, so it links libcontainer and the shim's own package, and nothing
// else of Sluice's or of its heavy dependencies.
func TestShimBinaryDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", module+"/cmd/sluice-shim").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	allowed := map[string]bool{module + "/cmd/sluice-shim": true, module + "/nodelet/runtime/container/shim": true}
	heavy := []string{"github.com/prometheus/", "github.com/cockroachdb/", "go.etcd.io/", "github.com/valyala/", "github.com/spf13/", "google.golang.org/"}
	for dep := range strings.Lines(string(out)) {
		dep = strings.TrimSpace(dep)
		if strings.HasPrefix(dep, module+"/") && !allowed[dep] {
			t.Errorf("cmd/sluice-shim depends on %s", dep)
		}
		for _, h := range heavy {
			if strings.HasPrefix(dep, h) {
				t.Errorf("cmd/sluice-shim depends on %s", dep)
			}
		}
	}
}

// TestFSMKeepsOnlyState keeps the FSM to the replicated state: what
// derives from it (the round input, the watch feed, node wake-ups) are
// views in the dispatcher that consume its change sets, so it depends
// on no other package of the dispatcher's.
func TestFSMKeepsOnlyState(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", module+"/dispatcher/fsm").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for dep := range strings.Lines(string(out)) {
		dep = strings.TrimSpace(dep)
		if strings.HasPrefix(dep, module+"/dispatcher") && dep != module+"/dispatcher/fsm" {
			t.Errorf("dispatcher/fsm depends on %s", dep)
		}
	}
}
