package helperbin_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/bench/helperbin"
)

func TestFind(t *testing.T) {
	dir := t.TempDir()
	tool := filepath.Join(dir, "sluice-test-helper")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "not-executable"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	for _, tc := range []struct {
		name, path, want string
		ok               bool
	}{
		{"anything", "/given/path", "/given/path", true},
		{"sluice-test-helper", "", tool, true},
		{"not-executable", "", "", false},
		{"missing", "", "", false},
	} {
		got, ok := helperbin.Find(tc.name, tc.path)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Find(%q, %q) = %q, %v; want %q, %v", tc.name, tc.path, got, ok, tc.want, tc.ok)
		}
	}
}
