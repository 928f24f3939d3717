package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/api"
)

func newWatchCmd() *cobra.Command {
	var from uint64
	c := &cobra.Command{
		Use:   "watch",
		Short: "Print job state changes as they are committed",
		Long: `Watch prints a line per change of a job: the raft index of the change, the
job, its state and its task counts; with -o json, the stream's NDJSON events.
It runs until interrupted or until the dispatcher ends the stream; --from
resumes after an index.`,
		Args: usageArgs(cobra.NoArgs),
	}
	cf := addClientFlags(c)
	c.Flags().Uint64Var(&from, "from", 0, "start after this index (default: what the server keeps)")
	c.RunE = func(c *cobra.Command, _ []string) error {
		cl, err := cf.client(c)
		if err != nil {
			return err
		}
		defer cl.Close()
		w := c.OutOrStdout()
		watch := cl.WatchBrief // the lines print no spec
		if cf.json() {
			watch = cl.Watch
		}
		err = watch(c.Context(), from, func(ev api.WatchEvent) error {
			if cf.json() {
				b, err := json.Marshal(ev)
				if err != nil {
					return fmt.Errorf("encode event: %w", err)
				}
				_, err = fmt.Fprintf(w, "%s\n", b)
				return err
			}
			n := ev.Job.Tasks
			_, err := fmt.Fprintf(w, "%-10d %-16s %-10s %d tasks: %d pending, %d active, %d succeeded, %d failed, %d killed\n",
				ev.Index, ev.Job.ID, ev.Job.State, n.Total, n.Pending, n.Active, n.Succeeded, n.Failed, n.Killed)
			return err
		})
		return explain(err)
	}
	return c
}
