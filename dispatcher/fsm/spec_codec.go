package fsm

import (
	"fmt"
	"math"
	"slices"

	"github.com/klauspost/compress/s2"

	"github.com/sluicehq/sluice/api"
)

// The binary encoding of an api.JobSpec, in submit commands and job
// records. Fields are written in the order api declares them, with no tags;
// the codec is generated from api's types (spec_bin_gen.go, by the
// directive below), except a pod's (appendPodSpec, decodePodSpec), whose
// flags bytes keep the specs of older formats readable. A field added to
// api changes the encoding when go generate runs (TestGeneratedCodecsCurrent
// fails until it has run; TestSpecCodecEveryField until the field
// survives the round trip): the generated codec writes it where its type
// declares it, where the commands and records of the release before hold
// the next field. Those must still decode (TestPortsReadsTheReleaseBefore
// replays them), so a new field of a pod, or of a type a pod holds (then
// in the directive's -skip list, so that the generated code leaves it
// out), is written by hand behind a new bit of the pod's flags byte, which
// the release before leaves clear: in appendPodSpec, decodePodSpec,
// skimPod and their checks of the byte, as the storage bit carries the
// containers' mounts (-skip ContainerSpec.Mounts). A new field elsewhere
// needs the commands' and records' versions bumped, with a reader of the
// old layout.
//
//	string          uvarint length, bytes (typed strings too: QoS, ConstraintOp)
//	int32, int64    zig-zag varint; api.Duration as int64 nanoseconds
//	bool            byte 0 or 1
//	*T              byte 0 (nil) or 1, then T
//	[]T             uvarint count, then each T; count 0 decodes as nil
//	map[string]string  uvarint count, then key, value pairs in strictly
//	                increasing key order; count 0 decodes as nil
//
// Nil and empty slices and maps encode alike and decode as nil, which is
// what encoding/json with api's omitempty tags and api.DecodeJobs produced
// before. The decoder accepts only what the encoder writes (bools 0 or 1,
// sorted map keys, int32 fields in range), so an encoding is canonical, and
// it returns an error wrapping ErrCorrupt for anything else; it never
// panics and allocates at most in proportion to its input.

//go:generate go run github.com/sluicehq/sluice/internal/codecgen/cmd/codecgen -binary -schema ../../api -import github.com/sluicehq/sluice/api -type JobSpec,TaskGroupSpec,ContainerSpec,Mount,ScratchVolume,HostPathVolume,SimSpec,SimUsage,SimPeak -hook PodSpec=3 -skip ContainerSpec.Mounts,SimSpec.Usage,SimUsage.Peak -skim Mount,HostPathVolume,SimSpec,SimUsage,SimPeak -skimmer JobSpec,TaskGroupSpec,ContainerSpec -read JobSpec.Queue,JobSpec.Pool,JobSpec.Priority,JobSpec.QoS,JobSpec.Constraints,JobSpec.DistinctNodes,JobSpec.Retry.MaxAttempts,JobSpec.Retry.Backoff,JobSpec.Retry.MaxBackoff,JobSpec.IdempotencyKey,JobSpec.Appmaster,JobSpec.Tasks,TaskGroupSpec.Name,TaskGroupSpec.Count,TaskGroupSpec.Pod,ContainerSpec.Resources.CPU,ContainerSpec.Resources.Memory,ContainerSpec.Resources.GPUs,ContainerSpec.Resources.Disk,ContainerSpec.Resources.Ports -o spec_bin_gen.go

// appendSpec appends the encoding of s.
func appendSpec(e *enc, s *api.JobSpec) { appendJobSpec(e, s) }

// appendPodSpec appends a pod: its containers (without their mounts), its
// flags byte and storage (appendPodStorage), and its sim byte (appendSim).
func appendPodSpec(e *enc, p *api.PodSpec) {
	e.uvarint(uint64(len(p.Containers)))
	for k := range p.Containers {
		appendContainerSpec(e, &p.Containers[k])
	}
	appendPodStorage(e, p)
	appendSim(e, p.Sim)
}

// A pod's sim byte, where a spec written before simulated pods had usage
// held the bool "Sim is set": such a spec decodes as it did, and a pod
// without usage still encodes as it did.
const (
	// simSet says the byte is followed by the sim's own fields
	// (appendSimSpec: run time, exit code).
	simSet byte = 1 << 0
	// simUsage says they are followed by the usage's (appendSimUsage:
	// CPU, memory).
	simUsage byte = 1 << 1
	// simPeak says the usage is followed by its peak's (appendSimPeak:
	// CPU, memory, period, length); only with simUsage.
	simPeak byte = 1 << 2
)

// appendSim appends a pod's sim byte and what it announces.
func appendSim(e *enc, sim *api.SimSpec) {
	if sim == nil {
		e.byte(0)
		return
	}
	flags := simSet
	u := sim.Usage
	if u != nil {
		flags |= simUsage
		if u.Peak != nil {
			flags |= simPeak
		}
	}
	e.byte(flags)
	appendSimSpec(e, sim)
	if u == nil {
		return
	}
	appendSimUsage(e, u)
	if u.Peak != nil {
		appendSimPeak(e, u.Peak)
	}
}

// validSimFlags reports whether a sim byte is one appendSim writes.
func validSimFlags(f byte) bool {
	switch f {
	case 0, simSet, simSet | simUsage, simSet | simUsage | simPeak:
		return true
	}
	return false
}

// A pod's flags byte, where a spec written before pods had networks and
// volumes held the bool SharePID: such a spec decodes as it did, and a pod
// without a network mode, volumes or mounts still encodes as it did.
const (
	podSharePID byte = 1 << 0
	// podStorage says the flags byte is followed by the pod's network
	// mode, its volumes, and each container's mounts, not all empty.
	podStorage byte = 1 << 1
)

// A volume's kinds byte in a pod's storage: which of its sources follow.
const (
	volumeScratch  byte = 1 << 0
	volumeHostPath byte = 1 << 1
)

// hasStorage reports whether p has a network mode, volumes or mounts.
func hasStorage(p *api.PodSpec) bool {
	if p.Network.Mode != "" || len(p.Volumes) > 0 {
		return true
	}
	for i := range p.Containers {
		if len(p.Containers[i].Mounts) > 0 {
			return true
		}
	}
	return false
}

// appendPodStorage appends p's flags byte and, with podStorage, its
// network mode, volumes and each container's mounts.
func appendPodStorage(e *enc, p *api.PodSpec) {
	var flags byte
	if p.SharePID {
		flags |= podSharePID
	}
	if !hasStorage(p) {
		e.byte(flags)
		return
	}
	e.byte(flags | podStorage)
	e.str(p.Network.Mode)
	e.uvarint(uint64(len(p.Volumes)))
	for i := range p.Volumes {
		v := &p.Volumes[i]
		e.str(v.Name)
		var kinds byte
		if v.Scratch != nil {
			kinds |= volumeScratch
		}
		if v.HostPath != nil {
			kinds |= volumeHostPath
		}
		e.byte(kinds)
		if v.Scratch != nil {
			appendScratchVolume(e, v.Scratch)
		}
		if v.HostPath != nil {
			appendHostPathVolume(e, v.HostPath)
		}
	}
	for i := range p.Containers {
		ms := p.Containers[i].Mounts
		e.uvarint(uint64(len(ms)))
		for k := range ms {
			appendMount(e, &ms[k])
		}
	}
}

func appendStrs(e *enc, vs []string) {
	e.uvarint(uint64(len(vs)))
	for _, v := range vs {
		e.str(v)
	}
}

func appendStrMap(e *enc, m map[string]string) {
	e.uvarint(uint64(len(m)))
	if len(m) == 1 {
		for k, v := range m {
			e.str(k)
			e.str(v)
		}
		return
	}
	if len(m) == 0 {
		return
	}
	var buf [8]string
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		e.str(k)
		e.str(m[k])
	}
}

// A block of specs, as submit commands and submit records hold them: one
// byte saying how the rest is stored, then the rest, which is (decoded, for
// specsS2) the specs, each length-prefixed, back to back. Blocks of
// compressMin bytes or more are compressed with s2 when that makes them
// smaller: bulk submits repeat their images, commands and resources from
// job to job, and the block is written to the raft log and then to the
// submit record on every replica.
const (
	specsPlain byte = 0
	specsS2    byte = 1
)

// compressMin is the smallest block appendSpecBlock compresses.
const compressMin = 4 << 10

// appendSpecBlock appends the block of specs, encoded and length-prefixed
// back to back in specs.
func appendSpecBlock(dst, specs []byte) []byte {
	if len(specs) >= compressMin {
		n := len(dst)
		dst = slices.Grow(dst, 1+s2.MaxEncodedLen(len(specs)))
		dst = append(dst, specsS2)
		if out := s2.Encode(dst[n+1:cap(dst)], specs); len(out) < len(specs) {
			return dst[:n+1+len(out)]
		}
		dst = dst[:n]
	}
	return append(append(dst, specsPlain), specs...)
}

// readSpecs reads a count of specs, then their block (appendSpecBlock),
// the rest of d, as submit commands and submit records hold them. It
// returns the count, the block as read, and the specs: fresh is true when
// they were decompressed into memory of their own, which nothing writes
// again; otherwise they are the block's bytes. A block that does not
// decode, that would hold more than api.MaxBodyBytes, or that is too short
// for the count, is an error.
func readSpecs(d *dec, what string) (n int, block, specs []byte, fresh bool, err error) {
	count := d.uvarint()
	block = d.b
	kind := d.byte()
	blk := d.b
	d.b = nil
	if d.err != nil {
		return 0, nil, nil, false, fmt.Errorf("%s: %w", what, d.err)
	}
	size := len(blk)
	switch kind {
	case specsPlain:
	case specsS2:
		if size, err = s2.DecodedLen(blk); err != nil {
			return 0, nil, nil, false, fmt.Errorf("%w: %s: compressed specs: %v", ErrCorrupt, what, err)
		}
	default:
		return 0, nil, nil, false, fmt.Errorf("%w: %s: specs stored as %d", ErrCorrupt, what, kind)
	}
	if size > api.MaxBodyBytes {
		return 0, nil, nil, false, fmt.Errorf("%s: %w: %d bytes of specs, more than the limit of %d", what, api.ErrTooLarge, size, api.MaxBodyBytes)
	}
	specs = blk
	if kind == specsS2 {
		if specs, err = s2.Decode(make([]byte, size), blk); err != nil {
			return 0, nil, nil, false, fmt.Errorf("%w: %s: compressed specs: %v", ErrCorrupt, what, err)
		}
	}
	if count > uint64(len(specs)/(minJobSpecBytes+1)) {
		return 0, nil, nil, false, fmt.Errorf("%w: %s: %d jobs in %d bytes of specs", ErrCorrupt, what, count, len(specs))
	}
	return int(count), block, specs, kind == specsS2, nil
}

// decodeSpec decodes what appendSpec wrote. Errors stick in d; the caller
// checks d.err (or d.done) before using the spec.
func decodeSpec(d *dec) api.JobSpec {
	var sd specDecoder
	return sd.decode(d)
}

// specDecoder decodes specs, carving their short slices (task groups,
// containers, string lists) from shared chunks: the specs of one command
// cost a few allocations per chunk instead of one per slice, and specs
// whose labels or environment encode alike share one map (decoded specs are
// never changed; a bulk submit's jobs mostly carry the same ones). The zero
// value is ready to use.
type specDecoder struct {
	groups     slab[api.TaskGroupSpec]
	containers slab[api.ContainerSpec]
	strs       slab[string]
	labels     mapCache
	env        mapCache
	kv         []string // strMap's scratch
}

// mapCache is the last map a specDecoder built in one place of a spec, and
// its encoding.
type mapCache struct {
	enc string
	m   map[string]string
}

// newSpecDecoder returns a decoder sized for about n specs.
func newSpecDecoder(n int) *specDecoder {
	chunk := min(max(n, 1), maxSlabChunk)
	return &specDecoder{groups: slab[api.TaskGroupSpec]{chunk: chunk}, containers: slab[api.ContainerSpec]{chunk: chunk}, strs: slab[string]{chunk: 4 * chunk}}
}

func (sd *specDecoder) decode(d *dec) api.JobSpec {
	var s api.JobSpec
	sd.decodeInto(d, &s)
	return s
}

// decodeInto decodes a spec into *s, which must be zero: a big struct is
// filled in place rather than copied out.
func (sd *specDecoder) decodeInto(d *dec, s *api.JobSpec) { sd.decodeJobSpec(d, s) }

// decodePodSpec decodes what appendPodSpec wrote.
func (sd *specDecoder) decodePodSpec(d *dec, p *api.PodSpec) {
	if n := d.count(minContainerSpecBytes); n > 0 {
		p.Containers = sd.containers.take(n)
		for k := range p.Containers {
			sd.decodeContainerSpec(d, &p.Containers[k])
		}
	}
	flags := d.byte()
	if flags&^(podSharePID|podStorage) != 0 {
		d.fail("pod flags")
		return
	}
	p.SharePID = flags&podSharePID != 0
	if flags&podStorage != 0 {
		sd.decodeStorage(d, p)
	}
	flags = d.byte()
	if !validSimFlags(flags) {
		d.fail("sim flags")
		return
	}
	if flags&simSet == 0 {
		return
	}
	p.Sim = &api.SimSpec{}
	sd.decodeSimSpec(d, p.Sim)
	if flags&simUsage == 0 {
		return
	}
	u := &api.SimUsage{}
	sd.decodeSimUsage(d, u)
	if flags&simPeak != 0 {
		u.Peak = &api.SimPeak{}
		sd.decodeSimPeak(d, u.Peak)
	}
	p.Sim.Usage = u
}

// decodeStorage decodes what appendPodStorage wrote after a flags byte
// with podStorage.
func (sd *specDecoder) decodeStorage(d *dec, p *api.PodSpec) {
	p.Network.Mode = internMode(d.str())
	if n := d.count(2); n > 0 {
		p.Volumes = make([]api.Volume, n)
		for i := range p.Volumes {
			v := &p.Volumes[i]
			v.Name = d.str()
			kinds := d.byte()
			if kinds&^(volumeScratch|volumeHostPath) != 0 {
				d.fail("volume kinds")
				return
			}
			if kinds&volumeScratch != 0 {
				v.Scratch = &api.ScratchVolume{}
				sd.decodeScratchVolume(d, v.Scratch)
			}
			if kinds&volumeHostPath != 0 {
				v.HostPath = &api.HostPathVolume{}
				sd.decodeHostPathVolume(d, v.HostPath)
			}
		}
	}
	for k := range p.Containers {
		if n := d.count(minMountBytes); n > 0 {
			c := &p.Containers[k]
			c.Mounts = make([]api.Mount, n)
			for i := range c.Mounts {
				sd.decodeMount(d, &c.Mounts[i])
			}
		}
	}
	if d.err == nil && !hasStorage(p) {
		d.fail("pod storage (empty)")
	}
}

// internMode returns the api constant equal to m, or m.
func internMode(m string) string {
	for _, c := range api.NetworkModes {
		if m == c {
			return c
		}
	}
	return m
}

func (sd *specDecoder) decodeStrs(d *dec) []string {
	n := d.count(1)
	if n == 0 {
		return nil
	}
	vs := sd.strs.take(n)
	for i := range vs {
		vs[i] = d.str()
	}
	return vs
}

// maxSlabChunk is the most elements a slab allocates at a time.
const maxSlabChunk = 128

// slab hands out short slices carved from larger allocations (as api's
// decoder does).
type slab[T any] struct {
	free  []T
	chunk int // elements per allocation
}

// take returns a zeroed slice of length and capacity n; appending to it
// reallocates, so it never overwrites a neighbour.
func (s *slab[T]) take(n int) []T {
	if n > len(s.free) {
		if n > s.chunk/4 {
			return make([]T, n)
		}
		s.free = make([]T, s.chunk)
	}
	out := s.free[:n:n]
	s.free = s.free[n:]
	return out
}

// strMap decodes a map (keys in increasing order), or returns c's map when
// the encoding is c's.
func (sd *specDecoder) strMap(d *dec, c *mapCache) map[string]string {
	from := d.b
	n := d.count(2)
	if n == 0 {
		return nil
	}
	kv := sd.kv[:0]
	for i := range n {
		k := d.str()
		if i > 0 && k <= kv[len(kv)-2] {
			d.fail("map (keys not in increasing order)")
		}
		if d.err != nil {
			return nil
		}
		kv = append(kv, k, d.str())
	}
	sd.kv = kv
	if d.err != nil {
		return nil
	}
	enc := from[:len(from)-len(d.b)]
	if c.m != nil && string(enc) == c.enc {
		return c.m
	}
	m := make(map[string]string, n)
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	c.enc, c.m = string(enc), m
	return m
}

func decodeBool(d *dec) bool {
	switch d.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail("bool")
	return false
}

func decodeInt32(d *dec) int32 {
	v := d.varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail("int32")
		return 0
	}
	return int32(v)
}
