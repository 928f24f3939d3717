package main

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestApplyEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		want    string
		wantN   int
		wantErr bool
	}{
		{name: "default", want: "d", wantN: 1},
		{name: "env", env: map[string]string{"SLUICE_HTTP_ADDR": "e", "SLUICE_COUNT": "7"}, want: "e", wantN: 7},
		{name: "flag wins", args: []string{"--http-addr", "f"}, env: map[string]string{"SLUICE_HTTP_ADDR": "e"}, want: "f", wantN: 1},
		{name: "bad env", env: map[string]string{"SLUICE_COUNT": "seven"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			c := &cobra.Command{Use: "x"}
			addr := c.Flags().String("http-addr", "d", "")
			n := c.Flags().Int("count", 1, "")
			if err := c.Flags().Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := applyEnv(c)
			var ue usageError
			if tc.wantErr {
				if !errors.As(err, &ue) {
					t.Fatalf("applyEnv = %v, want a usage error", err)
				}
				return
			}
			if err != nil || *addr != tc.want || *n != tc.wantN {
				t.Fatalf("applyEnv = %v; addr %q n %d, want %q %d", err, *addr, *n, tc.want, tc.wantN)
			}
		})
	}
}

func TestApplySettings(t *testing.T) {
	for _, tc := range []struct {
		name    string
		file    string
		args    []string
		env     map[string]string
		want    string
		wantN   int
		wantErr string
	}{
		{name: "file", file: "# comment\nhttp-addr = f\n\ncount=3 # three\n", want: "f", wantN: 3},
		{name: "env beats file", file: "http-addr = f\n", env: map[string]string{"SLUICE_HTTP_ADDR": "e"}, want: "e", wantN: 1},
		{name: "flag beats file", file: "count = 3\n", args: []string{"--count", "4"}, want: "d", wantN: 4},
		{name: "unknown setting", file: "colour = red\n", wantErr: `:1: "colour" is not a setting`},
		{name: "no equals", file: "\ncount 3\n", wantErr: `:2: want name = value`},
		{name: "bad value", file: "count = three\n", wantErr: `:1: count:`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			path := t.TempDir() + "/sluice.conf"
			if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			c := &cobra.Command{Use: "x"}
			addr := c.Flags().String("http-addr", "d", "")
			n := c.Flags().Int("count", 1, "")
			c.Flags().String("config", "", "")
			if err := c.Flags().Parse(append(tc.args, "--config", path)); err != nil {
				t.Fatal(err)
			}
			err := applySettings(c)
			if tc.wantErr != "" {
				var ue usageError
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("applySettings = %v, want a usage error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || *addr != tc.want || *n != tc.wantN {
				t.Fatalf("applySettings = %v; addr %q n %d, want %q %d", err, *addr, *n, tc.want, tc.wantN)
			}
		})
	}
}
