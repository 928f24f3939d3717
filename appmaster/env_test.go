package appmaster_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/appmaster"
	"github.com/sluicehq/sluice/dispatcher/server"
)

// TestAttachFromEnvMissing: each variable not set is named, all at once;
// a missing job ID is also ErrNoJob; a Config.Client is refused.
func TestAttachFromEnvMissing(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		env     map[string]string
		missing []string
		noJob   bool
	}{
		{map[string]string{}, []string{api.EnvAddr, api.EnvToken, api.EnvJobID}, true},
		{map[string]string{api.EnvAddr: "http://127.0.0.1:1", api.EnvJobID: "j1"}, []string{api.EnvToken}, false},
		{map[string]string{api.EnvToken: "t", api.EnvJobID: "j1"}, []string{api.EnvAddr}, false},
		{map[string]string{api.EnvAddr: "http://127.0.0.1:1", api.EnvToken: "t"}, []string{api.EnvJobID}, true},
	} {
		for _, name := range []string{api.EnvAddr, api.EnvToken, api.EnvJobID} {
			t.Setenv(name, c.env[name])
		}
		_, err := appmaster.AttachFromEnv(ctx, appmaster.Config{}, nil)
		if !errors.Is(err, appmaster.ErrNoEnv) || errors.Is(err, appmaster.ErrNoJob) != c.noJob {
			t.Fatalf("env %v: %v, want ErrNoEnv (and ErrNoJob: %v)", c.env, err, c.noJob)
		}
		if want := strings.Join(c.missing, ", ") + " not set"; !strings.Contains(err.Error(), want) {
			t.Errorf("env %v: %v, want it to say %q", c.env, err, want)
		}
		// Attach without a client and a job is the same.
		if _, err2 := appmaster.Attach(ctx, appmaster.Config{}, "", nil); err2 == nil || err2.Error() != err.Error() {
			t.Errorf("Attach without a client: %v, want %v", err2, err)
		}
	}
	c, err := api.NewClient(api.ClientConfig{Addrs: []string{"http://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := appmaster.AttachFromEnv(ctx, appmaster.Config{Client: c}, nil); err == nil || !strings.Contains(err.Error(), "must be nil") {
		t.Errorf("AttachFromEnv with a client: %v", err)
	}
}

// TestAttachFromEnv runs an appmaster as its pod would, with only the
// environment its node gives it: its job token leases a capbox, runs a
// task in it and releases it, through the SDK and its watch; what the
// token may not do (the nodes, another job's capboxes) is refused.
func TestAttachFromEnv(t *testing.T) {
	keys, err := server.NewJobKeys([]byte(strings.Repeat("k", server.MinJobKeyLen)))
	if err != nil {
		t.Fatal(err)
	}
	admin, s := clusterKeys(t, 1, keys)
	ctx := context.Background()
	spec := api.JobSpec{Name: "am", Appmaster: true, Tasks: []api.TaskGroupSpec{{Name: "master", Count: 1, Pod: simTask(100, time.Hour, 0)}}}
	res, err := admin.Submit(ctx, []api.JobSpec{spec, spec}, api.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job, other := res.Jobs[0], res.Jobs[1]
	facts, ok := s.FSM().JobFacts(job)
	if !ok {
		t.Fatal("no job")
	}
	t.Setenv(api.EnvAddr, "http://127.0.0.9:1, "+s.Addr())
	t.Setenv(api.EnvToken, keys.Token(job, facts.Submitted))
	t.Setenv(api.EnvJobID, job)
	am, err := appmaster.AttachFromEnv(ctx, appmaster.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer am.Close()
	if am.Job() != job {
		t.Fatalf("attached to %s, want %s", am.Job(), job)
	}
	run(t, am)
	boxes := newRecorder()
	if _, err := am.CreateCapboxes(ctx, api.CapboxRequest{Name: "w", Count: 1, Resources: api.Resources{CPU: 500, Memory: 256 << 20}}, boxes); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the capbox to run", func() bool { n, _ := boxes.counts(); return n == 1 })
	tasks := newTaskRecorder()
	id, err := am.StartTask(ctx, boxes.running[0], "step", simTask(200, 10*time.Millisecond, 0), tasks)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the task to end", func() bool { _, ok := tasks.done(id); return ok })
	if st, _ := tasks.done(id); st.State != api.TaskSucceeded {
		t.Errorf("task %s ended %s", id, st.State)
	}
	if err := am.Release(ctx, boxes.running[0]); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the capbox to complete", func() bool { _, n := boxes.counts(); return n == 1 })
	if _, err := am.Nodes(ctx); api.ErrorCode(err) != api.CodeForbidden {
		t.Errorf("Nodes with a job token: %v, want forbidden", err)
	}
	t.Setenv(api.EnvJobID, other)
	am2, err := appmaster.AttachFromEnv(ctx, appmaster.Config{}, nil)
	if api.ErrorCode(err) != api.CodeForbidden || !strings.Contains(err.Error(), "job token of "+job) {
		t.Errorf("attach to another job with this token: %v, want forbidden", err)
	}
	if am2 != nil {
		am2.Close()
	}
}
