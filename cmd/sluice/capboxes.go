package main

import (
	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/api"
)

func newCapboxesCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "capboxes JOB",
		Short: "List an appmaster's capboxes and the tasks it runs in them",
		Long: `Capboxes lists the capboxes of the appmaster job JOB: each capbox's set,
request, state, node and resources, and under it the tasks the appmaster
started in it. Appmasters lease and release capboxes through the appmaster
SDK or the HTTP API (POST and DELETE /v1/jobs/JOB/capboxes).`,
		Args: usageArgs(cobra.ExactArgs(1)),
	}
	cf := addClientFlags(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		cl, err := cf.client(c)
		if err != nil {
			return err
		}
		defer cl.Close()
		list, err := cl.Capboxes(c.Context(), args[0])
		if err != nil {
			return explain(err)
		}
		if list.Capboxes == nil {
			list.Capboxes = []api.CapboxStatus{}
		}
		if cf.json() {
			return printIndented(c.OutOrStdout(), list)
		}
		t := newTable(c.OutOrStdout(), "ID", "REQUEST", "STATE", "NODE", "CPU", "MEM")
		for _, b := range list.Capboxes {
			t.row(b.ID, b.Request, b.State.String(), orDash(b.Node), cores(b.Resources.CPU), bytesIEC(b.Resources.Memory))
			for _, ts := range b.Tasks {
				t.row("  "+ts.ID, "task", ts.State.String(), orDash(b.Node), "-", "-")
			}
		}
		return t.flush()
	}
	return c
}
