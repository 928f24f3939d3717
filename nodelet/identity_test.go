package nodelet_test

import (
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet"
	"github.com/sluicehq/sluice/nodelet/cgroup"
	"github.com/sluicehq/sluice/nodelet/runtime/sim"
)

// TestIdentityEnv: every pod's runtime spec carries the node's identity
// of it (api.EnvJobID and the others), the index and attempt read from its
// task ID; a capbox task gets its name and capbox instead; pods of one
// group that share their api spec still get their own; a task ID of
// another shape gets only what is known; a placeholder gets none. Only an
// appmaster's own pod gets its group's token: a capbox task never does,
// even when its group carries one.
func TestIdentityEnv(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	d := newFakeDispatcher()
	const addr = "http://127.0.0.1:7001,http://127.0.0.2:7001"
	newHarness(t, host, d, func(c *nodelet.Config) { c.Addr = addr })

	group := &nodelet.Group{Job: "j1", JobName: "etl.nightly", Name: "map", Count: 8, MaxRunTime: time.Hour}
	task := func(id, taskID string, g *nodelet.Group) nodelet.DesiredPod {
		p := simPod(id, 1, 0, 0)
		p.TaskID, p.Group = taskID, g
		return p
	}
	t3, t4 := task("t3", "j1/0/3/2", group), task("t4", "j1/0/4/1", group)
	t4.Pod = t3.Pod // one group's pods share their spec's memory
	boxed := task("boxed", "j2/1/0/1/train", &nodelet.Group{Job: "j2", JobName: "am", Name: "boxes", Count: 2, Token: "sjt1.not-for-tasks"})
	master := task("master", "j5/0/0/1", &nodelet.Group{Job: "j5", JobName: "am", Name: "master", Count: 1, Token: "sjt1.secret"})
	boxed.InCapbox = "box"
	box := nodelet.DesiredPod{ID: "box", TaskID: "j2/1/0/1", Generation: 1, Tier: cgroup.Offline, Capbox: true,
		Group: boxed.Group, Pod: &api.PodSpec{Containers: []api.ContainerSpec{{Name: "c0", Resources: api.Resources{CPU: 500, Memory: 256 << 20}}}}}
	plain := task("plain", "task-plain", nil)
	odd := task("odd", "j3/g/x/1", nil) // four segments, but not a dispatcher's
	d.setTarget(1, t3, t4, box, boxed, plain, odd, master)

	rt := sim.New(host)
	eventually(t, 5*time.Second, "every pod running", func() bool { return len(running(t, rt)) == 7 })
	want := map[string][]string{
		"t3": {"SLUICE_JOB_ID=j1", "SLUICE_JOB_NAME=etl.nightly", "SLUICE_GROUP=map", "SLUICE_TASK_ID=j1/0/3/2", "SLUICE_TASK_INDEX=3",
			"SLUICE_TASK_COUNT=8", "SLUICE_ATTEMPT=2", "SLUICE_NODE=n1", "SLUICE_ADDR=" + addr},
		"t4": {"SLUICE_JOB_ID=j1", "SLUICE_JOB_NAME=etl.nightly", "SLUICE_GROUP=map", "SLUICE_TASK_ID=j1/0/4/1", "SLUICE_TASK_INDEX=4",
			"SLUICE_TASK_COUNT=8", "SLUICE_ATTEMPT=1", "SLUICE_NODE=n1", "SLUICE_ADDR=" + addr},
		"boxed": {"SLUICE_JOB_ID=j2", "SLUICE_JOB_NAME=am", "SLUICE_GROUP=boxes", "SLUICE_TASK_ID=j2/1/0/1/train", "SLUICE_TASK_NAME=train",
			"SLUICE_CAPBOX=j2/1/0/1", "SLUICE_NODE=n1", "SLUICE_ADDR=" + addr},
		"plain": {"SLUICE_TASK_ID=task-plain", "SLUICE_NODE=n1", "SLUICE_ADDR=" + addr},
		"odd":   {"SLUICE_TASK_ID=j3/g/x/1", "SLUICE_NODE=n1", "SLUICE_ADDR=" + addr},
		"box":   nil,
		"master": {"SLUICE_JOB_ID=j5", "SLUICE_JOB_NAME=am", "SLUICE_GROUP=master", "SLUICE_TASK_ID=j5/0/0/1", "SLUICE_TASK_INDEX=0",
			"SLUICE_TASK_COUNT=1", "SLUICE_ATTEMPT=1", "SLUICE_NODE=n1", "SLUICE_ADDR=" + addr, "SLUICE_TOKEN=sjt1.secret"},
	}
	for id, env := range want {
		spec, err := rt.Spec(id)
		if err != nil {
			t.Fatalf("Spec(%s): %v", id, err)
		}
		if !slices.Equal(spec.Env, env) {
			t.Errorf("pod %s: env\n%q\nwant\n%q", id, spec.Env, env)
		}
		for _, c := range spec.Containers {
			if slices.ContainsFunc(c.Env, func(kv string) bool { return len(kv) > 7 && kv[:7] == api.EnvPrefix }) {
				t.Errorf("pod %s: container %s's own env has the node's variables: %q", id, c.Name, c.Env)
			}
		}
	}
	if _, err := rt.Spec("nope"); err == nil {
		t.Error("Spec of an unknown pod succeeded")
	}
}

// TestConfigAddr: an Addr that cannot be an environment value is refused.
func TestConfigAddr(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	_, err := nodelet.New(nodelet.Config{Node: "n", Runtime: sim.New(host), Dispatcher: newFakeDispatcher(), Addr: "http://a\x00"})
	if err == nil {
		t.Fatal("New(Addr with NUL) succeeded")
	}
}
