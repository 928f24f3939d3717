package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/bench/suite/suitetest"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	s := suitetest.Suite()
	for name, r := range map[string]any{"submit": s.Submit, "raftkv": s.Raftkv, "e2e": s.E2E, "soak": s.Soak} {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	if err := run(&out, []string{"--dir", dir}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"e2e-throughput.png", "e2e-latency.png", "soak.png", "raftkv.png", "submit.png"} {
		p := filepath.Join(dir, f)
		if !strings.Contains(out.String(), p+"\n") {
			t.Errorf("output %q does not name %s", out.String(), p)
		}
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestRunBadInput(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args  []string
		usage bool
		want  string
	}{
		{[]string{"extra"}, true, "unexpected arguments"},
		{[]string{"--bogus"}, true, "bogus"},
		{[]string{"--dir", filepath.Join(t.TempDir(), "missing")}, false, "no such file"},
		{[]string{"--dir", file}, false, "not a directory"},
	} {
		err := run(&strings.Builder{}, tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, errUsage) != tc.usage {
			t.Errorf("run %q: %v, want an error containing %q (usage: %v)", tc.args, err, tc.want, tc.usage)
		}
	}
}
