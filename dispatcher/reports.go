package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/batcher"
	"github.com/sluicehq/sluice/dispatcher/fsm"
)

// reportReq is one Report call waiting for its batch's commit. Its
// reports are the caller's: commitReports points at them, and reads them
// until done receives.
type reportReq struct {
	node    string
	reports []api.TaskReport
	done    chan error // buffered, receives once
}

// Report records a contact of node and delivers its task
// reports, oldest first. Reports of many nodes arriving within ReportWait
// ride in one UpdateTasks command; it returns once that command is
// committed. A repeated report is a no-op for the FSM, so a retry after an
// error is safe. Only the leader serves it: elsewhere it returns a
// *raftkv.NotLeaderError. If the FSM rejects a report (an illegal
// transition or an unknown task), that report is dropped, logged
// and counted (DroppedReports), and the rest are committed: a node's
// resent outbox must not wedge on one report. The reports are read until
// their command is proposed, which may be after Report returned for ctx or
// closing: the caller must not change them.
func (d *Dispatcher) Report(ctx context.Context, node string, reports []api.TaskReport) error {
	if err := d.checkOpen(); err != nil {
		return err
	}
	if _, ok := d.Leading(); !ok {
		return d.notLeader()
	}
	d.touch(node)
	if len(reports) == 0 {
		return nil
	}
	req := &reportReq{node: node, reports: reports, done: make(chan error, 1)}
	if err := d.reports.Add(batcher.Item[*reportReq]{Value: req}); err != nil {
		return ErrClosed
	}
	select {
	case err := <-req.done:
		if err != nil {
			return err
		}
		d.kick() // ended tasks freed capacity; failures may be requeued
		return nil
	case <-ctx.Done():
		return fmt.Errorf("dispatcher: report of %q: %w", node, ctx.Err())
	case <-d.closing:
		return ErrClosed
	}
}

// reportCommits is how many UpdateTasks commands may be in flight at
// once. A node sends its next reports only once its last are committed, so
// no node's reports are in two commands in flight together and order needs
// no more care; commands in flight together share raft's appends and
// fsyncs.
const reportCommits = 4

// newReportBatcher returns the batcher that forms the report rounds: a
// Report call is an item; a round closes when MaxReports calls wait, or
// the oldest has waited ReportWait.
func newReportBatcher(cfg Config) (*batcher.Batcher[*reportReq], error) {
	return batcher.New[*reportReq](batcher.Config{
		MaxItems: cfg.MaxReports,
		MaxWait:  max(cfg.ReportWait, time.Nanosecond),
		Clock:    cfg.Clock,
	})
}

// flushReports commits the report rounds the batcher forms, up to
// reportCommits at a time.
func (d *Dispatcher) flushReports() {
	defer d.wg.Done()
	ctx := d.ctx
	slots := make(chan struct{}, reportCommits)
	var inFlight sync.WaitGroup
	defer inFlight.Wait()
	for {
		select {
		case slots <- struct{}{}:
		case <-d.closing:
			return
		}
		round, err := d.reports.Next(ctx)
		if err != nil {
			return // closing
		}
		inFlight.Go(func() {
			defer func() { <-slots }()
			d.commitReports(ctx, round.Items)
		})
	}
}

// failReports fails the Report calls left when the Dispatcher closes.
func (d *Dispatcher) failReports() {
	for _, it := range d.reports.Close() {
		it.Value.done <- ErrClosed
	}
}

// commitReports proposes the reports of a round's calls, in order, as
// UpdateTasks commands of at most MaxReports reports each, one after the
// other, and answers each call with the error of its last command.
func (d *Dispatcher) commitReports(ctx context.Context, items []batcher.Item[*reportReq]) {
	for len(items) > 0 {
		n, i := 0, 0
		for ; i < len(items); i++ {
			if i > 0 && n+len(items[i].Value.reports) > d.cfg.MaxReports {
				break
			}
			n += len(items[i].Value.reports)
		}
		d.commitReportsOnce(ctx, items[:i], n)
		items = items[i:]
	}
}

func (d *Dispatcher) commitReportsOnce(ctx context.Context, items []batcher.Item[*reportReq], n int) {
	all := make([]fsm.Report, 0, n)
	for _, it := range items {
		r := it.Value
		for i := range r.reports {
			all = append(all, fsm.Report{Node: r.node, TaskReport: &r.reports[i]})
		}
	}
	var err error
	for len(all) > 0 {
		_, err = d.propose(ctx, fsm.UpdateTasksCaching(d.cfg.Clock.Now(), all, d.cfg.SlotTTL))
		var re *fsm.ReportError
		if !errors.As(err, &re) || re.Index < 0 || re.Index >= len(all) {
			break
		}
		// One report the FSM cannot apply rejects the command whole. Nodes
		// resend reports until acknowledged, so such a report is mostly an
		// out-of-date repeat ("running" resent after "succeeded" committed
		// but its ack was lost); it would wedge the node's outbox forever.
		// Drop it, count it, and commit the rest.
		d.cfg.Logger.Warn("dispatcher: dropping a task report the FSM refuses",
			"node", all[re.Index].Node, "task", re.TaskID, "err", re.Err)
		d.mu.Lock()
		d.mu.droppedReports++
		d.mu.Unlock()
		all = append(all[:re.Index], all[re.Index+1:]...)
		err = nil
	}
	for _, it := range items {
		it.Value.done <- err
	}
}

// DroppedReports counts the task reports the FSM refused (unknown tasks,
// illegal transitions); they are acknowledged to
// their nodes and logged.
func (d *Dispatcher) DroppedReports() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.droppedReports
}

// Heartbeat records node's usage and a contact of the node: like a report,
// it keeps the node alive past its TTL. The usage is ephemeral: the leader
// keeps the latest per node in memory, with the time it arrived, and
// NodeUsage reads it back; nothing is proposed to raft, and a new leader
// knows no usage until the node's next heartbeat. Only the leader serves
// it: elsewhere it returns a *raftkv.NotLeaderError. A node that is not
// registered gets ErrUnknownNode; invalid usage (a negative value) an
// error wrapping *api.ValidationError, and nothing is recorded then.
func (d *Dispatcher) Heartbeat(ctx context.Context, node string, usage api.NodeUsage) error {
	if err := d.checkOpen(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("dispatcher: heartbeat of %q: %w", node, err)
	}
	if _, ok := d.Leading(); !ok {
		return d.notLeader()
	}
	if _, ok := d.cfg.FSM.NodeGeneration(node); !ok {
		return fmt.Errorf("dispatcher: heartbeat of %q: %w", node, ErrUnknownNode)
	}
	if err := usage.Validate(); err != nil {
		return fmt.Errorf("dispatcher: heartbeat of %q: usage: %w", node, err)
	}
	ids := make([]string, len(usage.Tasks))
	for i, t := range usage.Tasks {
		ids[i] = t.TaskID
	}
	demands := d.cfg.FSM.TaskDemands(ids)
	now := d.cfg.Clock.Now()
	d.mu.Lock()
	leading := d.mu.leading
	if leading {
		b := d.touchLocked(node, now)
		if b.usageTerm != d.mu.term {
			d.mu.usageBeats++
		}
		b.usage, b.usageAt, b.usageTerm = usage, now, d.mu.term
		d.estimateLocked(b, usage.Tasks, demands, now)
	}
	d.mu.Unlock()
	if !leading { // leadership ended since the check above
		return d.notLeader()
	}
	return nil
}

// NodeUsage returns the usage of node's last heartbeat and when it arrived.
// ok is false unless the replica leads and received a heartbeat with usage
// from the node in its current term: followers know no usage.
func (d *Dispatcher) NodeUsage(node string) (usage api.NodeUsage, at time.Time, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := d.mu.beats[node]
	if !d.mu.leading || b == nil || b.usageAt.IsZero() || b.usageTerm != d.mu.term {
		return api.NodeUsage{}, time.Time{}, false
	}
	return b.usage, b.usageAt, true
}
