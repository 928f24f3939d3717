package fsm

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
)

// Key prefixes of the FSM's keyspace (see doc.go for the layout).
const (
	prefixSeq  = "s/"
	prefixMeta = "m/"
	prefixJob  = "j/"
	// prefixSubmit holds the jobs of one submit command, under the first
	// one's number.
	prefixSubmit = "J/"
	prefixGroup  = "g/"
	prefixTask   = "t/"
	prefixNode   = "n/"
	// prefixGen holds each node's target generation, apart from its
	// record: it changes with nearly every command that places or ends
	// a task, the node's spec hardly ever.
	prefixGen  = "N/"
	prefixIdem = "i/"
	prefixSlot = "c/"
	// prefixCapboxSet holds capbox sets, numbered as jobs.
	prefixCapboxSet = "b/"
	// prefixCapTask holds capbox tasks, under their capbox's task key.
	prefixCapTask = "k/"
	// prefixForgotten marks a forgotten job whose submit record still
	// holds other jobs.
	prefixForgotten = "f/"
	// prefixHistory holds the summaries of forgotten jobs.
	prefixHistory = "h/"
)

var (
	keyJobSeq   = []byte(prefixSeq + "job")
	keySlotSeq  = []byte(prefixSeq + "slot")
	keyPlanTerm = []byte(prefixMeta + "planterm")
)

// recordVersion is the first byte of every stored record but a job's, a
// node's, a submit's and a task record.
const recordVersion = 1

// taskRecordVersion is the first byte of a task record. 2: a record holds
// up to taskChunk tasks of a group (1 held one task). 3: it names each of
// its tasks' nodes once, and a task's update time is the difference from
// the previous task's. 4: a task with ports (flagPorts) ends with them, a
// count and the numbers; Load reads 3 too, as tasks without ports.
const taskRecordVersion = 4

// taskChunk is how many tasks of a group one task record holds at most:
// the tasks from a multiple of taskChunk on, under the first one's key
// (taskRecord). Writing a task's record writes its neighbours' too, so a
// group's tasks that change within a second cost one store write, not one
// each; the most one change costs is taskChunk tasks' bytes.
const taskChunk = 64

// jobRecordVersion is the first byte of a job record. 6: the spec's
// layout precedes it (before, layout 0); 5: the spec's
// simulated pods may have usage (appendSim), and Load reads 3's and 4's
// alike; 4: the spec's pods may have network modes, volumes and mounts
// (appendPodStorage); 3: the spec has JobSpec.Appmaster; 2: the spec in the
// binary encoding of spec_codec.go (1 held it as JSON).
const jobRecordVersion = 6

// oldestJobRecordVersion is the oldest job record Load reads.
const oldestJobRecordVersion = 3

// nodeRecordVersion is the first byte of a node record. 3: the record
// ends with the node's drain (a flag and a deadline); Load reads 2's as
// drained when draining, without a deadline. 2: the target generation is
// in a record of its own (prefixGen).
const nodeRecordVersion = 3

// submitRecordVersion is the first byte of a submit record. 5: the specs'
// layout precedes their count (before, layout 0); 4: the specs'
// simulated pods may have usage, and Load reads 2's and 3's alike; 3: the
// specs' pods may have network modes, volumes and mounts; 2: the specs are a block, compressed when large
// (appendSpecBlock).
const submitRecordVersion = 5

// oldestSubmitRecordVersion is the oldest submit record Load reads.
const oldestSubmitRecordVersion = 2

// taskKey identifies a task: its job's number, its group's index in the job
// and its index in the group.
type taskKey struct {
	job   uint64
	group uint16
	index uint32
}

// jobID formats a job number as its ID.
func jobID(num uint64) string { return "j" + strconv.FormatUint(num, 10) }

// parseJobID returns the number of a job ID.
func parseJobID(id string) (uint64, bool) {
	if len(id) < 2 || id[0] != 'j' || id[1] == '0' {
		return 0, false
	}
	n, err := strconv.ParseUint(id[1:], 10, 64)
	return n, err == nil
}

// TaskID formats the ID of a task's attempt: "<job>/<group index>/<task
// index>/<attempt>". Each attempt of a task is a different pod, so a late
// report about an earlier attempt is recognised as stale.
func TaskID(job string, group, index int, attempt int) string {
	return fmt.Sprintf("%s/%d/%d/%d", job, group, index, attempt)
}

func taskID(k taskKey, attempt uint32) string {
	b := make([]byte, 0, 32)
	b = append(b, 'j')
	b = strconv.AppendUint(b, k.job, 10)
	b = append(b, '/')
	b = strconv.AppendUint(b, uint64(k.group), 10)
	b = append(b, '/')
	b = strconv.AppendUint(b, uint64(k.index), 10)
	b = append(b, '/')
	b = strconv.AppendUint(b, uint64(attempt), 10)
	return string(b)
}

// parseTaskID splits a task ID into the task and the attempt: "j", the
// job number (no leading zero), then the group, index and attempt, each
// decimal digits within its type, separated by "/". It runs for every
// report on every replica, so it reads the ID once and does not allocate.
func parseTaskID(id string) (taskKey, uint32, bool) {
	if len(id) < 2 || id[0] != 'j' || id[1] == '0' {
		return taskKey{}, 0, false
	}
	var n [4]uint64
	limits := [4]uint64{math.MaxUint64, math.MaxUint16, math.MaxUint32, math.MaxUint32}
	i := 1
	for f := range n {
		start := i
		for ; i < len(id) && id[i] != '/'; i++ {
			c := uint64(id[i] - '0')
			if c > 9 || n[f] > (limits[f]-c)/10 {
				return taskKey{}, 0, false // not a digit, or out of range
			}
			n[f] = 10*n[f] + c
		}
		if i == start || f < 3 && i == len(id) {
			return taskKey{}, 0, false // an empty field, or fewer than four
		}
		i++ // past the "/"
	}
	if i <= len(id) {
		return taskKey{}, 0, false // more than four fields
	}
	return taskKey{n[0], uint16(n[1]), uint32(n[2])}, uint32(n[3]), true
}

func jobKey(num uint64) []byte { return appendJobKey(nil, num) }

// appendSubmitKey writes the key of the submit record whose first job is
// num over buf.
func appendSubmitKey(buf []byte, num uint64) []byte {
	return binary.BigEndian.AppendUint64(append(buf[:0], prefixSubmit...), num)
}

// numKey returns prefix p followed by num, big-endian: the keys of a
// job's records (or the start of their range) under p.
func numKey(p string, num uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte(p), num)
}

// appendJobKey writes num's job key over buf.
func appendJobKey(buf []byte, num uint64) []byte {
	return binary.BigEndian.AppendUint64(append(buf[:0], prefixJob...), num)
}

// appendGroupKey writes a group's key over buf.
func appendGroupKey(buf []byte, job uint64, g uint16) []byte {
	b := binary.BigEndian.AppendUint64(append(buf[:0], prefixGroup...), job)
	return binary.BigEndian.AppendUint16(b, g)
}

func appendTaskSuffix(b []byte, k taskKey) []byte {
	b = binary.BigEndian.AppendUint64(b, k.job)
	b = binary.BigEndian.AppendUint16(b, k.group)
	return binary.BigEndian.AppendUint32(b, k.index)
}

// taskRecord returns the tasks of a group's tasks (its placed prefix) that
// share the task record of the task at index i.
func taskRecord(tasks []*task, i uint32) []*task {
	first := int(i - i%taskChunk)
	return tasks[first:min(first+taskChunk, len(tasks))]
}

func taskRecordKey(buf []byte, k taskKey) []byte {
	return appendTaskSuffix(append(buf[:0], prefixTask...), k)
}

func decodeTaskSuffix(b []byte) (taskKey, bool) {
	if len(b) != 14 {
		return taskKey{}, false
	}
	return taskKey{binary.BigEndian.Uint64(b), binary.BigEndian.Uint16(b[8:]), binary.BigEndian.Uint32(b[10:])}, true
}

func nodeKey(name string) []byte { return []byte(prefixNode + name) }

// appendGenKey appends the key of a node's target generation to buf[:0].
func appendGenKey(buf []byte, name string) []byte {
	return append(append(buf[:0], prefixGen...), name...)
}

// slotKey is a cached slot's record key; node names never hold a 0 byte.
func slotKey(node, id string) []byte { return []byte(prefixSlot + node + "\x00" + id) }

func idemKey(k string) []byte { return []byte(prefixIdem + k) }

// prefixEnd returns the first key after every key with prefix p.
func prefixEnd(p string) []byte {
	b := []byte(p)
	b[len(b)-1]++
	return b
}
