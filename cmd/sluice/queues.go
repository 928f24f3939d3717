package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/api"
)

func newQueuesCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "queues",
		Short: "List the queues: weights, caps and what they run",
		Long: `Queues lists the queues that have settings, active or pending tasks, or a
weight in the dispatcher's --queue-weights. WEIGHT is the fair-share weight
rounds give the queue; CPU, MEM, GPU and TASKS are what its active tasks
hold over the queue's cap ("-": no cap); PENDING counts its tasks waiting
for placement. A queue's tasks that its caps hold back wait with the reason
"queue NAME over its DIM quota" (sluice jobs ID shows it).`,
		Args: usageArgs(cobra.NoArgs),
	}
	cf := addClientFlags(c)
	c.RunE = func(c *cobra.Command, _ []string) error {
		cl, err := cf.client(c)
		if err != nil {
			return err
		}
		defer cl.Close()
		list, err := cl.Queues(c.Context())
		if err != nil {
			return explain(err)
		}
		if list.Queues == nil {
			list.Queues = []api.QueueStatus{}
		}
		if cf.json() {
			return printIndented(c.OutOrStdout(), list)
		}
		return printQueues(c, list.Queues...)
	}
	c.AddCommand(newQueuesSetCmd())
	return c
}

// printQueues writes qs as a table.
func printQueues(c *cobra.Command, qs ...api.QueueStatus) error {
	t := newTable(c.OutOrStdout(), "NAME", "WEIGHT", "CPU", "MEM", "GPU", "TASKS", "PENDING")
	for _, q := range qs {
		t.row(q.Name, itoa(q.EffectiveWeight),
			cores(q.Running.CPU)+"/"+capOr(q.Caps.CPU, cores),
			bytesIEC(q.Running.Memory)+"/"+capOr(q.Caps.Memory, bytesIEC),
			itoa(q.Running.GPUs)+"/"+capOr(q.Caps.GPUs, itoa[int64]),
			itoa(q.Tasks)+"/"+capOr(q.Caps.Tasks, itoa[int64]),
			itoa(q.Pending))
	}
	return t.flush()
}

// capOr formats a cap with format, or "-" for none.
func capOr(v int64, format func(int64) string) string {
	if v == 0 {
		return "-"
	}
	return format(v)
}

func newQueuesSetCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "set NAME [--cpu C] [--memory M] [--gpus G] [--tasks N] [--weight W]",
		Short: "Set a queue's caps and weight (admin)",
		Long: `Set sets a queue's hard caps and fair-share weight; the flags not given
keep the queue's current values. The caps bound what the queue's active
tasks hold in all: --cpu in cores (4, 0.5, 500m), --memory in bytes with an
optional unit (64Gi, 500M), --gpus and --tasks as counts; 0 or "none" is no
cap. Placement never starts a task that would take the queue over a cap;
lowering a cap below what the queue runs stops nothing. --weight is 1 to
1000, or 0 for the dispatcher's --queue-weights (default 1). It needs an
admin token, and prints the queue as "sluice queues" does.`,
		Args: usageArgs(cobra.ExactArgs(1)),
	}
	cf := addClientFlags(c)
	fs := c.Flags()
	var cpu, memory, gpus, tasks, weight string
	fs.StringVar(&cpu, "cpu", "", `CPU cap in cores (4, 0.5, 500m); 0 or "none": no cap`)
	fs.StringVar(&memory, "memory", "", `memory cap (64Gi, 500M, bytes); 0 or "none": no cap`)
	fs.StringVar(&gpus, "gpus", "", `GPU cap, whole GPUs; 0 or "none": no cap`)
	fs.StringVar(&tasks, "tasks", "", `cap on active tasks; 0 or "none": no cap`)
	fs.StringVar(&weight, "weight", "", "fair-share weight, 1 to 1000; 0: the dispatcher's --queue-weights")
	c.RunE = func(c *cobra.Command, args []string) error {
		name := args[0]
		if err := api.CheckName(name); err != nil {
			return usageError{fmt.Errorf("queue name: %w", err)}
		}
		type field struct {
			flag  string
			val   *string
			parse func(string) (int64, error)
			want  string
			dst   func(*api.QueueSettings) *int64
		}
		fields := []field{
			{"cpu", &cpu, api.ParseCPU, "cores such as 4, 0.5 or 500m", func(s *api.QueueSettings) *int64 { return &s.Caps.CPU }},
			{"memory", &memory, api.ParseBytes, "bytes with an optional unit k, M, G, T, P, Ki, Mi, Gi, Ti or Pi", func(s *api.QueueSettings) *int64 { return &s.Caps.Memory }},
			{"gpus", &gpus, parseCount, "a whole number of GPUs", func(s *api.QueueSettings) *int64 { return &s.Caps.GPUs }},
			{"tasks", &tasks, parseCount, "a whole number of tasks", func(s *api.QueueSettings) *int64 { return &s.Caps.Tasks }},
		}
		// set are the changes the flags given make to the queue's
		// settings.
		var set []func(*api.QueueSettings)
		var errs []string
		for _, f := range fields {
			if !c.Flags().Changed(f.flag) {
				continue
			}
			v, err := parseCap(*f.val, f.parse, f.want)
			if err != nil {
				errs = append(errs, fmt.Sprintf("--%s: %v", f.flag, err))
			}
			set = append(set, func(s *api.QueueSettings) { *f.dst(s) = v })
		}
		if c.Flags().Changed("weight") {
			w, err := strconv.ParseInt(strings.TrimSpace(weight), 10, 64)
			if err != nil || w < 0 || w > api.MaxQueueWeight {
				errs = append(errs, fmt.Sprintf("--weight: %q: want an integer from 1 to %d, or 0 for the dispatcher's", weight, api.MaxQueueWeight))
			}
			set = append(set, func(s *api.QueueSettings) { s.Weight = w })
		}
		if len(errs) > 0 {
			return usageError{fmt.Errorf("%s", strings.Join(errs, "; "))}
		}
		if len(set) == 0 {
			return usageError{fmt.Errorf("nothing to set: give --cpu, --memory, --gpus, --tasks or --weight")}
		}
		cl, err := cf.client(c)
		if err != nil {
			return err
		}
		defer cl.Close()
		list, err := cl.Queues(c.Context())
		if err != nil {
			return explain(err)
		}
		var s api.QueueSettings
		if i := slices.IndexFunc(list.Queues, func(q api.QueueStatus) bool { return q.Name == name }); i >= 0 {
			s = list.Queues[i].QueueSettings
		}
		for _, change := range set {
			change(&s)
		}
		q, err := cl.SetQueue(c.Context(), name, s)
		if err != nil {
			return explain(err)
		}
		if cf.json() {
			return printIndented(c.OutOrStdout(), q)
		}
		return printQueues(c, q)
	}
	return c
}

// parseCap parses a cap: "none" or 0 is no cap (0), else parse's amount,
// which must not be negative; want says what is wanted.
func parseCap(s string, parse func(string) (int64, error), want string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "none" {
		return 0, nil
	}
	if strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("%q is negative; want %s (0 or none: no cap)", s, want)
	}
	v, err := parse(s)
	if err != nil {
		return 0, fmt.Errorf("%q: want %s (0 or none: no cap)", s, want)
	}
	return v, nil
}

// parseCount parses a whole number (parseCap refuses a negative one).
func parseCount(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }
