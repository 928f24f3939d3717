package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
)

// TestHostPathExample keeps examples/host-path.json showing what it is
// there for: a read-only host path for the input and a writable one for
// the result, both mounted by the task's container.
func TestHostPathExample(t *testing.T) {
	jobs := readHostPathExample(t)
	if len(jobs) != 1 || len(jobs[0].Tasks) != 1 {
		t.Fatalf("example holds %d jobs, want one with one task group", len(jobs))
	}
	pod := jobs[0].Tasks[0].Pod
	var ro, rw int
	for _, v := range pod.Volumes {
		switch {
		case v.HostPath == nil:
		case v.HostPath.ReadOnly:
			ro++
		default:
			rw++
		}
	}
	if ro != 1 || rw != 1 || len(pod.Containers) != 1 || len(pod.Containers[0].Mounts) != 2 {
		t.Errorf("example pod %+v: want a read-only and a writable host path, both mounted", pod)
	}
}

func readHostPathExample(t *testing.T) []api.JobSpec {
	t.Helper()
	b, err := os.ReadFile("../../examples/host-path.json")
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := api.DecodeJobs(b)
	if err != nil {
		t.Fatalf("examples/host-path.json: %v", err)
	}
	return jobs
}

// TestContainerVolumesEndToEnd runs examples/host-path.json, its host
// paths moved to the test's own directories, on a container node with
// volume roots: it reads its input and leaves its result on the host. Two
// more jobs show the reasons a user sees in the task listing: a pod
// writing past its scratch volume fails as scratch_full, and a host path
// outside the node's roots as volume_denied.
func TestContainerVolumesEndToEnd(t *testing.T) {
	needContainers(t)
	image := demoImage(t)
	ctx, srv, logger := startE2EDispatcher(t)

	top := t.TempDir()
	input, results, outside := filepath.Join(top, "input"), filepath.Join(top, "results"), filepath.Join(top, "outside")
	for _, d := range []string{input, results, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(input, "numbers.txt"), []byte("100 1000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	startE2ENodelet(ctx, t, srv, logger, nodeletConfig{
		name: "node-vol", runtime: "container", noPodNetwork: true, stateDir: state,
		imageRoots: []string{filepath.Dir(image)}, volumeRoots: []string{input, results + ":rw"},
		cpu: 2000, memory: 1 << 30, disk: 1 << 30, removePods: true, retainExited: time.Minute,
	}, func() {
		if ents, err := os.ReadDir(filepath.Join(state, "scratch")); err == nil && len(ents) != 0 {
			t.Errorf("scratch left behind: %v", entryNames(ents))
		}
	})
	client := e2eClient(ctx, t, srv, 1)

	example := readHostPathExample(t)[0]
	pod := &example.Tasks[0].Pod
	for i := range pod.Volumes {
		if v := pod.Volumes[i].HostPath; v != nil && v.ReadOnly {
			v.Path = input
		} else if v != nil {
			v.Path = results
		}
	}
	pod.Containers[0].Image.Rootfs = image
	once := api.RetryPolicy{MaxAttempts: 1}
	example.Retry = once
	work := func(size int64, args ...string) api.PodSpec {
		return api.PodSpec{
			Volumes: []api.Volume{{Name: "work", Scratch: &api.ScratchVolume{Size: size}}},
			Containers: []api.ContainerSpec{{Name: "main", Image: api.Image{Rootfs: image},
				Command: append([]string{"/workload"}, args...), Resources: api.Resources{CPU: 250, Memory: 32 << 20},
				Mounts: []api.Mount{{Volume: "work", Path: "/work"}}}},
		}
	}
	// tally writes its result to the scratch volume, which holds 2 MiB:
	// an input of 140,000 numbers makes a result of 2.4 MB.
	full := work(2<<20, "tally", "/input/many.txt", "/work/out.txt")
	full.Volumes = append(full.Volumes, api.Volume{Name: "input", HostPath: &api.HostPathVolume{Path: input, ReadOnly: true}})
	full.Containers[0].Mounts = append(full.Containers[0].Mounts, api.Mount{Volume: "input", Path: "/input"})
	many := []byte(strings.Repeat("2 ", 140_000))
	if err := os.WriteFile(filepath.Join(input, "many.txt"), many, 0o644); err != nil {
		t.Fatal(err)
	}
	denied := work(1<<20, "sleep", "1s")
	denied.Volumes = append(denied.Volumes, api.Volume{Name: "secret", HostPath: &api.HostPathVolume{Path: outside, ReadOnly: true}})
	res, err := client.Submit(ctx, []api.JobSpec{
		example,
		{Name: "overflow", Retry: once, Tasks: []api.TaskGroupSpec{{Count: 1, Pod: full}}},
		{Name: "outside", Retry: once, Tasks: []api.TaskGroupSpec{{Count: 1, Pod: denied}}},
	}, api.SubmitOptions{})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	tallyJob, fullJob, deniedJob := res.Jobs[0], res.Jobs[1], res.Jobs[2]
	ended := func(s api.TaskStatus) bool { return s.State.Done() }

	if s := waitOneTask(ctx, t, client, tallyJob, ended); s.State != api.TaskSucceeded {
		t.Errorf("example task %+v, want succeeded", s)
	}
	if b, err := os.ReadFile(filepath.Join(results, "primes.txt")); err != nil || string(b) != "25 primes up to 100\n168 primes up to 1000\n" {
		t.Errorf("result on the host: %q, %v", b, err)
	}
	if s := waitOneTask(ctx, t, client, fullJob, ended); s.State != api.TaskFailed || s.Reason != api.ReasonScratchFull {
		var out bytes.Buffer
		err := client.Logs(ctx, s.ID, api.LogOptions{}, &out)
		t.Errorf("overflowing task %+v, want failed as %s; its output: %q, %v", s, api.ReasonScratchFull, out.String(), err)
	}
	if s := waitOneTask(ctx, t, client, deniedJob, ended); s.State != api.TaskFailed || s.Reason != api.ReasonVolumeDenied {
		t.Errorf("task with a host path outside the roots %+v, want failed as %s", s, api.ReasonVolumeDenied)
	}
}
