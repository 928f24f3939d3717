package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExamplesValid keeps the job files in examples/ valid: the README and
// the demo submit them.
func TestExamplesValid(t *testing.T) {
	files, _ := filepath.Glob("../../examples/*.json")
	more, _ := filepath.Glob("../../examples/*.ndjson")
	files = append(files, more...)
	if len(files) == 0 {
		t.Fatal("no example files")
	}
	for _, f := range files {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"validate", f}, &out, &out); err != nil {
			t.Errorf("%s: %v\n%s", f, err, out.String())
		}
		if !strings.HasPrefix(out.String(), "ok: ") {
			t.Errorf("%s: printed %q", f, out.String())
		}
	}
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`[{"name":"a","tasks":[]},{"nmae":"b"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := run(context.Background(), []string{"validate", bad}, &out, &out)
	if !errors.Is(err, errInvalidSpec) || exitCode(context.Background(), err) != exitError {
		t.Fatalf("validate bad file: %v", err)
	}
	want := "jobs[0].tasks: must have at least one task group (or the job be an appmaster)\njobs[1].nmae: unknown field\njobs[1].name: is required\njobs[1].tasks: must have at least one task group (or the job be an appmaster)\n"
	if out.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), want)
	}

	c := newRootCmd()
	c.SetArgs([]string{"validate", "--capboxes", "-"})
	c.SetIn(strings.NewReader(`{"name":"w","count":3,"resources":{"cpu":100,"memory":"1Mi"}}`))
	out.Reset()
	c.SetOut(&out)
	if err := c.Execute(); err != nil || out.String() != "ok: 1 capbox requests, 3 capboxes\n" {
		t.Errorf("validate --capboxes from stdin: %v, %q", err, out.String())
	}

	err = run(context.Background(), []string{"validate", filepath.Join(dir, "missing.json")}, &out, &out)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	err = run(context.Background(), []string{"validate"}, &out, &out)
	if exitCode(context.Background(), err) != exitUsage {
		t.Errorf("no argument: %v, want a usage error", err)
	}
}
