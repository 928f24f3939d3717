package main

import (
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
per tier, and the time of the node's last heartbeat).`,
		Args: usageArgs(cobra.NoArgs),
	}
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
		gpus, usage := false, false
		for _, n := range list.Nodes {
			gpus = gpus || n.Spec.Capacity.GPUs > 0
			usage = usage || n.Usage != nil
		}
		header := []string{"NAME", "STATE", "POOL", "TASKS", "CPU ONLINE", "CPU OFFLINE", "MEM ONLINE", "MEM OFFLINE"}
		if gpus {
			header = append(header, "GPU")
		}
		if usage {
			header = append(header, "USED CPU", "USED MEM")
		}
		t := newTable(c.OutOrStdout(), header...)
		for _, n := range list.Nodes {
			a, u := n.Spec.Allocatable, n.Used
			row := []string{n.Spec.Name, string(n.State), orDash(n.Spec.Pool), itoa(n.Tasks),
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
			t.row(row...)
		}
		return t.flush()
	}
	return c
}
