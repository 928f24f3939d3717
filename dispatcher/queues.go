package dispatcher

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/fsm"
)

// SetQueue proposes a queue's settings (fsm.SetQueue: caps and weight,
// replacing the ones it had) and returns once they are committed; the
// next round keeps the queue under its caps. Bad settings are an error
// before anything is proposed; errors of the raft replica are returned
// unchanged.
func (d *Dispatcher) SetQueue(ctx context.Context, name string, s api.QueueSettings) error {
	if err := d.checkOpen(); err != nil {
		return err
	}
	cmd, err := fsm.SetQueue(d.cfg.Clock.Now(), name, s)
	if err != nil {
		return fmt.Errorf("dispatcher: %w", err)
	}
	if _, err := d.propose(ctx, cmd); err != nil {
		return err
	}
	d.kick()
	return nil
}

// Queues lists the queues with settings, active or pending tasks, or a
// configured weight, by name, each with the weight rounds give it.
func (d *Dispatcher) Queues() []api.QueueStatus {
	qs := d.cfg.FSM.Queues()
	seen := make(map[string]bool, len(qs))
	for i := range qs {
		seen[qs[i].Name] = true
	}
	for name := range d.cfg.QueueWeights {
		if !seen[name] {
			qs = append(qs, api.QueueStatus{Name: name})
		}
	}
	for i := range qs {
		q := &qs[i]
		q.EffectiveWeight = q.Weight
		if q.EffectiveWeight == 0 {
			q.EffectiveWeight = d.cfg.QueueWeights[q.Name]
		}
		if q.EffectiveWeight == 0 {
			q.EffectiveWeight = 1
		}
	}
	slices.SortFunc(qs, func(a, b api.QueueStatus) int { return strings.Compare(a.Name, b.Name) })
	return qs
}
