package main

import (
	"errors"
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
