package fsm

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/sluicehq/sluice/api"
)

// skimSpec reads the encoding of one spec (spec_codec.go), s, as
// decodeInto would, but builds only what apply needs of it: the job's
// fields, its idempotency key, and for each task group a group with its
// name, count and demand (its pod's api.PodSpec.Demand), appended to
// groups (the rest of each group is apply's to set). It
// accepts exactly the encodings decodeInto accepts (FuzzSkim keeps the two
// in step), so a spec skimmed once always decodes later (job.specOf); for
// any other it returns ok false. Its strings are substrings of s.
//
// It is apply's reader, run for every job on every replica: it reads s by
// index with small functions, where decodeInto calls a method per field
// that moves a slice and checks a sticky error. (Most of those functions
// are calls, not inlined: with their slow paths they cost more than the
// inliner's budget, and moving the slow paths out of line cost more
// instructions than it saved.) It reads the current layout only (apply
// converts older specs first). The walk over the fields is generated
// (skimJobSpec and the skimmers it calls, in spec_bin_gen.go):
// it skips what apply does not need, and hands each field it takes (the
// -read list of the directive in spec_codec.go) to a skimmer method below.
func skimSpec(s string, groups []group) (f jobFields, idem string, _ []group, ok bool) {
	k := skimmer{groups: groups}
	i := skimJobSpec(s, 0, &k)
	if i != len(s) { // malformed (-1), or trailing bytes
		return jobFields{}, "", k.groups, false
	}
	if k.pool != "" || k.constraints != nil {
		k.f.rules = &nodeRules{pool: k.pool, constraints: k.constraints}
	}
	return k.f, k.idem, k.groups, true
}

// A skimmer is what skimSpec has taken of a spec so far. Its methods, one
// per field the skim takes, read the field at s[i:] and return the index
// after it, as the skim's primitives do.
type skimmer struct {
	f           jobFields
	idem        string
	pool        string
	constraints []api.Constraint
	groups      []group
	// The demand and ports of the pod being read (skimPodSpec).
	demand api.Capacity
	ports  []api.PortKey
}

func (k *skimmer) skimJobSpecQueue(s string, i int) int {
	k.f.queue, i = readStr(s, i)
	return i
}

func (k *skimmer) skimJobSpecPool(s string, i int) int {
	k.pool, i = readStr(s, i)
	return i
}

func (k *skimmer) skimJobSpecPriority(s string, i int) int {
	k.f.priority, i = readInt32(s, i)
	return i
}

func (k *skimmer) skimJobSpecQoS(s string, i int) int {
	var qos string
	qos, i = readStr(s, i)
	k.f.qos = internQoS(qos)
	return i
}

func (k *skimmer) skimJobSpecConstraints(s string, i int) int {
	n, i := readCount(s, i, 3)
	if n == 0 {
		return i
	}
	k.constraints = make([]api.Constraint, n)
	for j := range k.constraints {
		c := &k.constraints[j]
		var op string
		c.Key, i = readStr(s, i)
		op, i = readStr(s, i)
		c.Op = api.ConstraintOp(op)
		c.Values, i = readStrs(s, i)
	}
	return i
}

func (k *skimmer) skimJobSpecDistinctNodes(s string, i int) int {
	k.f.distinct, i = readBool(s, i)
	return i
}

func (k *skimmer) skimJobSpecRetryMaxAttempts(s string, i int) int {
	k.f.retry.MaxAttempts, i = readInt32(s, i)
	return i
}

func (k *skimmer) skimJobSpecRetryBackoff(s string, i int) int {
	var v int64
	v, i = readVarint(s, i)
	k.f.retry.Backoff = api.Duration(v)
	return i
}

func (k *skimmer) skimJobSpecRetryMaxBackoff(s string, i int) int {
	var v int64
	v, i = readVarint(s, i)
	k.f.retry.MaxBackoff = api.Duration(v)
	return i
}

func (k *skimmer) skimJobSpecIdempotencyKey(s string, i int) int {
	k.idem, i = readStr(s, i)
	return i
}

func (k *skimmer) skimJobSpecAppmaster(s string, i int) int {
	k.f.appmaster, i = readBool(s, i)
	return i
}

// skimJobSpecTasks appends a group for each task group and reads it into
// the group (skimTaskGroupSpec).
func (k *skimmer) skimJobSpecTasks(s string, i int) int {
	n, i := readCount(s, i, minTaskGroupSpecBytes)
	for range n {
		k.groups = append(k.groups, group{})
		i = skimTaskGroupSpec(s, i, k)
	}
	return i
}

func (k *skimmer) skimTaskGroupSpecName(s string, i int) int {
	g := &k.groups[len(k.groups)-1]
	g.name, i = readStr(s, i)
	return i
}

func (k *skimmer) skimTaskGroupSpecCount(s string, i int) int {
	g := &k.groups[len(k.groups)-1]
	g.count, i = readVarint(s, i)
	return i
}

// skimTaskGroupSpecPod sets the group's demand and ports from its pod.
func (k *skimmer) skimTaskGroupSpecPod(s string, i int) int {
	k.demand, k.ports = api.Capacity{}, nil
	i = skimPodSpec(s, i, k)
	g := &k.groups[len(k.groups)-1]
	g.demand = k.demand
	if k.ports != nil {
		g.setPorts(k.ports)
	}
	return i
}

func (k *skimmer) skimContainerSpecResourcesCPU(s string, i int) int {
	var v int64
	v, i = readVarint(s, i)
	k.demand.CPU += v
	return i
}

func (k *skimmer) skimContainerSpecResourcesMemory(s string, i int) int {
	var v int64
	v, i = readVarint(s, i)
	k.demand.Memory += v
	return i
}

func (k *skimmer) skimContainerSpecResourcesGPUs(s string, i int) int {
	var v int64
	v, i = readVarint(s, i)
	k.demand.GPUs += v
	return i
}

func (k *skimmer) skimContainerSpecResourcesDisk(s string, i int) int {
	var v int64
	v, i = readVarint(s, i)
	k.demand.Disk += v
	return i
}

// skimContainerSpecResourcesPorts adds each port to the pod's ports in
// order (podPorts), and each dynamic one to its demand.
func (k *skimmer) skimContainerSpecResourcesPorts(s string, i int) int {
	n, i := readCount(s, i, 3)
	for range n {
		i = skipStr(s, i) // name
		var p int32
		var proto string
		p, i = readInt32(s, i)
		proto, i = readStr(s, i)
		k.ports = append(k.ports, api.MakePortKey(p, proto))
		if p == 0 {
			k.demand.Ports++
		}
	}
	return i
}

// skimScratchVolumeSize adds a scratch volume's size to its pod's disk
// demand.
func (k *skimmer) skimScratchVolumeSize(s string, i int) int {
	var v int64
	v, i = readVarint(s, i)
	k.demand.Disk += v
	return i
}

// internQoS returns the api constant equal to q, or q: a job keeps no
// pointer into its command for a tier every job names.
func internQoS(q string) api.QoS {
	switch api.QoS(q) {
	case api.QoSOnline:
		return api.QoSOnline
	case api.QoSOffline:
		return api.QoSOffline
	}
	return api.QoS(q)
}

// specError says what is wrong with a spec's encoding that skimSpec
// rejected, as the full decoder finds it.
func specError(s string) error {
	sd := specDecoder{layout: specLayout}
	d := stringDec(s)
	sd.decodeInto(&d, new(api.JobSpec))
	if err := d.done("spec"); err != nil {
		return err
	}
	return fmt.Errorf("%w: spec (rejected by the skim, accepted by the decoder)", ErrCorrupt)
}

// The skim's primitives read at s[i:] and return what they read and the
// index after it. An index of -1 means the encoding is malformed: each
// primitive given -1 returns -1.

func readUvarint(s string, i int) (uint64, int) {
	if uint(i) < uint(len(s)) && s[i] < 0x80 {
		return uint64(s[i]), i + 1
	}
	return readUvarintSlow(s, i)
}

// readUvarintSlow reads a uvarint as binary.Uvarint does, rejecting the
// same truncations and overflows. An encoding of up to 8 bytes, away from
// the end of s, is read from one 8-byte word without a branch per byte.
func readUvarintSlow(s string, i int) (uint64, int) {
	if i >= 0 && len(s)-i >= 8 {
		w := s[i : i+8]
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		if ends := ^x & 0x8080808080808080; ends != 0 {
			n := bits.TrailingZeros64(ends)/8 + 1 // the bytes of the encoding
			x &= 0x7f7f7f7f7f7f7f7f >> (64 - 8*n)
			// Close the gaps between the 7-bit groups, pairwise.
			x = x&0x007f007f007f007f | (x&0x7f007f007f007f00)>>1
			x = x&0x00003fff00003fff | (x&0x3fff00003fff0000)>>2
			x = x&0x000000000fffffff | (x&0x0fffffff00000000)>>4
			return x, i + n
		}
	}
	return readUvarintBytes(s, i)
}

// readUvarintBytes is readUvarintSlow a byte at a time.
func readUvarintBytes(s string, i int) (uint64, int) {
	if i < 0 {
		return 0, -1
	}
	var v uint64
	var shift uint
	for k := range binary.MaxVarintLen64 {
		if i+k >= len(s) {
			return 0, -1
		}
		b := s[i+k]
		if b < 0x80 {
			if k == binary.MaxVarintLen64-1 && b > 1 {
				return 0, -1
			}
			return v | uint64(b)<<shift, i + k + 1
		}
		v |= uint64(b&0x7f) << shift
		shift += 7
	}
	return 0, -1
}

func readVarint(s string, i int) (int64, int) {
	if uint(i) < uint(len(s)) && s[i] < 0x80 {
		u := s[i]
		v := int64(u >> 1)
		if u&1 != 0 {
			v = ^v
		}
		return v, i + 1
	}
	return readVarintSlow(s, i)
}

func readVarintSlow(s string, i int) (int64, int) {
	u, i := readUvarintSlow(s, i)
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v, i
}

func readInt32(s string, i int) (int32, int) {
	v, i := readVarint(s, i)
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, -1
	}
	return int32(v), i
}

func readBool(s string, i int) (bool, int) {
	if uint(i) < uint(len(s)) && s[i] <= 1 {
		return s[i] == 1, i + 1
	}
	return false, -1
}

// readCount reads a count of items of at least min bytes each, as
// dec.count does.
func readCount(s string, i, min int) (int, int) {
	n, i := readUvarint(s, i)
	if i < 0 || n > uint64((len(s)-i)/min) {
		return 0, -1
	}
	return int(n), i
}

func readStr(s string, i int) (string, int) {
	n, i := readUvarint(s, i)
	if i < 0 || n > uint64(len(s)-i) {
		return "", -1
	}
	return s[i : i+int(n)], i + int(n)
}

func skipStr(s string, i int) int {
	n, i := readUvarint(s, i)
	if i < 0 || n > uint64(len(s)-i) {
		return -1
	}
	return i + int(n)
}

func skipStrs(s string, i int) int {
	n, i := readCount(s, i, 1)
	for range n {
		i = skipStr(s, i)
	}
	return i
}

// readStrs reads a list of strings as decodeStrs does (nil when empty).
func readStrs(s string, i int) ([]string, int) {
	n, i := readCount(s, i, 1)
	if n == 0 {
		return nil, i
	}
	vs := make([]string, n)
	for k := range vs {
		vs[k], i = readStr(s, i)
	}
	return vs, i
}

// skipStrMap reads a map as strMap does, checking its keys' order.
func skipStrMap(s string, i int) int {
	n, i := readCount(s, i, 2)
	var prev string
	for k := range n {
		var key string
		key, i = readStr(s, i)
		if i < 0 || k > 0 && key <= prev {
			return -1
		}
		i = skipStr(s, i)
		prev = key
	}
	return i
}
