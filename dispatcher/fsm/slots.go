package fsm

import (
	"cmp"
	"container/heap"
	"encoding/binary"
	"slices"
	"strconv"

	"github.com/sluicehq/sluice/api"
)

// cacheSlotLocked keeps the resources of a task of class q and demand d
// that ended on node n as a cached slot, when the command caches slots and
// the node is ready.
func (f *FSM) cacheSlotLocked(w writer, n *node, q api.QoS, d api.Capacity, now int64) {
	if f.slotTTL == 0 || n.state != api.NodeReady {
		return
	}
	s := &slot{id: "s" + strconv.FormatUint(f.mu.nextSlot, 10), node: n, qos: q, shape: d, expires: now + f.slotTTL}
	f.mu.nextSlot++
	w.Set(keySlotSeq, binary.BigEndian.AppendUint64(nil, f.mu.nextSlot))
	f.addSlotLocked(s)
	f.vbuf = encodeSlot(f.vbuf, s)
	w.Set(slotKey(n.spec.Name, s.id), f.vbuf)
}

// addSlotLocked puts s on its node (kept by expiry, then ID) and in the
// expiry heap.
func (f *FSM) addSlotLocked(s *slot) {
	n := s.node
	i, _ := slices.BinarySearchFunc(n.slots, s, func(a, b *slot) int {
		return cmp.Or(cmp.Compare(a.expires, b.expires), cmp.Compare(a.id, b.id))
	})
	n.slots = slices.Insert(n.slots, i, s)
	n.cached.AddTier(s.qos, s.shape, 1)
	f.inputChangedLocked(n)
	heap.Push(&f.mu.slots, s)
}

// removeSlotLocked drops a slot (consumed, expired, or its node down): its
// resources leave the node's cache. It stays in the expiry heap, marked
// gone, until it comes due.
func (f *FSM) removeSlotLocked(w writer, s *slot) {
	n := s.node
	n.slots = slices.DeleteFunc(n.slots, func(x *slot) bool { return x == s })
	n.cached.AddTier(s.qos, s.shape, -1)
	f.inputChangedLocked(n)
	w.Delete(slotKey(n.spec.Name, s.id))
	s.node = nil
}

// expireSlotsLocked drops the slots whose TTL ended by now.
func (f *FSM) expireSlotsLocked(w writer, now int64) {
	for len(f.mu.slots) > 0 && f.mu.slots[0].expires <= now {
		s := heap.Pop(&f.mu.slots).(*slot)
		if s.node != nil {
			f.removeSlotLocked(w, s)
		}
	}
}
