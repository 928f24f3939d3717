package raftkv_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/sluicehq/sluice/internal/seedtest"
	"github.com/sluicehq/sluice/raftkv"
)

// The register model: one value per key ("" = absent); puts, linearizable
// gets (on any replica) and compare-and-swaps. An operation whose outcome is
// unknown (timeout, replica stopped) may have taken effect at any time after
// its call, so it returns at +∞ and a CAS of unknown outcome may or may not
// have happened.
type regInput struct {
	op         byte // 'g', 'p', 'c'
	key        string
	value, old string
}

type regOutput struct {
	value   string // get
	ok      bool   // cas succeeded
	unknown bool
}

var registerModel = (&porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range h {
			k := op.Input.(regInput).key
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, ops := range byKey {
			out = append(out, ops)
		}
		return out
	},
	Init: func() []any { return []any{""} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(string), input.(regInput), output.(regOutput)
		switch in.op {
		case 'g':
			if out.value == s {
				return []any{s}
			}
			return nil
		case 'p':
			return []any{in.value}
		default: // cas
			switch {
			case out.unknown && s == in.old:
				return []any{s, in.value}
			case out.unknown:
				return []any{s}
			case out.ok && s == in.old:
				return []any{in.value}
			case !out.ok && s != in.old:
				return []any{s}
			}
			return nil
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		switch in.op {
		case 'g':
			return fmt.Sprintf("get(%s) → %q", in.key, out.value)
		case 'p':
			return fmt.Sprintf("put(%s, %s) unknown=%v", in.key, in.value, out.unknown)
		}
		return fmt.Sprintf("cas(%s, %q→%s) ok=%v unknown=%v", in.key, in.old, in.value, out.ok, out.unknown)
	},
}).ToModel()

func TestLinearizability(t *testing.T) {
	r := seedtest.Rand(t)
	c := newCluster(t, 3)
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		stop    atomic.Bool
		wg      sync.WaitGroup
		unique  atomic.Int64
	)
	record := func(client int, in regInput, out regOutput, call, ret int64) {
		mu.Lock()
		defer mu.Unlock()
		history = append(history, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
	}
	definitelyNot := func(err error) bool {
		return errors.Is(err, raftkv.ErrNotLeader) || errors.Is(err, raftkv.ErrProposalDropped)
	}
	keys := []string{"x", "y", "z"}
	for client := range 6 {
		seed := r.Uint64()
		wg.Add(1)
		go func() {
			defer wg.Done()
			cr := newRand(seed)
			last := map[string]string{}
			for !stop.Load() {
				key := keys[cr.IntN(len(keys))]
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				switch p := cr.IntN(100); {
				case p < 50:
					nodes := c.running()
					if len(nodes) == 0 {
						break
					}
					n := nodes[cr.IntN(len(nodes))]
					call := now()
					v, err := n.LinearizableGet(ctx, []byte(key))
					ret := now()
					if errors.Is(err, raftkv.ErrNotFound) {
						v, err = nil, nil
					}
					if err == nil {
						last[key] = string(v)
						record(client, regInput{op: 'g', key: key}, regOutput{value: string(v)}, call, ret)
					}
				default:
					l := c.leaderAmong()
					if l == nil {
						time.Sleep(2 * time.Millisecond)
						break
					}
					in := regInput{op: 'p', key: key, value: fmt.Sprintf("v%d", unique.Add(1))}
					cmd := raftkv.PutCommand([]byte(key), []byte(in.value))
					if p >= 85 {
						in.op, in.old = 'c', last[key]
						var old []byte
						if in.old != "" {
							old = []byte(in.old)
						}
						cmd = raftkv.CASCommand([]byte(key), old, []byte(in.value))
					}
					call := now()
					_, err := l.Propose(ctx, cmd)
					ret := now()
					switch {
					case err == nil:
						record(client, in, regOutput{ok: true}, call, ret)
					case in.op == 'c' && errors.Is(err, raftkv.ErrCASMismatch):
						record(client, in, regOutput{ok: false}, call, ret)
					case definitelyNot(err):
					default:
						record(client, in, regOutput{unknown: true}, call, math.MaxInt64)
					}
				}
				cancel()
			}
		}()
	}

	// Faults: kill and restart the leader, isolate a replica, heal.
	pause := func() { time.Sleep(time.Duration(150+r.IntN(250)) * time.Millisecond) }
	for range 2 {
		pause()
		if l := c.leaderAmong(); l != nil {
			id := l.Status().ID
			c.stop(id)
			pause()
			c.start(id)
		}
		pause()
		victim := uint64(1 + r.IntN(3))
		others := []uint64{}
		for id := uint64(1); id <= 3; id++ {
			if id != victim {
				others = append(others, id)
			}
		}
		c.net.partition([]uint64{victim}, others)
		pause()
		c.net.heal()
	}
	pause()
	stop.Store(true)
	wg.Wait()

	res, info := porcupine.CheckOperationsVerbose(registerModel, history, 60*time.Second)
	t.Logf("%d operations, result %v", len(history), res)
	if len(history) < 100 {
		t.Fatalf("only %d operations completed", len(history))
	}
	switch res {
	case porcupine.Illegal:
		path := filepath.Join(os.TempDir(), fmt.Sprintf("raftkv-linearizability-%d.html", time.Now().UnixNano()))
		if err := porcupine.VisualizePath(registerModel, info, path); err == nil {
			t.Logf("visualization: %s", path)
		}
		t.Fatal("the history is not linearizable")
	case porcupine.Unknown:
		t.Log("the checker timed out")
	}
}
