package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/api"
)

// jobStates are the states --state accepts.
var jobStates = []api.JobState{api.JobPending, api.JobRunning, api.JobSucceeded, api.JobFailed, api.JobCancelled}

func newJobsCmd() *cobra.Command {
	var (
		states, labels []string
		q              api.JobQuery
		all, tasks     bool
	)
	c := &cobra.Command{
		Use:   "jobs [ID]",
		Short: "List jobs, or show one job",
		Long: `Without an ID, jobs lists jobs, oldest first, one page (--limit) at a time, or
every page with --all. With an ID, it shows the job: its spec, the counts of
its task groups, why pending tasks were not placed, and with --tasks its
placed tasks.

A finished job is forgotten after the dispatcher's --job-retention; its
summary (name, queue, labels, times, final state, task counts and first
failure) stays for its --history-retention, listed among the jobs with
its state marked "(history)" (--history exclude leaves these out,
--history only lists them alone), and shown with its ID.`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
	}
	cf := addClientFlags(c)
	fs := c.Flags()
	fs.StringSliceVar(&states, "state", nil, "keep jobs in these states (pending, running, succeeded, failed, cancelled); repeat or comma-separate")
	fs.StringVar(&q.Queue, "queue", "", "keep the jobs of this queue")
	fs.StringArrayVar(&labels, "label", nil, "keep jobs with this label, k=v; repeat for all of several")
	fs.StringVar(&q.History, "history", api.HistoryInclude, "summaries of forgotten jobs: include, exclude or only")
	fs.IntVar(&q.Limit, "limit", 0, "jobs per page (default: the server's)")
	fs.StringVar(&q.After, "after", "", "list from after this page token (the previous page's next)")
	fs.BoolVar(&q.Consistent, "consistent", false, "read from the leader, not a possibly stale replica")
	fs.BoolVar(&all, "all", false, "fetch every page")
	fs.BoolVar(&tasks, "tasks", false, "with an ID: list the job's placed tasks")
	c.RunE = func(c *cobra.Command, args []string) error {
		cl, err := cf.client(c)
		if err != nil {
			return err
		}
		defer cl.Close()
		out := c.OutOrStdout()
		if len(args) == 1 {
			return explain(showJob(c.Context(), cl, args[0], tasks, cf.json(), out))
		}
		if tasks {
			return usageError{fmt.Errorf("--tasks needs a job ID (see '%s --help')", c.CommandPath())}
		}
		if q.History != api.HistoryInclude && q.History != api.HistoryExclude && q.History != api.HistoryOnly {
			return usageError{fmt.Errorf("--history %q: want %s, %s or %s", q.History, api.HistoryInclude, api.HistoryExclude, api.HistoryOnly)}
		}
		if q.History == api.HistoryInclude {
			q.History = "" // the server's default
		}
		if q.Limit < 0 {
			return usageError{fmt.Errorf("--limit %d: want a positive number", q.Limit)}
		}
		for _, s := range states {
			if !slices.Contains(jobStates, api.JobState(s)) {
				return usageError{fmt.Errorf("--state %q: want one of %v", s, jobStates)}
			}
			q.States = append(q.States, api.JobState(s))
		}
		for _, l := range labels {
			k, v, ok := strings.Cut(l, "=")
			if !ok || k == "" {
				return usageError{fmt.Errorf("--label %q: want key=value", l)}
			}
			if q.Labels == nil {
				q.Labels = map[string]string{}
			}
			q.Labels[k] = v
		}
		var list api.JobList
		for {
			page, err := cl.Jobs(c.Context(), q)
			if err != nil {
				return explain(err)
			}
			list.Jobs = append(list.Jobs, page.Jobs...)
			list.Next = page.Next
			if !all || page.Next == "" || len(page.Jobs) == 0 {
				break
			}
			q.After = page.Next
		}
		if list.Jobs == nil {
			list.Jobs = []api.JobStatus{}
		}
		if cf.json() {
			return printIndented(out, list)
		}
		now := time.Now()
		t := newTable(out, "ID", "NAME", "QUEUE", "STATE", "TASKS", "PENDING", "ACTIVE", "SUCCEEDED", "FAILED", "KILLED", "AGE")
		for _, j := range list.Jobs {
			n := j.Tasks
			t.row(j.ID, orDash(j.Spec.Name), orDash(j.Spec.Queue), stateOf(&j), itoa(n.Total), itoa(n.Pending), itoa(n.Active),
				itoa(n.Succeeded), itoa(n.Failed), itoa(n.Killed), age(now, j.Submitted))
		}
		if err := t.flush(); err != nil {
			return err
		}
		if list.Next != "" {
			fmt.Fprintf(c.ErrOrStderr(), "more jobs: --after %s, or --all\n", list.Next)
		}
		return nil
	}
	return c
}

// stateOf is a job's state, marked for a forgotten job's summary.
func stateOf(j *api.JobStatus) string {
	if j.History {
		return string(j.State) + " (history)"
	}
	return string(j.State)
}

// showJob prints one job, and its tasks when tasks is set.
func showJob(ctx context.Context, cl *api.Client, id string, tasks, asJSON bool, w io.Writer) error {
	j, err := cl.Job(ctx, id)
	if err != nil {
		return err
	}
	var ts []api.TaskStatus
	if tasks {
		after := ""
		for {
			page, err := cl.Tasks(ctx, id, after, 0)
			if err != nil {
				return err
			}
			ts = append(ts, page.Tasks...)
			if page.Next == "" || len(page.Tasks) == 0 {
				break
			}
			after = page.Next
		}
	}
	if asJSON {
		if !tasks {
			return printIndented(w, j)
		}
		if ts == nil {
			ts = []api.TaskStatus{}
		}
		return printIndented(w, struct {
			Job   api.JobStatus    `json:"job"`
			Tasks []api.TaskStatus `json:"tasks"`
		}{j, ts})
	}
	now := time.Now()
	kv := newTable(w)
	kv.row("ID:", j.ID)
	kv.row("Name:", orDash(j.Spec.Name))
	kv.row("Queue:", orDash(j.Spec.Queue))
	if j.Spec.Pool != "" {
		kv.row("Pool:", j.Spec.Pool)
	}
	if !j.History { // a summary keeps no more of the spec
		kv.row("Priority:", itoa(j.Spec.Priority))
		kv.row("QoS:", orDash(string(j.Spec.QoS)))
	}
	kv.row("State:", stateOf(&j))
	at := func(t time.Time) string {
		return fmt.Sprintf("%s (%s ago)", t.Local().Format(time.RFC3339), age(now, t))
	}
	kv.row("Submitted:", at(j.Submitted))
	if !j.Started.IsZero() {
		kv.row("Started:", at(j.Started))
	}
	if !j.Ended.IsZero() {
		kv.row("Ended:", at(j.Ended))
	}
	if f := j.FirstFailure; f != nil {
		why := f.State.String()
		if f.Reason != "" {
			why += ", " + string(f.Reason)
		}
		if f.Reason == api.ReasonExited {
			why += " " + itoa(f.ExitCode)
		}
		kv.row("First failure:", fmt.Sprintf("%s %s (%s ago)", f.Task, why, age(now, f.At)))
	}
	if j.History {
		kv.row("History:", "the job was forgotten; this summary is what is kept of it")
	}
	if len(j.Spec.Labels) > 0 {
		var ls []string
		for k, v := range j.Spec.Labels {
			ls = append(ls, k+"="+v)
		}
		slices.Sort(ls)
		kv.row("Labels:", strings.Join(ls, ", "))
	}
	n := j.Tasks
	pending := itoa(n.Pending) + " pending"
	if n.Retrying > 0 {
		pending += " (" + itoa(n.Retrying) + " retrying)"
	}
	kv.row("Tasks:", fmt.Sprintf("%d total, %s, %d active, %d succeeded, %d failed, %d killed",
		n.Total, pending, n.Active, n.Succeeded, n.Failed, n.Killed))
	if err := kv.flush(); err != nil {
		return err
	}
	if len(j.Groups) > 0 {
		fmt.Fprintln(w)
		t := newTable(w, "GROUP", "TASKS", "PENDING", "ACTIVE", "SUCCEEDED", "FAILED", "KILLED")
		for _, g := range j.Groups {
			t.row(g.Name, itoa(g.Total), itoa(g.Pending), itoa(g.Active), itoa(g.Succeeded), itoa(g.Failed), itoa(g.Killed))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(j.Pending) > 0 {
		fmt.Fprintln(w, "\nNot placed:")
		for _, p := range j.Pending {
			fmt.Fprintf(w, "  %s: %d tasks: %s\n", p.Group, p.Tasks, p.Reason)
		}
	}
	if tasks {
		fmt.Fprintln(w)
		t := newTable(w, "TASK", "GROUP", "INDEX", "ATTEMPT", "STATE", "NODE", "HOST", "PORTS", "REASON", "EXIT", "UPDATED")
		for _, s := range ts {
			exit := "-"
			if s.State.Done() && s.Reason == api.ReasonExited {
				exit = itoa(s.ExitCode)
			}
			t.row(s.ID, s.Group, itoa(s.Index), itoa(s.Attempt), s.State.String(), orDash(s.Node), orDash(s.Host), orDash(portList(s.Ports)),
				orDash(string(s.Reason)), exit, age(now, s.Updated))
		}
		return t.flush()
	}
	return nil
}

// portList shows a task's ports as name=port/protocol, comma-separated.
func portList(ps []api.Port) string {
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%d/%s", p.Name, p.Port, p.Protocol)
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
