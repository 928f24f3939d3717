package main

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestUsageErrors checks that bad command lines are refused as usage
// errors naming what is wrong, before any connection is tried.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--endpoints is required"},
		{[]string{"--endpoints", "http://127.0.0.1:1", "--writers", "0"}, "writers 0"},
		{[]string{"--endpoints", "http://127.0.0.1:1", "--duration", "0s"}, "duration 0s"},
		{[]string{"--endpoints", "http://127.0.0.1:1", "extra"}, "unexpected arguments"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
	} {
		err := run(context.Background(), tc.args)
		if !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v, want a usage error saying %q", tc.args, err, tc.want)
		}
	}
}
