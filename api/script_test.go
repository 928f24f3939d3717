package api_test

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/api"
)

var update = flag.Bool("update", false, "rewrite the expected output of testdata scripts")

// TestDecodeScripts runs the cases in testdata/decode/*.txt. A file holds
// cases, each a line "=== NAME [capboxes|captasks]", the request body, a line "----",
// and the expected outcome: "ok N" when N items decode, or every problem on a
// line of its own. Run with -update to rewrite the expectations.
func TestDecodeScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/decode/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			cases := parseScript(t, string(data))
			var out strings.Builder
			for _, c := range cases {
				got := runCase(c)
				if !*update && got != c.want {
					t.Errorf("%s: case %q:\n--- got\n%s--- want\n%s", file, c.name, got, c.want)
				}
				fmt.Fprintf(&out, "=== %s\n%s----\n%s", c.header, c.body, got)
			}
			if *update {
				if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

type scriptCase struct {
	header, name string
	kind         string // "", "capboxes" or "captasks"
	body, want   string
}

func parseScript(t *testing.T, s string) []scriptCase {
	t.Helper()
	var cases []scriptCase
	for _, part := range strings.Split(s, "=== ")[1:] {
		header, rest, _ := strings.Cut(part, "\n")
		body, want, ok := strings.Cut(rest, "----\n")
		if !ok {
			t.Fatalf("case %q has no ---- line", header)
		}
		c := scriptCase{header: header, name: header, body: body, want: want}
		for _, kind := range []string{"capboxes", "captasks"} {
			if n, ok := strings.CutSuffix(header, " ["+kind+"]"); ok {
				c.name, c.kind = n, kind
			}
		}
		cases = append(cases, c)
	}
	return cases
}

func runCase(c scriptCase) string {
	body := strings.TrimSuffix(c.body, "\n")
	var n int
	var err error
	switch c.kind {
	case "capboxes":
		var reqs []api.CapboxRequest
		reqs, err = api.DecodeCapboxRequests([]byte(body))
		n = len(reqs)
	case "captasks":
		var ts []api.CapTaskSpec
		ts, err = api.DecodeCapTasks([]byte(body))
		n = len(ts)
	default:
		var jobs []api.JobSpec
		jobs, err = api.DecodeJobs([]byte(body))
		n = len(jobs)
	}
	var ve *api.ValidationError
	switch {
	case err == nil:
		return fmt.Sprintf("ok %d\n", n)
	case errors.As(err, &ve):
		var b strings.Builder
		for _, p := range ve.Problems {
			fmt.Fprintf(&b, "%d %s\n", p.Item, p)
		}
		if more := ve.Total - len(ve.Problems); more > 0 {
			fmt.Fprintf(&b, "and %d more\n", more)
		}
		return b.String()
	default:
		return "error: " + err.Error() + "\n"
	}
}
