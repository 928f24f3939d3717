package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/api"
)

func newMembersCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "members",
		Short: "List, add and remove the dispatcher replicas of the cluster",
		Long: `Members lists and changes the dispatcher replicas (the raft membership).

To add a replica, start it empty with --join, its own --id, --peers
holding its raft address and the current members' (members list shows
them) and --http-addr; then run 'members add' with its ID, raft address
and URL. It joins as a learner, catches up from a snapshot, and becomes
a voter. The other replicas' flags need no change: a replica's raft
address and URL are replicated with the membership, and a restarted
replica reads the membership from its own store.

To replace a replica, add the new one first, then remove the old one
and stop its process. Removing the leader hands its leadership to
another voter first. The last voter cannot be removed, and no change is
made that would leave fewer voters answering than a quorum: remove a
dead replica before a live one.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	c.AddCommand(newMembersListCmd(), newMembersAddCmd(), newMembersRemoveCmd())
	return c
}

func newMembersListCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "list",
		Short: "List the dispatcher replicas as the replica asked sees them",
		Args:  usageArgs(cobra.NoArgs),
	}
	cf := addClientFlags(c)
	c.RunE = func(c *cobra.Command, _ []string) error {
		return runMemberCall(c, cf, func(cl *api.Client) (api.MemberList, error) { return cl.Members(c.Context()) })
	}
	return c
}

func newMembersAddCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "add ID RAFT-ADDR URL",
		Short: "Add a dispatcher replica started with --join; returns once it votes",
		Example: `  sluice dispatcher --id 4 --join --data d4 --http-addr 10.0.0.4:8080 \
    --peers 4=10.0.0.4:7000,1=10.0.0.1:7000,2=10.0.0.2:7000,3=10.0.0.3:7000
  sluice dispatcher members add 4 10.0.0.4:7000 http://10.0.0.4:8080`,
		Args: usageArgs(cobra.ExactArgs(3)),
	}
	cf := addClientFlags(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		id, err := parseReplicaID(args[0])
		if err != nil {
			return err
		}
		return runMemberCall(c, cf, func(cl *api.Client) (api.MemberList, error) {
			return cl.AddMember(c.Context(), api.AddMemberRequest{ID: id, RaftAddr: args[1], URL: args[2]})
		})
	}
	return c
}

func newMembersRemoveCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "remove ID",
		Short: "Remove a dispatcher replica (stop its process afterwards)",
		Args:  usageArgs(cobra.ExactArgs(1)),
	}
	cf := addClientFlags(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		id, err := parseReplicaID(args[0])
		if err != nil {
			return err
		}
		return runMemberCall(c, cf, func(cl *api.Client) (api.MemberList, error) { return cl.RemoveMember(c.Context(), id) })
	}
	return c
}

// runMemberCall makes the client of cf, calls call with it, and prints the
// membership it answers.
func runMemberCall(c *cobra.Command, cf *clientFlags, call func(*api.Client) (api.MemberList, error)) error {
	cl, err := cf.client(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	list, err := call(cl)
	if err != nil {
		return explain(err)
	}
	return printMembers(c.OutOrStdout(), cf, list)
}

// parseReplicaID parses a replica ID argument.
func parseReplicaID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, usageError{fmt.Errorf("%q is not a replica ID (a positive integer)", s)}
	}
	return id, nil
}

// printMembers writes the members as a table or, with -o json, as JSON.
func printMembers(w io.Writer, cf *clientFlags, list api.MemberList) error {
	if list.Members == nil {
		list.Members = []api.Member{}
	}
	if cf.json() {
		return printIndented(w, list)
	}
	t := newTable(w, "ID", "ROLE", "RAFT ADDRESS", "URL")
	for _, m := range list.Members {
		role := "voter"
		switch {
		case m.Leader:
			role = "leader"
		case m.Learner:
			role = "learner"
		}
		t.row(strconv.FormatUint(m.ID, 10), role, orDash(m.RaftAddr), orDash(m.URL))
	}
	return t.flush()
}
