package dispatcher

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/fsm"
)

// DrainNode proposes that node be drained (fsm.DrainNode): it takes no new
// task, and its active tasks are stopped and requeued at the request's
// deadline, which the leader enforces by its clock at its liveness checks
// (Config.LivenessEvery). A Timeout counts from now on this replica's
// clock. An unknown node is an error matching fsm.ErrNotFound.
func (d *Dispatcher) DrainNode(ctx context.Context, node string, req api.DrainRequest) (fsm.DrainResult, error) {
	now := d.cfg.Clock.Now()
	deadline := req.Deadline
	if req.Timeout != 0 {
		deadline = now.Add(time.Duration(req.Timeout))
	}
	r, err := d.proposeDrain(ctx, "drain "+node, fsm.DrainNode(now, node, deadline))
	if err != nil {
		return r, err
	}
	d.cfg.Logger.Info("dispatcher: node drained", "node", node, "deadline", deadline, "tasks", r.Tasks, "stopped", r.Stopped)
	if r.Requeued > 0 {
		d.kick()
	}
	return r, nil
}

// UndrainNode proposes that node's drain end (fsm.UndrainNode): it takes
// new tasks again unless it is down.
func (d *Dispatcher) UndrainNode(ctx context.Context, node string) (fsm.DrainResult, error) {
	r, err := d.proposeDrain(ctx, "undrain "+node, fsm.UndrainNode(d.cfg.Clock.Now(), node))
	if err != nil {
		return r, err
	}
	d.cfg.Logger.Info("dispatcher: node undrained", "node", node, "state", r.State)
	d.kick()
	return r, nil
}

// proposeDrain proposes cmd, a drain or undrain command, and decodes its
// result; op names it in an error.
func (d *Dispatcher) proposeDrain(ctx context.Context, op string, cmd []byte) (fsm.DrainResult, error) {
	if err := d.checkOpen(); err != nil {
		return fsm.DrainResult{}, err
	}
	res, err := d.propose(ctx, cmd)
	if err != nil {
		return fsm.DrainResult{}, err
	}
	r, err := fsm.DecodeDrainResult(res)
	if err != nil {
		return r, fmt.Errorf("dispatcher: %s: %w", op, err)
	}
	return r, nil
}

// RemoveNode proposes that node be forgotten (fsm.RemoveNode): refused
// with an error matching fsm.ErrNodeBusy unless it is drained or down with
// no active task. The leader forgets its heartbeats too; a later
// registration of the name is a new node.
func (d *Dispatcher) RemoveNode(ctx context.Context, node string) error {
	if err := d.checkOpen(); err != nil {
		return err
	}
	if _, err := d.propose(ctx, fsm.RemoveNode(d.cfg.Clock.Now(), node)); err != nil {
		return err
	}
	d.mu.Lock()
	delete(d.mu.beats, node)
	d.mu.Unlock()
	d.cfg.Logger.Info("dispatcher: node removed", "node", node)
	return nil
}

// endDrains proposes EndDrain for each node of nodes that is not down,
// has active tasks, and whose drain deadline passed by now.
func (d *Dispatcher) endDrains(ctx context.Context, nodes []fsm.NodeState, now time.Time) {
	for _, n := range nodes {
		if n.DrainDeadline.IsZero() || now.Before(n.DrainDeadline) || n.Tasks == 0 || n.State == api.NodeDown {
			continue
		}
		res, err := d.propose(ctx, fsm.EndDrain(now, n.Name))
		if err != nil {
			if ctx.Err() == nil {
				d.cfg.Logger.Warn("dispatcher: end drain", "node", n.Name, "err", err)
			}
			return
		}
		r, _ := fsm.DecodeDrainResult(res)
		d.cfg.Logger.Info("dispatcher: drain deadline passed", "node", n.Name, "deadline", n.DrainDeadline,
			"stopped", r.Stopped, "requeued", r.Requeued)
		if r.Requeued > 0 {
			d.kick()
		}
	}
}
