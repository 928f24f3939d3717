package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"version"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.HasPrefix(got, "sluice ") || !strings.Contains(got, runtime.Version()) {
		t.Errorf("version printed %q", got)
	}
	out.Reset()
	if err := run(context.Background(), []string{"version", "--json"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	var b buildInfo
	if err := json.Unmarshal(out.Bytes(), &b); err != nil || b.Version == "" || b.GoVersion != runtime.Version() {
		t.Errorf("version --json printed %q: %+v, %v", out.String(), b, err)
	}
}

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"version"}, exitOK, ""},
		{[]string{"--help"}, exitOK, ""},
		{[]string{}, exitOK, ""},
		{[]string{"verison"}, exitUsage, `did you mean "version"?`},
		{[]string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{[]string{"version", "extra"}, exitUsage, `unknown command "extra"`},
		{[]string{"version", "--bogus"}, exitUsage, "unknown flag: --bogus"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			ctx := context.Background()
			var out bytes.Buffer
			err := run(ctx, tc.args, &out, &out)
			if got := exitCode(ctx, err); got != tc.code {
				t.Errorf("exit code %d, want %d (err %v)", got, tc.code, err)
			}
			if tc.msg != "" && (err == nil || !strings.Contains(err.Error(), tc.msg)) {
				t.Errorf("error %v, want it to contain %q", err, tc.msg)
			}
		})
	}
}

func TestExitCodeMapping(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		ctx  context.Context
		err  error
		code int
	}{
		{context.Background(), nil, exitOK},
		{context.Background(), errors.New("boom"), exitError},
		{context.Background(), usageError{errors.New("bad flag")}, exitUsage},
		{context.Background(), fmt.Errorf("wrapped: %w", usageError{errors.New("bad")}), exitUsage},
		{cancelled, fmt.Errorf("serve: %w", context.Canceled), exitInterrupted},
		{context.Background(), context.Canceled, exitError},
		{context.Background(), fmt.Errorf("solve: %w", exitStatusError{code: exitInfeasible, err: errors.New("x")}), exitInfeasible},
	} {
		if got := exitCode(tc.ctx, tc.err); got != tc.code {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.code)
		}
	}
}
