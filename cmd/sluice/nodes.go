package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/api"
)

func newNodesCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "nodes",
		Short: "List the registered nodes and what their tasks hold",
		Long: `Nodes lists the registered nodes. CPU and MEM are shown per QoS tier as
used/allocatable: online is guaranteed, offline may be overcommitted on what
online work leaves idle. USED CPU and USED MEM, shown when a node reported
its usage, are what its pods use now, both tiers together (-o json has them
per tier, and the time of the node's last heartbeat). A drained node shows
as draining (down,drained while down), and DEADLINE, shown when a drain has
one, is when its tasks are stopped and requeued.

The subcommands drain, undrain and remove steer nodes; they take an admin
token.`,
		Args: usageArgs(cobra.NoArgs),
	}
	c.AddCommand(newNodesDrainCmd(), newNodesUndrainCmd(), newNodesRemoveCmd())
	cf := addClientFlags(c)
	c.RunE = func(c *cobra.Command, _ []string) error {
		cl, err := cf.client(c)
		if err != nil {
			return err
		}
		defer cl.Close()
		list, err := cl.Nodes(c.Context())
		if err != nil {
			return explain(err)
		}
		if list.Nodes == nil {
			list.Nodes = []api.NodeInfo{}
		}
		if cf.json() {
			return printIndented(c.OutOrStdout(), list)
		}
		gpus, usage, deadlines := false, false, false
		for _, n := range list.Nodes {
			gpus = gpus || n.Spec.Capacity.GPUs > 0
			usage = usage || n.Usage != nil
			deadlines = deadlines || !n.DrainDeadline.IsZero()
		}
		header := []string{"NAME", "STATE", "POOL", "TASKS", "CPU ONLINE", "CPU OFFLINE", "MEM ONLINE", "MEM OFFLINE"}
		if gpus {
			header = append(header, "GPU")
		}
		if usage {
			header = append(header, "USED CPU", "USED MEM")
		}
		if deadlines {
			header = append(header, "DEADLINE")
		}
		t := newTable(c.OutOrStdout(), header...)
		for _, n := range list.Nodes {
			a, u := n.Spec.Allocatable, n.Used
			state := string(n.State)
			if n.Drained && n.State != api.NodeDraining {
				state += ",drained"
			}
			row := []string{n.Spec.Name, state, orDash(n.Spec.Pool), itoa(n.Tasks),
				cores(u.Online.CPU) + "/" + cores(a.Online.CPU),
				cores(u.Offline.CPU) + "/" + cores(a.Offline.CPU),
				bytesIEC(u.Online.Memory) + "/" + bytesIEC(a.Online.Memory),
				bytesIEC(u.Offline.Memory) + "/" + bytesIEC(a.Offline.Memory),
			}
			if gpus {
				row = append(row, itoa(u.Online.GPUs+u.Offline.GPUs)+"/"+itoa(n.Spec.Capacity.GPUs))
			}
			switch {
			case !usage:
			case n.Usage == nil:
				row = append(row, "-", "-")
			default:
				row = append(row, cores(n.Usage.Total.CPU), bytesIEC(n.Usage.Total.Memory))
			}
			switch {
			case !deadlines:
			case n.DrainDeadline.IsZero():
				row = append(row, "-")
			default:
				row = append(row, n.DrainDeadline.UTC().Format(time.RFC3339))
			}
			t.row(row...)
		}
		return t.flush()
	}
	return c
}

func newNodesDrainCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "drain NAME",
		Short: "Drain a node: no new tasks; its tasks are stopped and requeued at the deadline",
		Long: `Drain stops a node from taking new tasks. Its running tasks run on until
--deadline, if given, when the dispatcher stops them and runs them again
elsewhere (reason drained; not counted as failed attempts). The node stays
drained when its nodelet registers again or it goes down and comes back,
until undrain. Draining a draining node sets its deadline anew.

--deadline is a duration from now by the dispatcher's clock (30m) or a time
(RFC 3339: 2030-01-02T15:04:05Z); a deadline passed stops the tasks at once.`,
		Args: usageArgs(cobra.ExactArgs(1)),
	}
	cf := addClientFlags(c)
	deadline := c.Flags().String("deadline", "", "when its tasks are stopped and requeued: a duration from now or an RFC 3339 time (default: never)")
	c.RunE = func(c *cobra.Command, args []string) error {
		cl, err := cf.client(c) // first: it applies the environment to the flags
		if err != nil {
			return err
		}
		defer cl.Close()
		var req api.DrainRequest
		if *deadline != "" {
			if d, err := time.ParseDuration(*deadline); err == nil && d >= 0 {
				req.Timeout = api.Duration(d)
			} else if at, err := time.Parse(time.RFC3339, *deadline); err == nil {
				req.Deadline = at
			} else {
				return usageError{fmt.Errorf("--deadline %q: want a duration such as 30m or an RFC 3339 time", *deadline)}
			}
		}
		r, err := cl.DrainNode(c.Context(), args[0], req)
		if err != nil {
			return explain(err)
		}
		if cf.json() {
			return printIndented(c.OutOrStdout(), r)
		}
		var what string
		switch {
		case r.Stopped > 0:
			what = fmt.Sprintf("%d tasks stopped and requeued", r.Stopped)
		case r.DrainDeadline.IsZero():
			what = fmt.Sprintf("%d tasks run to their end", r.Tasks)
		default:
			what = fmt.Sprintf("%d tasks stopped and requeued at %s", r.Tasks, r.DrainDeadline.UTC().Format(time.RFC3339))
		}
		_, err = fmt.Fprintf(c.OutOrStdout(), "%s: %s (%s)\n", r.Name, r.State, what)
		return err
	}
	return c
}

func newNodesUndrainCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "undrain NAME",
		Short: "End a node's drain: it takes new tasks again",
		Args:  usageArgs(cobra.ExactArgs(1)),
	}
	cf := addClientFlags(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		cl, err := cf.client(c)
		if err != nil {
			return err
		}
		defer cl.Close()
		r, err := cl.UndrainNode(c.Context(), args[0])
		if err != nil {
			return explain(err)
		}
		if cf.json() {
			return printIndented(c.OutOrStdout(), r)
		}
		_, err = fmt.Fprintf(c.OutOrStdout(), "%s: %s\n", r.Name, r.State)
		return err
	}
	return c
}

func newNodesRemoveCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "remove NAME",
		Short: "Forget a drained or down node that runs no task",
		Long: `Remove forgets a node: it must be drained (or down) with no task active on
it, else the dispatcher refuses (exit 1). Stop its nodelet first: a nodelet
that registers again afterwards joins as a new, ready node.`,
		Args: usageArgs(cobra.ExactArgs(1)),
	}
	cf := addClientFlags(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		cl, err := cf.client(c)
		if err != nil {
			return err
		}
		defer cl.Close()
		if err := cl.RemoveNode(c.Context(), args[0]); err != nil {
			return explain(err)
		}
		if cf.json() {
			return printIndented(c.OutOrStdout(), struct {
				Name    string `json:"name"`
				Removed bool   `json:"removed"`
			}{args[0], true})
		}
		_, err = fmt.Fprintf(c.OutOrStdout(), "%s: removed\n", args[0])
		return err
	}
	return c
}
