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
// directive below), so that a field added to api is encoded as soon as go
// generate has run (TestGeneratedCodecsCurrent fails until it has,
// TestSpecCodecEveryField until the field survives the round trip).
//
// Layouts. Every encoding is of a layout, a number stored with it: in a
// submit command (from commandVersion 10), a submit record (5) and a job
// record (6). The codec writes specLayout and decodes every layout up to
// it. A field added to api must not change what the encodings of the
// layouts before decode to: it is tagged codec:"since=N", N the layout
// after the current one, which makes N the current layout (the generator
// sets specLayout to the highest since=), and the decoder reads the field
// only from layout N on. TestSpecLayouts keeps it so: it decodes a corpus
// of specs of each layout (testdata/spec-layout-N.txt, written by the
// codec of its time) and fails for a layout without one.
//
// Layout 0 is how the releases before wrote specs, when a pod had a
// hand-written layout (decodePodSpecLegacy): commands before version 10
// and records before the versions above hold it. Apply converts a submit
// command's specs of an earlier layout to the current one before it reads
// them (convertSpecs), so that everything past it (the skim, the jobs'
// kept encodings, the submit record) sees the current layout only.
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

//go:generate go run github.com/sluicehq/sluice/internal/codecgen/cmd/codecgen -binary -schema ../../api -import github.com/sluicehq/sluice/api -type JobSpec,TaskGroupSpec,PodSpec,ContainerSpec,Mount,ScratchVolume,HostPathVolume,SimSpec,SimUsage,SimPeak -legacy PodSpec=3 -legacy-fields ContainerSpec.Mounts,SimSpec.Usage,SimUsage.Peak -skimmer JobSpec,TaskGroupSpec,PodSpec,ContainerSpec,Volume,ScratchVolume -read JobSpec.Queue,JobSpec.Pool,JobSpec.Priority,JobSpec.QoS,JobSpec.Constraints,JobSpec.DistinctNodes,JobSpec.Retry.MaxAttempts,JobSpec.Retry.Backoff,JobSpec.Retry.MaxBackoff,JobSpec.IdempotencyKey,JobSpec.Appmaster,JobSpec.Tasks,TaskGroupSpec.Name,TaskGroupSpec.Count,TaskGroupSpec.Pod,ContainerSpec.Resources.CPU,ContainerSpec.Resources.Memory,ContainerSpec.Resources.GPUs,ContainerSpec.Resources.Disk,ContainerSpec.Resources.Ports,ScratchVolume.Size -o spec_bin_gen.go

// appendSpec appends the encoding of s, of layout specLayout.
func appendSpec(e *enc, s *api.JobSpec) { appendJobSpec(e, s) }

// A layout-0 pod: its containers (without their mounts), a flags byte, the
// storage the flags announce (network mode, volumes, the containers'
// mounts), and a sim byte and what it announces. In the releases before
// those, the flags byte was the bool SharePID and the sim byte the bool
// "Sim is set", which decode as they did.
const (
	podSharePID byte = 1 << 0
	// podStorage says the flags byte is followed by the pod's network
	// mode, its volumes, and each container's mounts, not all empty.
	podStorage byte = 1 << 1
)

// A volume's kinds byte in a layout-0 pod's storage: which of its sources
// follow.
const (
	volumeScratch  byte = 1 << 0
	volumeHostPath byte = 1 << 1
)

// A layout-0 pod's sim byte.
const (
	// simSet says the byte is followed by the sim's own fields (run time,
	// exit code).
	simSet byte = 1 << 0
	// simUsage says they are followed by the usage's (CPU, memory).
	simUsage byte = 1 << 1
	// simPeak says the usage is followed by its peak's (CPU, memory,
	// period, length); only with simUsage.
	simPeak byte = 1 << 2
)

// validSimFlags reports whether a sim byte is one the releases before
// wrote.
func validSimFlags(f byte) bool {
	switch f {
	case 0, simSet, simSet | simUsage, simSet | simUsage | simPeak:
		return true
	}
	return false
}

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

// A specBlock is a block of specs as read by readSpecs.
type specBlock struct {
	n      int  // how many specs
	layout byte // their layout
	// block is the block as stored: how, then the specs, compressed or
	// not (appendSpecBlock).
	block []byte
	// specs are the specs, each length-prefixed, back to back: the
	// block's bytes, or, when fresh, memory of their own (decompressed or
	// converted) that nothing writes again.
	specs []byte
	fresh bool
}

// readSpecs reads, as submit commands and submit records hold them, the
// specs' layout (when withLayout: from submit command version 10 and
// submit record version 5 on; before, layout 0), their count, then their
// block (appendSpecBlock), the rest of d. A layout newer than specLayout,
// a block that does not decode, that would hold more than
// api.MaxBodyBytes, or that is too short for the count, is an error.
func readSpecs(d *dec, what string, withLayout bool) (specBlock, error) {
	var b specBlock
	if withLayout {
		b.layout = d.byte()
	}
	count := d.uvarint()
	b.block = d.b
	kind := d.byte()
	blk := d.b
	d.b = nil
	if d.err != nil {
		return specBlock{}, fmt.Errorf("%s: %w", what, d.err)
	}
	if b.layout > specLayout {
		return specBlock{}, fmt.Errorf("%w: %s: spec layout %d, newer than this release's %d", ErrCorrupt, what, b.layout, specLayout)
	}
	size := len(blk)
	var err error
	switch kind {
	case specsPlain:
	case specsS2:
		if size, err = s2.DecodedLen(blk); err != nil {
			return specBlock{}, fmt.Errorf("%w: %s: compressed specs: %v", ErrCorrupt, what, err)
		}
	default:
		return specBlock{}, fmt.Errorf("%w: %s: specs stored as %d", ErrCorrupt, what, kind)
	}
	if size > api.MaxBodyBytes {
		return specBlock{}, fmt.Errorf("%s: %w: %d bytes of specs, more than the limit of %d", what, api.ErrTooLarge, size, api.MaxBodyBytes)
	}
	b.specs = blk
	if kind == specsS2 {
		if b.specs, err = s2.Decode(make([]byte, size), blk); err != nil {
			return specBlock{}, fmt.Errorf("%w: %s: compressed specs: %v", ErrCorrupt, what, err)
		}
		b.fresh = true
	}
	if count > uint64(len(b.specs)/(minJobSpecBytes+1)) {
		return specBlock{}, fmt.Errorf("%w: %s: %d jobs in %d bytes of specs", ErrCorrupt, what, count, len(b.specs))
	}
	b.n = int(count)
	return b, nil
}

// convert rewrites b's specs, of an earlier layout, in the current one: it
// decodes each and encodes it again, into memory of its own, and builds
// the block anew. A spec that does not decode is an error naming it.
func (b *specBlock) convert(what string) error {
	if b.layout == specLayout {
		return nil
	}
	sd := newSpecDecoder(b.n)
	sd.layout = b.layout
	in := dec{b: b.specs}
	all := enc{b: make([]byte, 0, len(b.specs)+len(b.specs)/8)}
	var one enc
	for i := range b.n {
		sdec := dec{b: in.bytes()}
		if in.err != nil {
			break
		}
		var s api.JobSpec
		sd.decodeInto(&sdec, &s)
		if err := sdec.done("spec"); err != nil {
			return fmt.Errorf("%s: job %d of layout %d: %w", what, i, b.layout, err)
		}
		one.b = one.b[:0]
		appendSpec(&one, &s)
		all.bytes(one.b)
	}
	if err := in.done(what); err != nil {
		return err
	}
	b.layout, b.specs, b.fresh = specLayout, all.b, true
	b.block = appendSpecBlock(nil, all.b)
	return nil
}

// decodeSpec decodes what appendSpec wrote. Errors stick in d; the caller
// checks d.err (or d.done) before using the spec.
func decodeSpec(d *dec) api.JobSpec {
	sd := specDecoder{layout: specLayout}
	return sd.decode(d)
}

// specDecoder decodes specs, carving their short slices (task groups,
// containers, string lists) from shared chunks: the specs of one command
// cost a few allocations per chunk instead of one per slice, and specs
// whose labels or environment encode alike share one map (decoded specs are
// never changed; a bulk submit's jobs mostly carry the same ones). The zero
// value is ready to decode layout 0; newSpecDecoder's, the current layout.
type specDecoder struct {
	// layout is the layout of the specs it decodes.
	layout     byte
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

// newSpecDecoder returns a decoder of the current layout sized for about n
// specs.
func newSpecDecoder(n int) *specDecoder {
	chunk := min(max(n, 1), maxSlabChunk)
	return &specDecoder{layout: specLayout, groups: slab[api.TaskGroupSpec]{chunk: chunk}, containers: slab[api.ContainerSpec]{chunk: chunk}, strs: slab[string]{chunk: 4 * chunk}}
}

func (sd *specDecoder) decode(d *dec) api.JobSpec {
	var s api.JobSpec
	sd.decodeInto(d, &s)
	return s
}

// decodeInto decodes a spec into *s, which must be zero: a big struct is
// filled in place rather than copied out.
func (sd *specDecoder) decodeInto(d *dec, s *api.JobSpec) { sd.decodeJobSpec(d, s) }

// decodePodSpecLegacy decodes a layout-0 pod. The generated decoders of
// its containers and sims read, at layout 0, what they held then: the
// flags bytes announce the rest.
func (sd *specDecoder) decodePodSpecLegacy(d *dec, p *api.PodSpec) {
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
		sd.decodeStorageLegacy(d, p)
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

// decodeStorageLegacy decodes a layout-0 pod's storage, after a flags
// byte with podStorage.
func (sd *specDecoder) decodeStorageLegacy(d *dec, p *api.PodSpec) {
	p.Network.Mode = intern(d.str(), api.NetworkBridge, api.NetworkHost, api.NetworkNone)
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

// intern returns the constant among common equal to s, or s: a value most
// specs share keeps no reference to the command it was read from.
func intern(s string, common ...string) string {
	for _, c := range common {
		if s == c {
			return c
		}
	}
	return s
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
