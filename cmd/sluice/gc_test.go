package main

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestHostMemory(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       int64
		err        string
	}{
		{"debian", "MemTotal:       24631112 kB\nMemFree:        1000 kB\n", 24631112 << 10, ""},
		{"not first", "Foo: 1 kB\nMemTotal: 2048 kB\n", 2048 << 10, ""},
		{"missing", "MemFree: 1 kB\n", 0, "no MemTotal line"},
		{"unit", "MemTotal: 2048 MB\n", 0, "unexpected MemTotal line"},
		{"number", "MemTotal: x kB\n", 0, "not a positive number"},
		{"zero", "MemTotal: 0 kB\n", 0, "not a positive number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "meminfo")
			if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := hostMemory(path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("hostMemory = %d, %v; want an error saying %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("hostMemory = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	if _, err := hostMemory(filepath.Join(t.TempDir(), "absent")); err == nil {
		t.Fatal("hostMemory of a missing file: no error")
	}
}

// TestGCSetting checks --gc-percent: validated, applied by default, and
// yielding to GOGC in the environment unless given.
func TestGCSetting(t *testing.T) {
	prev := debug.SetGCPercent(100)
	prevLimit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(prev)
		debug.SetMemoryLimit(prevLimit)
	})
	current := func() int {
		p := debug.SetGCPercent(100)
		debug.SetGCPercent(p)
		return p
	}
	for _, tc := range []struct {
		name  string
		args  []string
		gogc  string
		want  int
		error string
	}{
		{"default", nil, "", defaultGCPercent, ""},
		{"flag", []string{"--gc-percent", "250"}, "", 250, ""},
		{"GOGC wins over the default", nil, "100", 100, ""},
		{"the flag wins over GOGC", []string{"--gc-percent", "300"}, "100", 300, ""},
		{"off", []string{"--gc-percent", "-1"}, "", -1, ""},
		{"zero", []string{"--gc-percent", "0"}, "", 100, "want a positive percentage"},
		{"negative", []string{"--gc-percent", "-5"}, "", 100, "want a positive percentage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			t.Setenv("GOGC", tc.gogc)
			var gc gcSetting
			c := &cobra.Command{Use: "x", SilenceUsage: true, SilenceErrors: true, RunE: func(c *cobra.Command, _ []string) error { return gc.apply(c) }}
			gc.addFlag(c)
			c.SetArgs(tc.args)
			err := c.Execute()
			if tc.error != "" {
				if err == nil || !strings.Contains(err.Error(), tc.error) {
					t.Fatalf("err = %v, want one saying %q", err, tc.error)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if got := current(); got != tc.want {
				t.Fatalf("GC percent %d, want %d", got, tc.want)
			}
		})
	}
}

// TestGCSharedLimit: a process of a run of several that share the host
// takes its part of the memory as its soft limit, and none over
// GOMEMLIMIT.
func TestGCSharedLimit(t *testing.T) {
	prevLimit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prevLimit) })
	total, err := usableMemory("/")
	if err != nil {
		t.Skipf("no usable memory to share: %v", err)
	}
	for _, tc := range []struct {
		name      string
		processes int
		gomem     string
		want      int64
	}{
		{"alone", 1, "", int64(float64(total) * memoryLimitShare)},
		{"one of four", 4, "", int64(float64(total) * memoryLimitShare / 4)},
		{"GOMEMLIMIT set", 4, "3GiB", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			t.Setenv("GOMEMLIMIT", tc.gomem)
			var gc gcSetting
			var got int64
			c := &cobra.Command{Use: "x", SilenceUsage: true, SilenceErrors: true, RunE: func(c *cobra.Command, _ []string) (err error) {
				got, err = gc.applyShared(c, tc.processes)
				return err
			}}
			gc.addFlag(c)
			c.SetArgs(nil)
			if err := c.Execute(); err != nil {
				t.Fatal(err)
			}
			set := debug.SetMemoryLimit(-1)
			if got != tc.want || tc.want > 0 && set != tc.want || tc.want == 0 && set != math.MaxInt64 {
				t.Errorf("applyShared returned %d and set %d; want %d", got, set, tc.want)
			}
		})
	}
}

// TestUsableMemory checks the memory the soft limit is taken from: the
// host's, or the process's cgroup limit (v1 or v2) when lower.
func TestUsableMemory(t *testing.T) {
	const host = "MemTotal: 4194304 kB\n" // 4 GiB
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"no cgroup file", map[string]string{}, 4 << 30},
		{"v2 limited", map[string]string{
			"proc/self/cgroup":                      "0::/sluice.slice\n",
			"sys/fs/cgroup/sluice.slice/memory.max": "1073741824\n",
		}, 1 << 30},
		{"v2 unlimited", map[string]string{
			"proc/self/cgroup":                      "0::/sluice.slice\n",
			"sys/fs/cgroup/sluice.slice/memory.max": "max\n",
		}, 4 << 30},
		{"v1 limited", map[string]string{
			"proc/self/cgroup": "9:name=systemd:/\n4:memory:/d\n0::/\n",
			"sys/fs/cgroup/memory/d/memory.limit_in_bytes": "2147483648\n",
		}, 2 << 30},
		{"v1 unlimited", map[string]string{
			"proc/self/cgroup":                           "4:cpu,memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		}, 4 << 30},
		{"limit above the host", map[string]string{
			"proc/self/cgroup":             "0::/big\n",
			"sys/fs/cgroup/big/memory.max": "17179869184\n",
		}, 4 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			tc.files["proc/meminfo"] = host
			for name, text := range tc.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got, err := usableMemory(root); err != nil || got != tc.want {
				t.Fatalf("usableMemory = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	if _, err := usableMemory(t.TempDir()); err == nil {
		t.Fatal("usableMemory without meminfo: no error")
	}
}
