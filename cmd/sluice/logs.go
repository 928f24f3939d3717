package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/api"
)

func newLogsCmd() *cobra.Command {
	var opts api.LogOptions
	c := &cobra.Command{
		Use:   "logs TASK",
		Short: "Print a task's output, fetched through the dispatcher from its node",
		Args:  usageArgs(cobra.ExactArgs(1)),
	}
	cf := addClientFlags(c)
	c.Flags().BoolVarP(&opts.Follow, "follow", "f", false, "keep printing until the task ends")
	c.Flags().StringVar(&opts.Container, "container", "", "the container (default: the pod's first)")
	c.Flags().IntVar(&opts.Tail, "tail", 0, "print only the last N lines (default: all)")
	c.RunE = func(c *cobra.Command, args []string) error {
		cl, err := cf.client(c)
		if err != nil {
			return err
		}
		defer cl.Close()
		if opts.Tail < 0 {
			return usageError{fmt.Errorf("--tail %d: want a positive number", opts.Tail)}
		}
		return explain(cl.Logs(c.Context(), args[0], opts, c.OutOrStdout()))
	}
	return c
}
