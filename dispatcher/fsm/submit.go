package fsm

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"

	"github.com/sluicehq/sluice/api"
)

// submitBatch is a submit command's jobs as read and skimmed, before
// any is created.
type submitBatch struct {
	// block is the command's block of specs, as the submit record keeps
	// it.
	block []byte
	// jobs are the command's jobs, allocated together, with what the skim
	// copied out of their specs; groups are their task groups, in order,
	// job i's ending at tgEnd[i].
	jobs   []job
	groups []group
	tgEnd  []int
	// idem is, by spec, its idempotency key; nil when none has one.
	idem []string
}

// submitLocked applies a submit command: it reads and skims the specs
// (the only step that can fail), creates the jobs that no idempotency key
// names an existing job for, answers with the IDs, and writes the new
// jobs' submit record.
func (f *FSM) submitLocked(w writer, now int64, d *dec) ([]byte, error) {
	var b submitBatch
	if err := b.read(d, f.version); err != nil {
		return nil, err
	}
	if len(b.jobs) == 0 {
		// A command of no jobs only stores the sequence.
		w.Set(keyJobSeq, binary.BigEndian.AppendUint64(nil, f.mu.nextJob))
		return (&SubmitResult{}).encode(), nil
	}
	// SubmitJobs defaulted and validated the specs before they were
	// proposed. Nothing below can fail.
	first := f.mu.nextJob
	c := f.createJobsLocked(w, now, &b)
	res := c.result(b.jobs)
	f.writeSubmitRecordLocked(w, now, &b, first, c.created)
	w.Set(keyJobSeq, binary.BigEndian.AppendUint64(nil, f.mu.nextJob))
	return res, nil
}

// read reads a submit command's specs, converted to the current layout
// when they are of an earlier one, and skims each (skimSpec): the fields
// apply reads are copied into its job, and the spec stays encoded in the
// command's shared copy until something reads it (job.specOf). A corrupt
// spec rejects the command before anything changes.
func (b *submitBatch) read(d *dec, version byte) error {
	blk, err := readSpecs(d, "submit command", version >= 10)
	if err == nil {
		err = blk.convert("submit command")
	}
	if err != nil {
		return fmt.Errorf("fsm: submit: %w", err)
	}
	b.block = blk.block
	n := blk.n
	// The specs' strings share one copy of them: the block's own memory
	// when it was decompressed or converted.
	var cd dec
	if blk.fresh {
		cd = ownedDec(blk.specs)
	} else {
		cd = sharedDec(blk.specs)
	}
	if n > api.MaxItemsPerRequest {
		return fmt.Errorf("fsm: submit: %w: more than %d jobs in one request", api.ErrTooLarge, api.MaxItemsPerRequest)
	}
	b.jobs = make([]job, n)
	// A job has most often one group.
	b.groups = make([]group, 0, n)
	b.tgEnd = make([]int, n)
	for i := range b.jobs {
		sd := cd.sub()
		if cd.err != nil {
			break
		}
		var (
			key string
			ok  bool
		)
		b.jobs[i].specEnc = sd.src
		b.jobs[i].jobFields, key, b.groups, ok = skimSpec(sd.src, b.groups)
		if !ok {
			return fmt.Errorf("submit command: job %d: %w", i, specError(sd.src))
		}
		if key != "" {
			if b.idem == nil {
				b.idem = make([]string, n)
			}
			b.idem[i] = key
		}
		b.tgEnd[i] = len(b.groups)
	}
	if cap(b.groups) > len(b.groups)+len(b.groups)/4 { // grown for jobs of several groups: keep no more than they need
		b.groups = slices.Clone(b.groups)
	}
	return cd.done("submit command")
}

// created is what createJobsLocked made of a submit command's jobs.
type created struct {
	created int
	// existing is, by spec, the job its idempotency key named (0: none;
	// nil when none did).
	existing []uint64
	// The new jobs' IDs are cut from one string: "j" and the number,
	// back to back; idEnd[i] is where job i's ends (0: none).
	idBuf []byte
	idEnd []int
}

// createJobsLocked numbers and enters the batch's jobs, but those whose
// idempotency key names a job already there, and their groups (listed as
// changed), and records their idempotency keys.
func (f *FSM) createJobsLocked(w writer, now int64, b *submitBatch) created {
	n := len(b.jobs)
	c := created{idBuf: make([]byte, 0, n*8), idEnd: make([]int, n)}
	gptrs := make([]*group, len(b.groups))
	sub := &submitRecord{first: f.mu.nextJob}
	tgStart := 0
	for i := range b.jobs {
		jgroups := b.groups[tgStart:b.tgEnd[i]]
		tgStart = b.tgEnd[i]
		k := keyOf(b.idem, i)
		if k != "" {
			if num, ok := f.mu.idem[k]; ok {
				if c.existing == nil {
					c.existing = make([]uint64, n)
				}
				c.existing[i] = num
				continue
			}
		}
		num := f.mu.nextJob
		f.mu.nextJob++
		j := &b.jobs[i]
		j.num, j.submitted, j.sub = num, now, sub
		c.idBuf = strconv.AppendUint(append(c.idBuf, 'j'), num, 10)
		c.idEnd[i] = len(c.idBuf)
		ng := len(jgroups)
		j.groups, gptrs = gptrs[:ng:ng], gptrs[ng:]
		for gi := range jgroups {
			g := &jgroups[gi]
			g.job, g.idx = j, uint16(gi)
			j.groups[gi] = g
			f.touchGroup(g)
		}
		f.mu.jobs.put(j)
		c.created++
		if k != "" {
			f.mu.idem[k] = num
			j.idem = k
			w.Set(idemKey(k), binary.BigEndian.AppendUint64(nil, num))
		}
	}
	sub.count, sub.live = c.created, c.created
	return c
}

// result cuts the new jobs' IDs and encodes the command's result.
func (c *created) result(jobs []job) []byte {
	res := newResultEnc(len(jobs), len(c.idBuf))
	ids, start := string(c.idBuf), 0
	for i, end := range c.idEnd {
		if end > 0 {
			jobs[i].id, start = ids[start:end], end
			res.add(jobs[i].id, false)
		} else {
			res.add(jobID(c.existing[i]), true)
		}
	}
	return res.b
}

// writeSubmitRecordLocked writes the new jobs' specs, as submitted, in one
// submit record numbered first: one key for the command, not one per
// job. When every job is new, the record holds the command's own block of
// specs, compressed as it came.
func (f *FSM) writeSubmitRecordLocked(w writer, now int64, b *submitBatch, first uint64, created int) {
	if created == 0 {
		return
	}
	block := b.block
	if created < len(b.jobs) {
		rec := enc{b: f.vbuf[:0]}
		for i := range b.jobs {
			if b.jobs[i].num != 0 {
				rec.str(b.jobs[i].specEnc)
			}
		}
		f.vbuf = rec.b
		f.bbuf = appendSpecBlock(f.bbuf[:0], rec.b)
		block = f.bbuf
	}
	f.kbuf = appendSubmitKey(f.kbuf, first)
	f.sbuf = encodeSubmit(f.sbuf, now, created, block)
	w.Set(f.kbuf, f.sbuf)
}

// keyOf returns idem[i], or "" when idem is nil.
func keyOf(idem []string, i int) string {
	if idem == nil {
		return ""
	}
	return idem[i]
}
