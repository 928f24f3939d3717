package fsm

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/placement"
)

// skimSpec reads the encoding of one spec (spec_codec.go), s, as
// decodeInto would, but builds only what apply needs of it: the job's
// fields, its idempotency key, and for each task group a group with its
// name, count and demand (the placement.Demand of its pod), appended to
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
// instructions than it saved.)
func skimSpec(s string, groups []group) (f jobFields, idem string, _ []group, ok bool) {
	i := 0
	i = skipStr(s, i) // name
	f.queue, i = readStr(s, i)
	var pool string
	pool, i = readStr(s, i)
	f.priority, i = readInt32(s, i)
	var qos string
	qos, i = readStr(s, i)
	f.qos = internQoS(qos)
	i = skipStrMap(s, i) // labels
	var (
		n           int
		constraints []api.Constraint
	)
	if n, i = readCount(s, i, 3); n > 0 {
		constraints = make([]api.Constraint, n)
		for k := range constraints {
			c := &constraints[k]
			var op string
			c.Key, i = readStr(s, i)
			op, i = readStr(s, i)
			c.Op = api.ConstraintOp(op)
			c.Values, i = readStrs(s, i)
		}
	}
	if pool != "" || constraints != nil {
		f.rules = &nodeRules{pool: pool, constraints: constraints}
	}
	f.distinct, i = readBool(s, i)
	var policy bool
	if policy, i = readBool(s, i); policy {
		i = skipPolicy(s, i)
	}
	f.retry.MaxAttempts, i = readInt32(s, i)
	var v int64
	v, i = readVarint(s, i)
	f.retry.Backoff = api.Duration(v)
	v, i = readVarint(s, i)
	f.retry.MaxBackoff = api.Duration(v)
	_, i = readVarint(s, i) // max run time
	idem, i = readStr(s, i)
	f.appmaster, i = readBool(s, i)
	n, i = readCount(s, i, minTaskGroupSpecBytes)
	for range n {
		groups = append(groups, group{})
		g := &groups[len(groups)-1]
		g.name, i = readStr(s, i)
		g.count, i = readVarint(s, i)
		i = skipStrs(s, i) // preferred nodes
		var ports []placement.PortKey
		g.demand, ports, i = skimPod(s, i)
		if ports != nil {
			g.setPorts(ports)
		}
	}
	if i != len(s) { // malformed (-1), or trailing bytes
		return jobFields{}, "", groups, false
	}
	return f, idem, groups, true
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
	var sd specDecoder
	d := stringDec(s)
	sd.decodeInto(&d, new(api.JobSpec))
	if err := d.done("spec"); err != nil {
		return err
	}
	return fmt.Errorf("%w: spec (rejected by the skim, accepted by the decoder)", ErrCorrupt)
}

// skimPod reads a task group's pod at s[i:] and returns its demand and
// its ports in order (nil for none: podPorts).
func skimPod(s string, i int) (api.Capacity, []placement.PortKey, int) {
	var c api.Capacity
	var all []placement.PortKey
	n, i := readCount(s, i, minContainerSpecBytes)
	for range n {
		for range 4 { // name, image rootfs, OCI layout, ref
			i = skipStr(s, i)
		}
		i = skipStrs(s, i) // command
		i = skipStrs(s, i) // args
		i = skipStrMap(s, i)
		i = skipStr(s, i) // working dir
		var v int64
		v, i = readVarint(s, i)
		c.CPU += v
		v, i = readVarint(s, i)
		c.Memory += v
		v, i = readVarint(s, i)
		c.GPUs += v
		v, i = readVarint(s, i)
		c.Disk += v
		var ports int
		ports, i = readCount(s, i, 3)
		for range ports {
			i = skipStr(s, i)
			var p int32
			var proto string
			p, i = readInt32(s, i)
			proto, i = readStr(s, i)
			all = append(all, placement.MakePortKey(p, proto))
			if p == 0 {
				c.Ports++
			}
		}
	}
	if uint(i) >= uint(len(s)) || s[i]&^(podSharePID|podStorage) != 0 {
		return c, nil, -1
	}
	storage := s[i]&podStorage != 0
	i++
	if storage {
		var disk int64
		disk, i = skimStorage(s, i, n)
		c.Disk += disk
	}
	if uint(i) >= uint(len(s)) || !validSimFlags(s[i]) {
		return c, nil, -1
	}
	sim := s[i]
	i++
	if sim&simSet != 0 {
		i = skipSimSpec(s, i)
	}
	if sim&simUsage != 0 {
		i = skipSimUsage(s, i)
	}
	if sim&simPeak != 0 {
		i = skipSimPeak(s, i)
	}
	return c, all, i
}

// skimStorage reads a pod's storage (appendPodStorage) at s[i:], for a pod
// of containers containers, and returns its scratch volumes' sizes.
func skimStorage(s string, i, containers int) (int64, int) {
	var mode string
	mode, i = readStr(s, i)
	empty := mode == ""
	var disk int64
	n, i := readCount(s, i, 2)
	empty = empty && n == 0
	for range n {
		i = skipStr(s, i) // name
		if uint(i) >= uint(len(s)) {
			return 0, -1
		}
		kinds := s[i]
		i++
		if kinds&^(volumeScratch|volumeHostPath) != 0 {
			return 0, -1
		}
		if kinds&volumeScratch != 0 {
			var v int64
			v, i = readVarint(s, i)
			disk += v
		}
		if kinds&volumeHostPath != 0 {
			i = skipHostPathVolume(s, i)
		}
	}
	for range containers {
		n, i = readCount(s, i, minMountBytes)
		empty = empty && n == 0
		for range n {
			i = skipMount(s, i)
		}
	}
	if empty {
		return 0, -1
	}
	return disk, i
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
