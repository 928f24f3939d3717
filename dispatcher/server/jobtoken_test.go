package server_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/server"
)

const (
	testJobKey  = "0123456789abcdef0123456789abcdef-one"
	otherJobKey = "0123456789abcdef0123456789abcdef-two"
)

func jobKeys(t testing.TB, keys ...string) *server.JobKeys {
	t.Helper()
	var b [][]byte
	for _, k := range keys {
		b = append(b, []byte(k))
	}
	k, err := server.NewJobKeys(b...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// appmasterJSON is an appmaster job whose one task (the appmaster's
// program) runs an hour on a simulated node.
func appmasterJSON(name string) string {
	return fmt.Sprintf(`{"name":%q,"appmaster":true,"retry":{"max_attempts":1},"tasks":[{"name":"master","count":1,"pod":{"sim":{"run_time":"1h"},"containers":[{"image":{"rootfs":"/r"},"command":["am"],"resources":{"cpu":100,"memory":"1Mi"}}]}}]}`, name)
}

// targetPods long-polls node n1's target as its nodelet (token nl), with
// query, until pred holds of its pods.
func targetPods(t *testing.T, base, query string, pred func([]api.TargetPod) bool) ([]api.TargetPod, string) {
	t.Helper()
	var pods []api.TargetPod
	var body string
	waitFor(t, 10*time.Second, "the target", func() bool {
		r := do(t, req{method: "GET", url: base + api.PathNode + "n1/target?wait=0s" + query, token: "nl"})
		if r.status != 200 {
			return false
		}
		tg, err := api.DecodeNodeTarget(r.body)
		if err != nil {
			t.Fatalf("target %s: %v", r.body, err)
		}
		pods, body = tg.Pods, string(r.body)
		return pred(pods)
	})
	return pods, body
}

func podToken(pods []api.TargetPod, job string) string {
	for _, p := range pods {
		if p.Job == job && !p.Capbox && p.InCapbox == "" {
			return p.Token
		}
	}
	return ""
}

// TestJobTokenDelivery: the pod of an appmaster job's task group gets its
// job's token in its node's target, when the node asks for the pods'
// identity; no other pod does, no other reply shows it, and tokens are
// the same from every read and differ from job to job.
func TestJobTokenDelivery(t *testing.T) {
	s := openOneWith(t, func(c *server.Config) {
		c.Tokens, c.JobKeys = parseTokens(t, tokenFile), jobKeys(t, testJobKey)
	})
	base := s.Addr()
	if r := do(t, req{method: "POST", url: base + api.PathNodes, token: "nl", body: []byte(nodeJSON("n1", ""))}); r.status != 200 {
		t.Fatalf("register: %s", r)
	}
	ids := submit(t, base, "adm", "["+appmasterJSON("am-a")+","+appmasterJSON("am-b")+","+jobJSON("plain", "", 1)+"]", nil).Jobs
	a, b, plain := ids[0], ids[1], ids[2]
	pods, _ := targetPods(t, base, "&identity=1", func(p []api.TargetPod) bool { return len(p) == 3 })
	ta, tb := podToken(pods, a), podToken(pods, b)
	if !strings.HasPrefix(ta, server.JobTokenPrefix) || !strings.HasPrefix(tb, server.JobTokenPrefix) || ta == tb {
		t.Fatalf("appmaster pods' tokens %q and %q: want two different job tokens", ta, tb)
	}
	if tp := podToken(pods, plain); tp != "" {
		t.Fatalf("a plain job's pod got token %q", tp)
	}
	again, _ := targetPods(t, base, "&identity=1&diff=1", func([]api.TargetPod) bool { return true })
	if podToken(again, a) != ta {
		t.Errorf("a second read gave %s's pod token %q, want %q", a, podToken(again, a), ta)
	}
	_, bare := targetPods(t, base, "", func(p []api.TargetPod) bool { return len(p) == 3 })
	if strings.Contains(bare, `"token"`) {
		t.Errorf("a target read without identity=1 has tokens: %s", bare)
	}
	// No reply but the node's target shows a token.
	for _, path := range []string{api.PathJobs, api.PathJob + a, api.PathJob + a + "/tasks", api.PathJob + a + "/capboxes", api.PathNodes} {
		if r := do(t, req{method: "GET", url: base + path, token: "adm"}); r.status != 200 || strings.Contains(string(r.body), server.JobTokenPrefix) {
			t.Errorf("GET %s: %d, shows a token: %v", path, r.status, strings.Contains(string(r.body), server.JobTokenPrefix))
		}
	}
	// Another replica with the same key makes the same token.
	facts, ok := s.FSM().JobFacts(a)
	if !ok || jobKeys(t, testJobKey).Token(a, facts.Submitted) != ta {
		t.Errorf("JobKeys.Token(%s) differs from the target's", a)
	}
}

// TestJobTokenScope checks a job token against every endpoint: it may read
// its job, its tasks and its part of the watch stream, use its capboxes
// and cancel its job; everything else, and everything of another job, is
// a 403 that says why; a forged or altered token, a token of a job that
// is not an appmaster, and a token once its job has ended, a 401.
func TestJobTokenScope(t *testing.T) {
	keys := jobKeys(t, testJobKey)
	s := openOneWith(t, func(c *server.Config) { c.Tokens, c.JobKeys = parseTokens(t, tokenFile), keys })
	base := s.Addr()
	if r := do(t, req{method: "POST", url: base + api.PathNodes, token: "nl", body: []byte(nodeJSON("n1", ""))}); r.status != 200 {
		t.Fatalf("register: %s", r)
	}
	ids := submit(t, base, "adm", "["+appmasterJSON("am-a")+","+appmasterJSON("am-b")+","+jobJSON("plain", "", 1)+"]", nil).Jobs
	a, b, plain := ids[0], ids[1], ids[2]
	pods, _ := targetPods(t, base, "&identity=1", func(p []api.TargetPod) bool { return len(p) == 3 })
	tok, tokB := podToken(pods, a), podToken(pods, b)
	bSets := decode[api.CreateCapboxesResponse](t, do(t, req{method: "POST", url: base + api.PathJob + b + "/capboxes", token: tokB,
		body: []byte(`{"name":"w","count":1,"resources":{"cpu":"100m","memory":"1Mi"}}`)}), 200).Sets

	// What it may do.
	created := decode[api.CreateCapboxesResponse](t, do(t, req{method: "POST", url: base + api.PathJob + a + "/capboxes", token: tok,
		body: []byte(`{"name":"w","count":2,"resources":{"cpu":"100m","memory":"1Mi"}}`)}), 200)
	box := created.Sets[0] + "/0/0/1"
	allowed := []struct {
		method, path, body string
		status             int
		// also is another status the FSM may answer, by the time of
		// the request.
		also int
	}{
		{"GET", api.PathJob + a, "", 200, 0},
		{"GET", api.PathJob + a + "/tasks", "", 200, 0},
		{"GET", api.PathJob + a + "/capboxes", "", 200, 0},
		// Refused by the FSM, not by the token: the capbox is not placed
		// yet (404) or, if a round placed it meanwhile, not running (409).
		{"POST", api.PathJob + a + "/captasks", `{"capbox":"` + box + `","name":"t","pod":{"containers":[{"image":{"rootfs":"/r"},"command":["x"],"resources":{"cpu":1,"memory":1}}]}}`, 404, 409},
		{"DELETE", api.PathJob + a + "/captasks?id=" + box + "/t", "", 404, 0},
		{"DELETE", api.PathJob + a + "/capboxes?id=" + created.Sets[0] + "/0/1/1", "", 200, 0},
	}
	for _, c := range allowed {
		var body []byte
		if c.body != "" {
			body = []byte(c.body)
		}
		if r := do(t, req{method: c.method, url: base + c.path, token: tok, body: body}); r.status != c.status && (c.also == 0 || r.status != c.also) {
			t.Errorf("%s %s with %s's token: %s, want %d", c.method, c.path, a, r, c.status)
		}
	}
	w := startWatch(t, base+api.PathWatch, tok)
	waitFor(t, 10*time.Second, "the job token's watch to show its capbox set", func() bool {
		_, ok := w.latest(created.Sets[0])
		return ok
	})
	for _, other := range []string{b, plain, bSets[0]} {
		if _, ok := w.latest(other); ok {
			t.Errorf("the job token's watch shows job %s, not its own", other)
		}
	}

	// What it may not do: 403, naming the token's job.
	capbox := `{"name":"x","count":1,"resources":{"cpu":1,"memory":1}}`
	forbidden := []struct{ method, path, body string }{
		{"GET", api.PathJobs, ""},
		{"POST", api.PathJobs, jobJSON("x", "", 1)},
		{"POST", api.PathJobs, appmasterJSON("x")},
		{"GET", api.PathJob + b, ""},
		{"GET", api.PathJob + plain, ""},
		{"GET", api.PathJob + bSets[0], ""},
		{"GET", api.PathJob + b + "/tasks", ""},
		{"DELETE", api.PathJob + b, ""},
		{"DELETE", api.PathJob + plain, ""},
		{"GET", api.PathJob + b + "/capboxes", ""},
		{"POST", api.PathJob + b + "/capboxes", capbox},
		{"DELETE", api.PathJob + b + "/capboxes?id=" + bSets[0] + "/0/0/1", ""},
		{"POST", api.PathJob + b + "/captasks", `{"capbox":"` + bSets[0] + `/0/0/1","name":"t","pod":{"containers":[]}}`},
		{"DELETE", api.PathJob + b + "/captasks?id=" + bSets[0] + "/0/0/1/t", ""},
		{"GET", api.PathJob + created.Sets[0], ""}, // its capbox set is read through its capboxes
		{"GET", api.PathNodes, ""},
		{"POST", api.PathNodes, nodeJSON("n9", "")},
		{"GET", api.PathNode + "n1/target?wait=0s", ""},
		{"POST", api.PathNode + "n1/reports", `{"reports":[]}`},
		{"GET", api.PathTasks + a + "/0/0/1/logs", ""},
	}
	for _, c := range forbidden {
		var body []byte
		if c.body != "" {
			body = []byte(c.body)
		}
		r := do(t, req{method: c.method, url: base + c.path, token: tok, body: body})
		errorReply(t, r, 403, api.CodeForbidden, "job token of "+a)
	}
	// Refused at the header, its body unread.
	rc := dialRaw(t, s)
	rc.send(t, "POST", api.PathJobs, bigDeclared(tok), nil)
	r, err := rc.reply(5 * time.Second)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	errorReply(t, r, 403, api.CodeForbidden, "job token of "+a)
	if !rc.closedAfter(5 * time.Second) {
		t.Error("the connection stayed open with the declared body unread")
	}

	// Forged and altered tokens, and tokens of jobs that are no appmaster.
	facts, _ := s.FSM().JobFacts(plain)
	flip := func(s string, i int) string {
		c := byte('A')
		if s[i] == 'A' {
			c = 'B'
		}
		return s[:i] + string(c) + s[i+1:]
	}
	withJob := func(tok, job string) string {
		parts := strings.Split(tok, ".")
		parts[2] = job
		return strings.Join(parts, ".")
	}
	for name, bad := range map[string]string{
		"last character altered":     flip(tok, len(tok)-1),
		"first MAC character":        flip(tok, len(tok)-43),
		"another job's ID":           withJob(tok, b),
		"a job that does not exist":  withJob(tok, "j999"),
		"made with another key":      jobKeys(t, otherJobKey).Token(a, mustFacts(t, s, a)),
		"key ID altered":             flip(tok, len(server.JobTokenPrefix)),
		"a plain job's":              keys.Token(plain, facts.Submitted),
		"a job that does not exist,": keys.Token("j999", 0),
		"another submit time":        keys.Token(a, mustFacts(t, s, a)+1),
		"truncated":                  tok[:len(tok)-1],
		"extended":                   tok + "A",
		"just the prefix":            server.JobTokenPrefix,
		"no MAC":                     server.JobTokenPrefix + "00000000." + a + ".",
	} {
		t.Run(name, func(t *testing.T) {
			r := do(t, req{method: "GET", url: base + api.PathJob + a, token: bad})
			errorReply(t, r, 401, api.CodeUnauthorized, "unknown token")
			if !strings.Contains(r.header.Get("WWW-Authenticate"), "invalid_token") {
				t.Errorf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
			}
		})
	}

	// It may cancel its own job; its token dies with it, and its watch
	// stream ends.
	if r := do(t, req{method: "DELETE", url: base + api.PathJob + a, token: tok}); r.status != 200 {
		t.Fatalf("the job token cancels its job: %s", r)
	}
	select {
	case <-w.done:
	case <-time.After(10 * time.Second):
		t.Error("the job token's watch stream did not end with its job")
	}
	for _, c := range allowed {
		errorReply(t, do(t, req{method: c.method, url: base + c.path, token: tok}), 401, api.CodeUnauthorized, "expired")
	}
	// The other appmaster's ends when its task does.
	now := time.Now().UTC().Format(time.RFC3339Nano)
	task := b + "/0/0/1"
	for _, st := range []string{`"state":"running","reason":"started"`, `"state":"succeeded","reason":"exited"`} {
		if r := do(t, req{method: "POST", url: base + api.PathNode + "n1/reports", token: "nl",
			body: []byte(`{"reports":[{"task_id":"` + task + `",` + st + `,"time":"` + now + `"}]}`)}); r.status != 204 {
			t.Fatalf("report: %s", r)
		}
	}
	waitFor(t, 10*time.Second, b+" to succeed", func() bool {
		j := decode[api.JobStatus](t, do(t, req{method: "GET", url: base + api.PathJob + b, token: "adm"}), 200)
		return j.State == api.JobSucceeded
	})
	errorReply(t, do(t, req{method: "GET", url: base + api.PathJob + b + "/capboxes", token: tokB}), 401, api.CodeUnauthorized, "expired")
	// And no pod gets a token of an ended job.
	if _, body := targetPods(t, base, "&identity=1", func([]api.TargetPod) bool { return true }); strings.Contains(body, server.JobTokenPrefix) {
		t.Errorf("a target holds a token of an ended job: %s", body)
	}
}

func mustFacts(t *testing.T, s *server.Server, job string) int64 {
	t.Helper()
	f, ok := s.FSM().JobFacts(job)
	if !ok {
		t.Fatalf("no job %s", job)
	}
	return f.Submitted
}

// TestJobTokenWithoutTokenFile: with job keys but no token file, requests
// without a token act as admin, and a job token is still held to its job.
func TestJobTokenWithoutTokenFile(t *testing.T) {
	keys := jobKeys(t, testJobKey)
	s := openOneWith(t, func(c *server.Config) { c.JobKeys = keys })
	base := s.Addr()
	a := submit(t, base, "", appmasterJSON("am"), nil).Jobs[0]
	tok := keys.Token(a, mustFacts(t, s, a))
	if r := do(t, req{method: "GET", url: base + api.PathJob + a, token: tok}); r.status != 200 {
		t.Fatalf("GET its job: %s", r)
	}
	errorReply(t, do(t, req{method: "GET", url: base + api.PathNodes, token: tok}), 403, api.CodeForbidden, "job token of "+a)
	errorReply(t, do(t, req{method: "GET", url: base + api.PathNodes, token: tok[:len(tok)-2] + "xx"}), 401, api.CodeUnauthorized, "unknown token")
	if r := do(t, req{method: "GET", url: base + api.PathNodes}); r.status != 200 {
		t.Fatalf("GET nodes without a token: %s", r)
	}
	// Without job keys, a job token is just an unknown token.
	s2 := openOne(t, parseTokens(t, tokenFile))
	errorReply(t, do(t, req{method: "GET", url: s2.Addr() + api.PathJobs, token: tok}), 401, api.CodeUnauthorized, "unknown token")
}

// TestJobKeysRotation: a token made with a key is accepted by a replica
// that holds that key in any place, and refused by one that does not.
func TestJobKeysRotation(t *testing.T) {
	old := jobKeys(t, testJobKey)
	s := openOneWith(t, func(c *server.Config) { c.JobKeys = jobKeys(t, otherJobKey, testJobKey) })
	a := submit(t, s.Addr(), "", appmasterJSON("am"), nil).Jobs[0]
	submitted := mustFacts(t, s, a)
	for name, tok := range map[string]string{"old key": old.Token(a, submitted), "new key": jobKeys(t, otherJobKey).Token(a, submitted)} {
		if r := do(t, req{method: "GET", url: s.Addr() + api.PathJob + a, token: tok}); r.status != 200 {
			t.Errorf("%s: %s", name, r)
		}
	}
	third := jobKeys(t, "0123456789abcdef0123456789abcdef-three").Token(a, submitted)
	errorReply(t, do(t, req{method: "GET", url: s.Addr() + api.PathJob + a, token: third}), 401, api.CodeUnauthorized, "unknown token")
}

func TestParseJobKeys(t *testing.T) {
	k, err := server.ParseJobKeys(strings.NewReader("# keys\n\n  " + testJobKey + "  \n" + otherJobKey + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tok := k.Token("j1", 5); tok != jobKeys(t, testJobKey).Token("j1", 5) {
		t.Errorf("the first key does not make the tokens: %s", tok)
	}
	for _, bad := range []struct{ text, want string }{
		{"", "no key"},
		{"# only a comment\n", "no key"},
		{"short\n", "line 1: a key is at least 32 bytes"},
		{testJobKey + "\n" + testJobKey + "\n", "key 2 repeats"},
	} {
		if _, err := server.ParseJobKeys(strings.NewReader(bad.text)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ParseJobKeys(%q) = %v, want an error with %q", bad.text, err, bad.want)
		}
	}
	if _, err := server.LoadJobKeys(tempFile(t, "keys", testJobKey+"\n")); err != nil {
		t.Errorf("LoadJobKeys: %v", err)
	}
	if _, err := server.LoadJobKeys("/nonexistent/keys"); err == nil {
		t.Error("LoadJobKeys of a missing file succeeded")
	}
	if _, err := server.ParseTokens(strings.NewReader(server.JobTokenPrefix + "abc admin\n")); err == nil || !strings.Contains(err.Error(), "job tokens start with") {
		t.Errorf("a token file token with the job token prefix: %v", err)
	}
	// A token is printable and JSON-safe as it is.
	tok := k.Token("j18446744073709551615", -1)
	if b, _ := json.Marshal(tok); string(b) != `"`+tok+`"` || strings.ContainsAny(tok, " \t\n") {
		t.Errorf("token %q", tok)
	}
}
