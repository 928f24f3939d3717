package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/api"
)

// errInvalidSpec is returned after the problems of an invalid file have been
// printed, so that main does not print them again.
var errInvalidSpec = errors.New("invalid spec")

func newValidateCmd() *cobra.Command {
	var capboxes bool
	c := &cobra.Command{
		Use:   "validate FILE|-",
		Short: "Check job specs (one object, an array or NDJSON) without submitting them",
		Long: `Validate decodes and checks job specs exactly as the dispatcher does on submit,
and prints every problem with its item index and field path. It exits 0 when
the file is valid and 1 when it is not.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			body, err := readInput(c.InOrStdin(), args[0])
			if err != nil {
				return err
			}
			var summary string
			if capboxes {
				var reqs []api.CapboxRequest
				if reqs, err = api.DecodeCapboxRequests(body); err == nil {
					var n int64
					for _, r := range reqs {
						n += r.Count
					}
					summary = fmt.Sprintf("ok: %d capbox requests, %d capboxes", len(reqs), n)
				}
			} else {
				var jobs []api.JobSpec
				if jobs, err = api.DecodeJobs(body); err == nil {
					var n int64
					for _, j := range jobs {
						for _, g := range j.Tasks {
							n += g.Count
						}
					}
					summary = fmt.Sprintf("ok: %d jobs, %d tasks", len(jobs), n)
				}
			}
			return report(c.OutOrStdout(), summary, err)
		},
	}
	c.Flags().BoolVar(&capboxes, "capboxes", false, "the file holds capbox requests, not jobs")
	return c
}

// report prints the summary of a valid file, or every problem of an invalid
// one, one per line.
func report(w io.Writer, summary string, err error) error {
	var ve *api.ValidationError
	switch {
	case err == nil:
		_, err = fmt.Fprintln(w, summary)
		return err
	case errors.As(err, &ve):
		for _, p := range ve.Problems {
			fmt.Fprintln(w, p)
		}
		if more := ve.Total - len(ve.Problems); more > 0 {
			fmt.Fprintf(w, "... and %d more problems\n", more)
		}
		return fmt.Errorf("%w: %d problems", errInvalidSpec, ve.Total)
	default:
		return err
	}
}

// openInput opens the file name, or returns stdin for "-". The caller
// calls close when done; it does nothing for stdin.
func openInput(stdin io.Reader, name string) (r io.Reader, close func() error, err error) {
	if name == "-" {
		return stdin, func() error { return nil }, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, err
	}
	return f, f.Close, nil
}

// readInput reads a named file, or stdin for "-", up to api.MaxBodyBytes+1
// bytes so that an oversized input is reported as such.
func readInput(stdin io.Reader, name string) ([]byte, error) {
	r, closeInput, err := openInput(stdin, name)
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	defer closeInput()
	b, err := io.ReadAll(io.LimitReader(r, api.MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read spec %s: %w", name, err)
	}
	return b, nil
}
