package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/api"
)

func newCancelCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "cancel ID...",
		Short: "Cancel jobs: stop their running tasks and drop their pending ones",
		Args:  usageArgs(cobra.MinimumNArgs(1)),
	}
	cf := addClientFlags(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		cl, err := cf.client(c)
		if err != nil {
			return err
		}
		defer cl.Close()
		var (
			done   []api.CancelResponse
			failed int
			last   error
		)
		for _, id := range args {
			r, err := cl.Cancel(c.Context(), id)
			if err != nil {
				if c.Context().Err() != nil {
					return err
				}
				if len(args) == 1 {
					return explain(err)
				}
				fmt.Fprintf(c.ErrOrStderr(), "sluice: cancel %s: %v\n", id, explain(err))
				failed++
				last = err
				continue
			}
			done = append(done, r)
			if !cf.json() {
				fmt.Fprintf(c.OutOrStdout(), "%s: cancelled (%d tasks stopping, %d pending dropped)\n", r.ID, r.Stopping, r.Dropped)
			}
		}
		if cf.json() {
			if done == nil {
				done = []api.CancelResponse{}
			}
			if err := printIndented(c.OutOrStdout(), done); err != nil {
				return err
			}
		}
		if failed > 0 {
			return fmt.Errorf("%d of %d cancels failed: %w", failed, len(args), explain(last))
		}
		return nil
	}
	return c
}
