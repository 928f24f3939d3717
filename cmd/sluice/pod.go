package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet/runtime"
	"github.com/sluicehq/sluice/nodelet/runtime/container"
)

func newPodCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "pod",
		Short: "Run pods on this host, without a dispatcher",
		Args:  usageArgs(cobra.NoArgs),
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	c.AddCommand(newPodRunCmd())
	return c
}

// podRunConfig is what `pod run` takes from its flags.
type podRunConfig struct {
	stateDir     string
	imageDir     string
	imageRoots   []string
	volumeRoots  []string
	cgroupParent string
	id           string
	grace        time.Duration
}

func newPodRunCmd() *cobra.Command {
	var cfg podRunConfig
	c := &cobra.Command{
		Use:   "run SPEC.json|-",
		Short: "Run one pod in containers on this host and exit with its status",
		Long: `Run decodes one pod spec (a pod object, or a job whose single task group
holds it), validates it as the dispatcher would, and runs it on this host in
containers through the nodelet's container runtime. It streams the
containers' output (stdout and stderr together) to stdout, each line
prefixed with its container's name when the pod has several, and exits with
the exit code of the pod's first container. Ctrl-C stops the pod (SIGTERM,
then SIGKILL after --grace) and cleans up. It needs root. As on a nodelet,
images (rootfs and oci_layout paths) must lie below one of --image-roots,
after symbolic links, and host path volumes below one of --volume-roots.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			body, err := readInput(c.InOrStdin(), args[0])
			if err != nil {
				return err
			}
			p, err := decodePod(c.ErrOrStderr(), body)
			if err != nil {
				return err
			}
			return runPod(c.Context(), cfg, p, c.OutOrStdout())
		},
	}
	f := c.Flags()
	f.StringVar(&cfg.stateDir, "state-dir", container.DefaultStateDir, "directory of the runtime's pod state and logs")
	f.StringVar(&cfg.imageDir, "image-dir", container.DefaultImageDir, "cache of unpacked OCI layout images")
	f.StringSliceVar(&cfg.imageRoots, "image-roots", nil, "directories images must lie below, comma-separated (default: --image-dir)")
	f.StringSliceVar(&cfg.volumeRoots, "volume-roots", nil, "host directories host path volumes must lie below, comma-separated: PATH read-only, PATH:rw writable (default: none, every host path refused)")
	f.StringVar(&cfg.cgroupParent, "cgroup-parent", "sluice/online", "cgroup the pod's cgroup goes under")
	f.StringVar(&cfg.id, "id", "", "pod ID (default: run-<random>)")
	f.DurationVar(&cfg.grace, "grace", 10*time.Second, "time between SIGTERM and SIGKILL when interrupted")
	return c
}

// decodePod decodes a pod object or a one-group job with api's decoder, so
// that defaults and validation are the dispatcher's. Problems are printed
// to w.
func decodePod(w io.Writer, body []byte) (*api.PodSpec, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, fmt.Errorf("read spec: want one JSON object: %w", err)
	}
	_, isPod := top["containers"]
	if isPod {
		wrapped := make([]byte, 0, len(body)+64)
		wrapped = append(wrapped, `{"name":"pod-run","tasks":[{"count":1,"pod":`...)
		wrapped = append(wrapped, body...)
		body = append(wrapped, "}]}"...)
	}
	jobs, err := api.DecodeJobs(body)
	var ve *api.ValidationError
	if isPod && errors.As(err, &ve) {
		// Name the paths within the pod the user wrote.
		for i := range ve.Problems {
			p := &ve.Problems[i]
			p.Path = strings.TrimPrefix(strings.TrimPrefix(p.Path, "jobs[0].tasks[0].pod"), ".")
		}
	}
	if err != nil {
		return nil, report(w, "", err)
	}
	if len(jobs) != 1 || len(jobs[0].Tasks) != 1 {
		return nil, errors.New("read spec: want one pod, or a job with one task group")
	}
	return &jobs[0].Tasks[0].Pod, nil
}

func runPod(ctx context.Context, cfg podRunConfig, p *api.PodSpec, stdout io.Writer) error {
	if cfg.id == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		cfg.id = "run-" + hex.EncodeToString(b[:])
	}
	roots, err := runtime.ParseVolumeRoots(cfg.volumeRoots)
	if err != nil {
		return usageError{fmt.Errorf("--volume-roots: %w", err)}
	}
	spec := runtime.FromAPI(cfg.id, 1, cfg.cgroupParent, p)
	if err := spec.ResolveHostPaths(roots); err != nil {
		return err
	}
	rt, err := container.New(container.Config{StateDir: cfg.stateDir, ImageDir: cfg.imageDir, ImageRoots: cfg.imageRoots})
	if err != nil {
		return err
	}
	defer rt.Close()
	// The pod's lifetime is not ctx's: an interrupt stops it gracefully.
	bg := context.WithoutCancel(ctx)
	if err := rt.Start(bg, spec); err != nil {
		return err
	}
	defer func() { _ = rt.Remove(bg, spec.ID) }()

	var wg sync.WaitGroup
	var mu sync.Mutex // one line at a time on stdout
	for _, c := range spec.Containers {
		rc, err := rt.Logs(bg, spec.ID, c.Name, runtime.LogOptions{Follow: true})
		if err != nil {
			_ = rt.Stop(bg, spec.ID, 0)
			return err
		}
		prefix := ""
		if len(spec.Containers) > 1 {
			prefix = "[" + c.Name + "] "
		}
		wg.Go(func() {
			defer rc.Close()
			r := bufio.NewReader(rc)
			for {
				line, err := r.ReadBytes('\n')
				if len(line) > 0 {
					mu.Lock()
					_, _ = io.WriteString(stdout, prefix)
					_, _ = stdout.Write(line)
					mu.Unlock()
				}
				if err != nil {
					return
				}
			}
		})
	}
	exit, err := rt.Wait(ctx, spec.ID)
	if err != nil {
		// Interrupted: stop the pod, then report the interruption.
		if serr := rt.Stop(bg, spec.ID, cfg.grace); serr != nil {
			err = errors.Join(err, serr)
		}
		wg.Wait()
		return err
	}
	wg.Wait() // the followers end with the pod
	switch {
	case exit.Err != nil:
		return fmt.Errorf("pod %s: %w", spec.ID, exit.Err)
	case exit.Code != 0:
		msg := fmt.Errorf("pod %s: container %s exited with code %d", spec.ID, spec.Containers[0].Name, exit.Code)
		if exit.OOMKilled {
			msg = fmt.Errorf("%w (OOM-killed)", msg)
		}
		if len(exit.ScratchFull) > 0 {
			msg = fmt.Errorf("%w (scratch full: %s)", msg, strings.Join(exit.ScratchFull, ", "))
		}
		return exitStatusError{code: exit.Code, err: msg}
	}
	return nil
}
