package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/internal/porttest"
)

// membersSeedEnv replays one seed of TestMembersReplaceUnderLoad.
const membersSeedEnv = "SLUICE_SEED"

// runMembers runs `sluice dispatcher members ARGS -o json --addr ADDRS`
// and decodes the member list it prints.
func runMembers(ctx context.Context, addrs []string, args ...string) (api.MemberList, error) {
	var out, errb bytes.Buffer
	full := append([]string{"dispatcher", "members"}, args...)
	full = append(full, "-o", "json", "--addr", strings.Join(addrs, ","))
	if err := run(ctx, full, &out, &errb); err != nil {
		return api.MemberList{}, fmt.Errorf("sluice %s: %w (stderr %q)", strings.Join(full, " "), err, errb.String())
	}
	var list api.MemberList
	if err := json.Unmarshal(out.Bytes(), &list); err != nil {
		return list, fmt.Errorf("sluice %s printed %q: %w", strings.Join(full, " "), out.String(), err)
	}
	return list, nil
}

// memberChangeWindow is when a membership change ran.
type memberChangeWindow struct {
	name     string
	from, to time.Time
}

// latencySummary gives the count, median, p99 and max of ds.
func latencySummary(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no request"
	}
	slices.Sort(ds)
	at := func(p float64) time.Duration {
		return ds[min(len(ds)-1, int(p*float64(len(ds))))].Round(100 * time.Microsecond)
	}
	return fmt.Sprintf("%d requests, latency p50 %v, p99 %v, max %v", len(ds), at(0.5), at(0.99), ds[len(ds)-1].Round(100*time.Microsecond))
}

// memberSet is the IDs of list's voters and learners, as "1 2 4".
func memberSet(list api.MemberList) string {
	var ids []string
	for _, m := range list.Members {
		s := strconv.FormatUint(m.ID, 10)
		if m.Learner {
			s += "(learner)"
		}
		ids = append(ids, s)
	}
	return strings.Join(ids, " ")
}

// TestMembersReplaceUnderLoad replaces two of the three replicas of a
// cluster of `sluice dispatcher` processes (raft over loopback TCP, pebble
// on disk) while clients submit, with `sluice dispatcher members`: replica
// 4 joins and a follower (chosen by the seed) is removed, then replica 5
// joins and the leader is removed (it hands its leadership over first).
// Every acknowledged job must be on each replica of the new membership,
// the new ones included, and no job committed twice.
func TestMembersReplaceUnderLoad(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(membersSeedEnv); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", membersSeedEnv, v, err)
		}
		seed = s
	}
	t.Logf("seed %d (replay with %s=%d)", seed, membersSeedEnv, seed)
	rng := rand.New(rand.NewPCG(seed, seed>>1|1))
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	exe, err := os.Executable()
	if err != nil {
		t.Skipf("cannot find the test binary: %v", err)
	}

	reps := startDispatcherProcs(t, 3)
	for _, r := range reps {
		waitProcReady(ctx, t, r)
	}
	// Replicas 4 and 5 are started later, empty, with --join.
	ports := porttest.Ports(t, 4)
	joiners := map[int]*dispatcherProc{}
	raftAddr := map[int]string{}
	for i, id := range []int{4, 5} {
		httpAddr := "127.0.0.1:" + strconv.Itoa(ports[2+i])
		raftAddr[id] = "127.0.0.1:" + strconv.Itoa(ports[i])
		joiners[id] = &dispatcherProc{id: id, httpAddr: httpAddr, base: "http://" + httpAddr, dir: t.TempDir(), out: &syncBuffer{}}
	}
	t.Cleanup(func() {
		for _, r := range joiners {
			out := r.out.String()
			if strings.Contains(out, "WARNING: DATA RACE") || strings.Contains(out, "panic: ") {
				t.Errorf("replica %d reported a data race or a panic", r.id)
			}
			if t.Failed() {
				t.Logf("output of replica %d (%s):\n%s", r.id, r.base, out)
			}
		}
	})
	all := []*dispatcherProc{reps[0], reps[1], reps[2], joiners[4], joiners[5]}
	var bases []string
	for _, r := range all {
		bases = append(bases, r.base)
	}
	byID := func(id uint64) *dispatcherProc { return all[id-1] }

	list, err := runMembers(ctx, bases, "list")
	if err != nil {
		t.Fatal(err)
	}
	if memberSet(list) != "1 2 3" || list.Leader == 0 {
		t.Fatalf("initial members: %+v", list)
	}
	for _, m := range list.Members {
		if m.URL != byID(m.ID).base {
			t.Fatalf("member %d has URL %q, want %q", m.ID, m.URL, byID(m.ID).base)
		}
	}

	// The load: clients submit batches of a seeded size, each retried
	// with its idempotency key until acknowledged, until told to stop.
	const clients = 3
	var (
		stop      = make(chan struct{})
		wg        sync.WaitGroup
		mu        sync.Mutex
		acked     = map[string]string{} // job ID → name
		reqTimes  [][2]time.Time        // sent and acknowledged, of each request (retries included)
		changes   []memberChangeWindow
		ackedReqs atomic.Int64
		retries   atomic.Int64
		clientErr = make([]error, clients)
	)
	sizes := make([][]int, clients)
	for c := range sizes {
		for range 2000 {
			sizes[c] = append(sizes[c], 1+rng.IntN(20))
		}
	}
	loadCtx, loadCancel := context.WithTimeout(ctx, 40*time.Second)
	defer loadCancel()
	for c := range clients {
		wg.Go(func() {
			cl, err := api.NewClient(api.ClientConfig{Addrs: bases, Timeout: 5 * time.Second})
			if err != nil {
				clientErr[c] = err
				return
			}
			defer cl.Close()
			for r, n := range sizes[c] {
				select {
				case <-stop:
					return
				default:
				}
				q := newFailoverRequest(c, r, n)
				sent := time.Now()
				for attempt := 1; ; attempt++ {
					res, err := cl.SubmitBody(loadCtx, q.body, "application/json", api.SubmitOptions{IdempotencyKey: q.key})
					if err == nil {
						if len(res.Jobs) != n {
							clientErr[c] = fmt.Errorf("%s: %d jobs acknowledged, want %d", q.key, len(res.Jobs), n)
							return
						}
						mu.Lock()
						for i, id := range res.Jobs {
							acked[id] = failoverJobName(c, r, i)
						}
						reqTimes = append(reqTimes, [2]time.Time{sent, time.Now()})
						mu.Unlock()
						ackedReqs.Add(1)
						break
					}
					if code := api.ErrorCode(err); code == api.CodeInvalid || code == api.CodeTooLarge {
						clientErr[c] = fmt.Errorf("%s: %w", q.key, err)
						return
					}
					if loadCtx.Err() != nil {
						clientErr[c] = fmt.Errorf("%s not acknowledged after %d attempts: %w", q.key, attempt, err)
						return
					}
					retries.Add(1)
					time.Sleep(time.Duration(10*attempt) * time.Millisecond)
				}
			}
		})
	}
	waitAcked := func(n int64) {
		t.Helper()
		for ackedReqs.Load() < n {
			if loadCtx.Err() != nil {
				t.Fatalf("only %d requests acknowledged, want %d", ackedReqs.Load(), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitAcked(60)

	// join starts replica id empty and adds it with the CLI.
	join := func(id int) {
		t.Helper()
		r := joiners[id]
		peers := []string{fmt.Sprintf("%d=%s", id, raftAddr[id])}
		for _, m := range list.Members {
			peers = append(peers, fmt.Sprintf("%d=%s", m.ID, m.RaftAddr))
		}
		r.args = []string{"dispatcher", "--id", strconv.Itoa(id), "--join", "--peers", strings.Join(peers, ","),
			"--data", r.dir, "--http-addr", r.httpAddr, "--log-level", "info"}
		r.start(t, exe)
		before, began := ackedReqs.Load(), time.Now()
		if list, err = runMembers(ctx, bases, "add", strconv.Itoa(id), raftAddr[id], r.base); err != nil {
			t.Fatalf("add %d: %v", id, err)
		}
		changes = append(changes, memberChangeWindow{fmt.Sprintf("add %d", id), began, time.Now()})
		t.Logf("replica %d added in %v (learner, caught up, voter): members %s, leader %d; %d requests acknowledged meanwhile",
			id, time.Since(began).Round(time.Millisecond), memberSet(list), list.Leader, ackedReqs.Load()-before)
	}
	// remove removes replica id with the CLI and kills its process.
	remove := func(id uint64) {
		t.Helper()
		before, began := ackedReqs.Load(), time.Now()
		if list, err = runMembers(ctx, bases, "remove", strconv.FormatUint(id, 10)); err != nil {
			t.Fatalf("remove %d: %v", id, err)
		}
		if slices.ContainsFunc(list.Members, func(m api.Member) bool { return m.ID == id }) {
			t.Fatalf("replica %d still a member after its removal: %s", id, memberSet(list))
		}
		took := time.Since(began)
		changes = append(changes, memberChangeWindow{fmt.Sprintf("remove %d", id), began, time.Now()})
		r := byID(id)
		_ = r.cmd.Process.Kill()
		<-r.done
		t.Logf("replica %d removed in %v, then stopped: members %s, leader %d; %d requests acknowledged meanwhile",
			id, took.Round(time.Millisecond), memberSet(list), list.Leader, ackedReqs.Load()-before)
	}

	join(4)
	if memberSet(list) != "1 2 3 4" {
		t.Fatalf("members after adding 4: %s", memberSet(list))
	}
	var followers []uint64
	for _, m := range list.Members {
		if m.ID <= 3 && m.ID != list.Leader {
			followers = append(followers, m.ID)
		}
	}
	follower := followers[rng.IntN(len(followers))]
	remove(follower)
	waitAcked(ackedReqs.Load() + 60)

	join(5)
	if len(list.Members) != 4 {
		t.Fatalf("members after adding 5: %s", memberSet(list))
	}
	for list.Leader == 0 {
		time.Sleep(50 * time.Millisecond)
		if list, err = runMembers(ctx, bases, "list"); err != nil {
			t.Fatal(err)
		}
	}
	leader := list.Leader
	remove(leader)
	waitAcked(ackedReqs.Load() + 60)
	close(stop)
	wg.Wait()
	if err := errors.Join(clientErr...); err != nil {
		t.Fatalf("clients: %v", err)
	}
	t.Logf("load stopped after %v: %d requests, %d jobs acknowledged, %d retries; removed %d (a follower) and %d (the leader)",
		time.Since(start).Round(time.Millisecond), ackedReqs.Load(), len(acked), retries.Load(), follower, leader)
	// Request latency before the first change (the anchor) and during
	// each change.
	var steady []time.Duration
	for _, q := range reqTimes {
		if q[1].Before(changes[0].from) {
			steady = append(steady, q[1].Sub(q[0]))
		}
	}
	t.Logf("before the changes: %s", latencySummary(steady))
	for _, w := range changes {
		var during []time.Duration
		for _, q := range reqTimes {
			if q[0].Before(w.to) && q[1].After(w.from) {
				during = append(during, q[1].Sub(q[0]))
			}
		}
		t.Logf("during %s (%v): %s", w.name, w.to.Sub(w.from).Round(time.Millisecond), latencySummary(during))
	}

	// The new membership: the old replica left, 4 and 5.
	if list, err = runMembers(ctx, bases, "list"); err != nil {
		t.Fatal(err)
	}
	if len(list.Members) != 3 || !strings.Contains(memberSet(list), "4 5") || strings.Contains(memberSet(list), "(learner)") {
		t.Fatalf("final members: %s", memberSet(list))
	}
	// Every acknowledged job is on every member, read locally on each
	// once it has applied the log, and none was committed twice.
	for _, m := range list.Members {
		r := byID(m.ID)
		cl, err := api.NewClient(api.ClientConfig{Addrs: []string{r.base}, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		var jobs []api.JobStatus
		for {
			jobs, err = listJobsPaged(ctx, cl, false)
			if err == nil && len(jobs) >= len(acked) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("replica %d lists %d jobs (%v), want at least %d", m.ID, len(jobs), err, len(acked))
			}
			time.Sleep(50 * time.Millisecond)
		}
		cl.Close()
		names := map[string]string{}
		have := map[string]bool{}
		for _, j := range jobs {
			if prev, dup := names[j.Spec.Name]; dup {
				t.Errorf("replica %d: job %s committed twice: %s and %s", m.ID, j.Spec.Name, prev, j.ID)
			}
			names[j.Spec.Name] = j.ID
			have[j.ID] = true
		}
		lost := 0
		for id, name := range acked {
			if !have[id] {
				if lost++; lost <= 5 {
					t.Errorf("replica %d: acknowledged job %s (%s) is missing", m.ID, id, name)
				}
			}
		}
		if lost > 0 {
			t.Errorf("replica %d: %d of %d acknowledged jobs missing", m.ID, lost, len(acked))
		}
		t.Logf("replica %d has all %d acknowledged jobs (%d committed)", m.ID, len(acked), len(jobs))
	}
	t.Logf("done after %v", time.Since(start).Round(time.Millisecond))
}

// TestMembersCLI checks what the members commands send and print, and
// their refusals: bad arguments are usage errors (exit 2), the server's
// errors are shown as it said them (exit 1).
func TestMembersCLI(t *testing.T) {
	list := api.MemberList{Leader: 2, Members: []api.Member{
		{ID: 1, RaftAddr: "10.0.0.1:7000", URL: "http://10.0.0.1:8080"},
		{ID: 2, RaftAddr: "10.0.0.2:7000", URL: "http://10.0.0.2:8080", Leader: true},
		{ID: 4, RaftAddr: "10.0.0.4:7000", Learner: true},
	}}
	s := startStub(t, func(ctx *fasthttp.RequestCtx, r stubReq) {
		switch {
		case r.method == "GET" && r.path == api.PathMembers:
			reply(ctx, 200, list)
		case r.method == "POST" && r.path == api.PathMembers && strings.Contains(string(r.body), `"id":2,`):
			reply(ctx, 409, api.ErrorResponse{Code: api.CodeConflict, Error: "add replica 2: replica 2 is a member already (raft address 10.0.0.2:7000)"})
		case r.method == "POST" && r.path == api.PathMembers:
			reply(ctx, 200, list)
		case r.method == "DELETE" && r.path == api.PathMember+"9":
			reply(ctx, 404, api.ErrorResponse{Code: api.CodeNotFound, Error: "remove replica 9: it is not a member"})
		case r.method == "DELETE" && r.path == api.PathMember+"3":
			reply(ctx, 200, list)
		default:
			reply(ctx, 404, api.ErrorResponse{Code: api.CodeNotFound, Error: "no route"})
		}
	})
	out, _, code, err := runCmd(t, "dispatcher", "members", "list", "--addr", s.url)
	want := "ID  ROLE     RAFT ADDRESS   URL\n" +
		"1   voter    10.0.0.1:7000  http://10.0.0.1:8080\n" +
		"2   leader   10.0.0.2:7000  http://10.0.0.2:8080\n" +
		"4   learner  10.0.0.4:7000  -\n"
	if code != exitOK || out != want {
		t.Errorf("members list: exit %d (%v), stdout\n%s\nwant\n%s", code, err, out, want)
	}
	if _, _, code, err := runCmd(t, "dispatcher", "members", "add", "4", "10.0.0.4:7000", "http://10.0.0.4:8080", "--addr", s.url); code != exitOK {
		t.Errorf("members add: exit %d (%v)", code, err)
	}
	if _, _, code, err := runCmd(t, "dispatcher", "members", "remove", "3", "--addr", s.url, "-o", "json"); code != exitOK {
		t.Errorf("members remove: exit %d (%v)", code, err)
	}
	got := s.requests()
	var add api.AddMemberRequest
	if len(got) != 3 || json.Unmarshal(got[1].body, &add) != nil || add != (api.AddMemberRequest{ID: 4, RaftAddr: "10.0.0.4:7000", URL: "http://10.0.0.4:8080"}) ||
		got[1].ctype != "application/json" || got[2].method != "DELETE" || got[2].path != api.PathMember+"3" {
		t.Errorf("requests: %+v", got)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"add", "2", "10.0.0.2:7000", "http://10.0.0.2:8080"}, exitError, "replica 2 is a member already (raft address 10.0.0.2:7000) (HTTP 409, conflict)"},
		{[]string{"remove", "9"}, exitError, "remove replica 9: it is not a member (HTTP 404, not_found)"},
		{[]string{"remove", "0"}, exitUsage, `"0" is not a replica ID`},
		{[]string{"remove", "x"}, exitUsage, `"x" is not a replica ID`},
		{[]string{"remove"}, exitUsage, "accepts 1 arg"},
		{[]string{"add", "4", "10.0.0.4:7000"}, exitUsage, "accepts 3 arg"},
		{[]string{"add", "-4", "10.0.0.4:7000", "http://x:1"}, exitUsage, "unknown shorthand flag"},
		{[]string{"list", "extra"}, exitUsage, "unknown command"},
	} {
		_, _, code, err := runCmd(t, append(append([]string{"dispatcher", "members"}, tc.args...), "--addr", s.url)...)
		if code != tc.code || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("members %q: exit %d, %v; want exit %d and %q", tc.args, code, err, tc.code, tc.want)
		}
	}
}

// TestDispatcherJoinFlag: --join needs this replica's raft address and
// another member's in --peers.
func TestDispatcherJoinFlag(t *testing.T) {
	for _, args := range [][]string{
		{"--join"},
		{"--join", "--id", "4", "--peers", "4=127.0.0.1:7004"},
		{"--join", "--id", "4", "--peers", "1=127.0.0.1:7001,2=127.0.0.1:7002"},
	} {
		err := run(context.Background(), append([]string{"dispatcher", "--data", t.TempDir()}, args...), io.Discard, io.Discard)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--join: --peers must hold this replica's raft address") {
			t.Errorf("dispatcher %q = %v, want a usage error about --join", args, err)
		}
	}
}
