package raftkv_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/sluicehq/sluice/raftkv"
)

// countingSM is the KV state machine plus one command that counts how many
// times a write ID was applied (in the replicated state, so a double apply
// across restarts shows), and one that writes and then fails. It also
// counts every count command applied in memory, and stores that total only
// when the replica stores its state (raftkv.Deferrer), so that a total
// lost or counted twice across a crash shows against the sum of the
// counts.
type countingSM struct {
	kv    raftkv.KV
	total int
}

var totalKey = []byte("count-total")

func (s *countingSM) WriteDeferred(b *raftkv.Batch) {
	b.Set(totalKey, strconv.AppendInt(nil, int64(s.total), 10))
}

func (s *countingSM) Load(r raftkv.Reader) error {
	s.total = 0
	v, err := r.Get(totalKey)
	if errors.Is(err, raftkv.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	s.total, err = strconv.Atoi(string(v))
	return err
}

const (
	opCount    = 0x10 // <id:8>: count[id]++
	opWriteBad = 0x11 // <key>: writes key, then returns an error
)

func countCommand(id uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{opCount}, id)
}

func countKey(id uint64) []byte { return fmt.Appendf(nil, "count/%016x", id) }

var errWriteBad = errors.New("write-bad: rejected after writing")

func (s *countingSM) Apply(b *raftkv.Batch, index uint64, cmd []byte) ([]byte, error) {
	if len(cmd) > 0 {
		switch cmd[0] {
		case opCount:
			if len(cmd) != 9 {
				return nil, raftkv.ErrBadCommand
			}
			k := countKey(binary.BigEndian.Uint64(cmd[1:]))
			n := 0
			v, err := b.Get(k)
			switch {
			case err == nil:
				if n, err = strconv.Atoi(string(v)); err != nil {
					return nil, err
				}
			case !errors.Is(err, raftkv.ErrNotFound):
				return nil, err
			}
			b.Set(k, strconv.AppendInt(nil, int64(n+1), 10))
			s.total++
			return strconv.AppendUint(nil, index, 10), nil
		case opWriteBad:
			b.Set(cmd[1:], []byte("half"))
			b.Set(append(cmd[1:len(cmd):len(cmd)], '2'), []byte("half"))
			return nil, errWriteBad
		}
	}
	return s.kv.Apply(b, index, cmd)
}

// counts reads every count key of a replica.
func counts(n *raftkv.Node) (map[uint64]int, error) {
	out := map[uint64]int{}
	err := n.Scan([]byte("count/"), []byte("count0"), func(k, v []byte) error {
		id, err := strconv.ParseUint(string(k[len("count/"):]), 16, 64)
		if err != nil {
			return err
		}
		c, err := strconv.Atoi(string(v))
		if err != nil {
			return err
		}
		out[id] = c
		return nil
	})
	return out, err
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7919 + i>>3*31 + i>>11)
	}
	return b
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x5eed)) }
