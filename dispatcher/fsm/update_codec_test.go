package fsm

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/internal/seedtest"
)

// updateTasksV5 is UpdateTasksCaching as command version 5 wrote it: every
// report's node and reason spelled out, and the nodelet's clock.
func updateTasksV5(now time.Time, reports []Report, slotTTL time.Duration) []byte {
	e := &enc{}
	e.byte(cmdUpdateTasks)
	e.byte(5)
	e.varint(now.UnixNano())
	e.uvarint(uint64(len(reports)))
	for _, r := range reports {
		e.str(r.Node)
		e.str(r.TaskID)
		e.byte(byte(r.State))
		e.str(string(r.Reason))
		e.varint(int64(r.ExitCode))
		e.varint(r.Time.UnixNano())
		e.str(r.Message)
	}
	if slotTTL > 0 {
		e.varint(int64(slotTTL))
	}
	return e.b
}

// TestUpdateCommandRoundTrip encodes random batches of reports, their
// nodes in runs, interleaved, or empty, their reasons known or not, in
// command versions 6 and 5, and reads back every field apply uses.
func TestUpdateCommandRoundTrip(t *testing.T) {
	r := seedtest.Rand(t)
	nodes := []string{"n1", "n2", "", "host-with-a-longer-name.example"}
	reasons := append(knownReasons[:], "", "rescheduled-by-hand", api.ReasonPreempted)
	for round := range 200 {
		reps := make([]Report, r.IntN(40))
		node := nodes[r.IntN(len(nodes))]
		for i := range reps {
			if r.IntN(4) == 0 {
				node = nodes[r.IntN(len(nodes))]
			}
			reps[i] = Report{Node: node, TaskReport: &api.TaskReport{
				TaskID:   fmt.Sprintf("j%d/0/%d/1", r.IntN(1000), i),
				State:    api.TaskState(r.IntN(9)),
				Reason:   reasons[r.IntN(len(reasons))],
				ExitCode: int32(r.IntN(512) - 256),
				Message:  []string{"", "no such file"}[r.IntN(2)],
				Time:     time.Unix(0, r.Int64()),
			}}
		}
		ttl := time.Duration(r.IntN(2)) * time.Minute
		now := time.Unix(1_800_000_000, int64(round))
		for _, version := range []byte{commandVersion, 5} {
			cmd := UpdateTasksCaching(now, reps, ttl)
			if version == 5 {
				cmd = updateTasksV5(now, reps, ttl)
			}
			if cmd[0] != cmdUpdateTasks || cmd[1] != version {
				t.Fatalf("round %d: command starts %v, want tag %d version %d", round, cmd[:2], cmdUpdateTasks, version)
			}
			d := viewDec(cmd[2:])
			if at := d.varint(); at != now.UnixNano() {
				t.Fatalf("round %d, version %d: clock %d, want %d", round, version, at, now.UnixNano())
			}
			got := readReports(&d, version, nil)
			var gotTTL int64
			if len(d.b) > 0 {
				gotTTL = d.varint()
			}
			if err := d.done("update command"); err != nil {
				t.Fatalf("round %d, version %d: %v", round, version, err)
			}
			if len(got) != len(reps) || gotTTL != int64(ttl) {
				t.Fatalf("round %d, version %d: %d reports and TTL %d, want %d and %d", round, version, len(got), gotTTL, len(reps), ttl)
			}
			for i, g := range got {
				w := reps[i]
				if g.node != w.Node || g.id != w.TaskID || g.state != w.State || g.reason != w.Reason || g.exit != w.ExitCode {
					t.Fatalf("round %d, version %d, report %d: read %q %q %v %q %d, want %q %q %v %q %d", round, version, i,
						g.node, g.id, g.state, g.reason, g.exit, w.Node, w.TaskID, w.State, w.Reason, w.ExitCode)
				}
			}
		}
	}
}

// TestUpdateCommandSize pins what a report costs in the log: a node's
// second report does not name it again, and a known reason is one byte.
func TestUpdateCommandSize(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	report := func(node, id string) Report {
		return Report{Node: node, TaskReport: &api.TaskReport{TaskID: id, State: api.TaskRunning, Reason: api.ReasonStarted, Time: now}}
	}
	one := len(UpdateTasks(now, []Report{report("node-00001", "j12345/0/17/1")}))
	two := len(UpdateTasks(now, []Report{report("node-00001", "j12345/0/17/1"), report("node-00001", "j12345/0/18/1")}))
	// A report: a byte for the node, the task ID with its length, state,
	// reason and exit code a byte each, and an empty message.
	if want := 1 + 1 + len("j12345/0/17/1") + 4; two-one != want {
		t.Errorf("a node's second report takes %d bytes, want %d", two-one, want)
	}
}

// TestUpdateCommandVersions applies an update command of version 5, the
// release before's, as one of 6, and refuses versions it does not know
// and malformed reports with ErrCorrupt, changing nothing.
func TestUpdateCommandVersions(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	setup := func(t *testing.T) *seq {
		q := newSeq(t)
		q.node(now, api.Capacity{CPU: 4000, Memory: 4 << 30, Ports: 10})
		spec := api.JobSpec{Name: "j", Tasks: []api.TaskGroupSpec{{Name: "work", Count: 1, Pod: api.PodSpec{Containers: []api.ContainerSpec{{
			Image: api.Image{Rootfs: "/r"}, Command: []string{"x"}, Resources: api.Resources{CPU: 100, Memory: 1 << 20}}}}}}}
		cmd, err := SubmitJobs(now, []api.JobSpec{spec})
		if err != nil {
			t.Fatal(err)
		}
		q.apply(cmd)
		q.apply(CommitPlan(&Plan{Term: 1, Index: q.index, Now: now, Assignments: []Assignment{
			{Group: GroupKey{Job: "j1", Group: "work"}, Node: "n1", Count: 1}}}))
		return q
	}
	running := []Report{{Node: "n1", TaskReport: &api.TaskReport{TaskID: "j1/0/0/1", State: api.TaskRunning, Reason: api.ReasonStarted, Time: now}}}
	for _, version := range []byte{5, 6, commandVersion} {
		q := setup(t)
		cmd := UpdateTasks(now, running)
		switch version {
		case 5:
			cmd = updateTasksV5(now, running, 0)
		case 6:
			cmd[1] = 6 // 7 changed specs and added reasons, not this report
		}
		res, err := DecodeUpdateResult(q.apply(cmd))
		if err != nil || res.Applied != 1 {
			t.Errorf("version %d: result %+v, %v; want 1 applied", version, res, err)
		}
		if got, _ := q.f.Task("j1/0/0/1"); got.State != api.TaskRunning || got.Reason != api.ReasonStarted {
			t.Errorf("version %d: task %v (%s), want running (started)", version, got.State, got.Reason)
		}
	}

	good := UpdateTasks(now, running)
	with := func(at int, b ...byte) []byte {
		return append(append(append([]byte{}, good[:at]...), b...), good[at+1:]...)
	}
	// good ends in its one report: node (tag, "n1"), task ID (length, 8
	// bytes), state, reason, exit code and message.
	node, reason := len(good)-16, len(good)-3
	for _, tc := range []struct {
		name string
		cmd  []byte
	}{
		{"version 4", with(1, 4)},
		{"a version past the newest", with(1, commandVersion+1)},
		{"a reason code past the known", with(reason, byte(len(knownReasons)+1))},
		{"a spelled-out reason cut short", with(reason, 0, 9)},
		{"a node name past the end", with(node, 100)},
		{"a report cut short", good[:reason]},
	} {
		q := setup(t)
		q.index++
		if _, _, err := q.s.apply(q.f, q.index, tc.cmd); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", tc.name, err)
		}
		if got, _ := q.f.Task("j1/0/0/1"); got.State != api.TaskAssigned {
			t.Errorf("%s: task %v after the refused command, want assigned", tc.name, got.State)
		}
	}
}

// TestReasonCodes pins the codes of the reasons an update command carries
// (the log's format: a code never changes meaning), round-trips each, and
// reads api.ReasonImageDenied both as its code and spelled out after a 0,
// as a log written before the code had it.
func TestReasonCodes(t *testing.T) {
	want := []api.TaskReason{api.ReasonStarted, api.ReasonExited, api.ReasonOOMKilled, api.ReasonMemoryKiller,
		api.ReasonStartFailed, api.ReasonStopped, api.ReasonTimeLimit, api.ReasonLost, api.ReasonImageDenied,
		api.ReasonNetworkDenied, api.ReasonVolumeDenied, api.ReasonScratchFull}
	if len(knownReasons) != len(want) {
		t.Fatalf("%d known reasons, want %d", len(knownReasons), len(want))
	}
	for i, r := range want {
		if c := reasonCode(r); c != byte(i+1) {
			t.Errorf("reasonCode(%q) = %d, want %d", r, c, i+1)
		}
		e := &enc{}
		e.byte(byte(i + 1))
		d := viewDec(e.b)
		if got := readReason(&d); got != r || d.done("reason") != nil {
			t.Errorf("code %d reads as %q (%v), want %q", i+1, got, d.done("reason"), r)
		}
	}
	now := time.Unix(1_800_000_000, 0)
	denied := []Report{{Node: "n1", TaskReport: &api.TaskReport{TaskID: "j1/0/0/1", State: api.TaskFailed, Reason: api.ReasonImageDenied, Time: now}}}
	spelled := &enc{}
	spelled.byte(0)
	spelled.str(string(api.ReasonImageDenied))
	cmd := UpdateTasks(now, denied)
	for _, tc := range []struct {
		name string
		cmd  []byte
	}{
		{"coded", cmd},
		{"spelled out", append(append(append([]byte{}, cmd[:len(cmd)-3]...), spelled.b...), cmd[len(cmd)-2:]...)},
		{"version 5", updateTasksV5(now, denied, 0)},
	} {
		d := viewDec(tc.cmd[2:])
		d.varint()
		got := readReports(&d, tc.cmd[1], nil)
		if err := d.done("update command"); err != nil || len(got) != 1 {
			t.Fatalf("%s: %d reports, %v", tc.name, len(got), err)
		}
		if got[0].reason != api.ReasonImageDenied || got[0].state != api.TaskFailed {
			t.Errorf("%s: read %v (%q), want failed (%q)", tc.name, got[0].state, got[0].reason, api.ReasonImageDenied)
		}
	}
	if len(cmd) != len(UpdateTasks(now, []Report{{Node: "n1", TaskReport: &api.TaskReport{TaskID: "j1/0/0/1", State: api.TaskFailed, Reason: api.ReasonLost, Time: now}}})) {
		t.Errorf("an image_denied report is not one byte of reason, as a coded reason is")
	}
}
