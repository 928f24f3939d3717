package raftkv_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/raftkv"
)

// slowKV is the KV state machine whose commands take delay each to apply
// while delay is set.
type slowKV struct {
	raftkv.KV
	delay *atomic.Int64
}

func (s slowKV) Apply(b *raftkv.Batch, index uint64, cmd []byte) ([]byte, error) {
	if d := time.Duration(s.delay.Load()); d > 0 {
		time.Sleep(d)
	}
	return s.KV.Apply(b, index, cmd)
}

// TestSlowApplyKeepsLeader commits a backlog that takes the followers two
// seconds to apply, ten election timeouts, in one go over TCP. The leader
// keeps its term throughout: the followers apply a tick's worth at a time
// and answer its heartbeats and appends between (applied all at once, the
// backlog kept their loops from raft, and the leader, hearing from no
// quorum, stepped down), and every command is applied everywhere.
func TestSlowApplyKeepsLeader(t *testing.T) {
	const (
		commands = 400
		perApply = 5 * time.Millisecond
	)
	delays := map[uint64]*atomic.Int64{1: {}, 2: {}, 3: {}}
	c := newCluster(t, 3, withTransports(tcpTransports()), withConfig(func(cfg *raftkv.Config) {
		cfg.TickInterval = 20 * time.Millisecond // elections after 200 ms
		cfg.MaxCommandsPerEntry = 1              // a command an entry: applyPending's unit
		cfg.StateMachine = slowKV{delay: delays[cfg.ID]}
	}))
	ctx := ctxTimeout(t, time.Minute)
	l := c.waitLeader(5 * time.Second)
	leader := l.Status()
	for id, d := range delays {
		if id != leader.ID {
			d.Store(int64(perApply))
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, commands)
	for i := range commands {
		wg.Go(func() {
			if _, err := l.Propose(ctx, raftkv.PutCommand(fmt.Appendf(nil, "k%03d", i), []byte("v"))); err != nil {
				errs <- fmt.Errorf("put %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c.waitApplied(30*time.Second, l.Status().Applied)
	for _, n := range c.running() {
		st := n.Status()
		if st.Leader != leader.ID || st.Term != leader.Term {
			t.Errorf("replica %d: leader %d in term %d after the backlog, want %d in term %d", st.ID, st.Leader, st.Term, leader.ID, leader.Term)
		}
	}
}
