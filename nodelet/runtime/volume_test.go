package runtime_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet/runtime"
)

func TestParseVolumeRoots(t *testing.T) {
	roots, err := runtime.ParseVolumeRoots([]string{"/srv/data", "/srv/out:rw", "/srv/in:ro"})
	want := []runtime.VolumeRoot{{Path: "/srv/data"}, {Path: "/srv/out", Writable: true}, {Path: "/srv/in"}}
	if err != nil || !slices.Equal(roots, want) {
		t.Errorf("ParseVolumeRoots = %v, %v; want %v", roots, err, want)
	}
	_, err = runtime.ParseVolumeRoots([]string{"srv", "/", "/a/../b", "/x:rx", "/d", "/d:rw"})
	for _, w := range []string{`"srv"`, `"/"`, `"/a/../b"`, `"/x:rx"`, `"/d:rw": given twice`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("ParseVolumeRoots error %v lacks %s", err, w)
		}
	}
}

// TestResolveHostPath covers every refusal, each naming the path, and
// what an allowed path resolves to.
func TestResolveHostPath(t *testing.T) {
	top := t.TempDir()
	ro, rw, outside := filepath.Join(top, "data"), filepath.Join(top, "out"), filepath.Join(top, "secret")
	for _, d := range []string{ro, rw, outside, filepath.Join(ro, "in"), filepath.Join(rw, "ro-inside")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, to := range map[string]string{
		filepath.Join(ro, "escape"):   outside,
		filepath.Join(ro, "relative"): "../secret",
		filepath.Join(ro, "inner"):    "in",
	} {
		if err := os.Symlink(to, link); err != nil {
			t.Fatal(err)
		}
	}
	roots := []runtime.VolumeRoot{{Path: ro}, {Path: rw, Writable: true}, {Path: filepath.Join(rw, "ro-inside")}}

	v, err := runtime.ResolveHostPath(roots, "in", filepath.Join(ro, "inner"), false)
	if err != nil || v.HostPath != filepath.Join(ro, "in") || v.HostRoot != ro || !v.ReadOnly || v.Name != "in" {
		t.Errorf("link inside the root: %+v, %v", v, err)
	}
	v, err = runtime.ResolveHostPath(roots, "out", rw, true)
	if err != nil || v.HostPath != rw || v.ReadOnly {
		t.Errorf("writable root: %+v, %v", v, err)
	}
	if err := (&runtime.PodSpec{ID: "p", Volumes: []runtime.Volume{v}, Containers: []runtime.ContainerSpec{{Name: "c", Image: api.Image{Rootfs: "/i"}, Args: []string{"/x"}}}}).Validate(); err != nil {
		t.Errorf("a resolved volume does not validate: %v", err)
	}

	for _, c := range []struct {
		name     string
		roots    []runtime.VolumeRoot
		path     string
		writable bool
		want     string
	}{
		{"no roots", nil, filepath.Join(ro, "in"), false, "this node has no volume roots"},
		{"dot-dot", roots, ro + "/in/../../secret", false, "is not a clean absolute path"},
		{"relative", roots, "data/in", false, "is not a clean absolute path"},
		{"outside every root", roots, outside, false, "is not below a volume root"},
		{"symlink escape", roots, filepath.Join(ro, "escape"), false, "leads out of the volume root " + ro + " through a symbolic link"},
		{"relative symlink escape", roots, filepath.Join(ro, "relative"), false, "leads out of the volume root"},
		{"writable under read-only root", roots, filepath.Join(ro, "in"), true, "is below the read-only volume root " + ro},
		{"writable under a read-only root inside a writable one", roots, filepath.Join(rw, "ro-inside"), true, "read-only volume root"},
		{"missing", roots, filepath.Join(ro, "nothing"), false, "does not exist"},
	} {
		_, err := runtime.ResolveHostPath(c.roots, "vol", c.path, c.writable)
		var de *runtime.VolumeDeniedError
		if !errors.Is(err, runtime.ErrVolumeDenied) || !errors.As(err, &de) {
			t.Errorf("%s: err = %v, want ErrVolumeDenied", c.name, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, c.path) || !strings.Contains(msg, c.want) || !strings.Contains(msg, `volume "vol"`) {
			t.Errorf("%s: message %q lacks the volume, the path or %q", c.name, msg, c.want)
		}
	}
}

func TestValidateVolumes(t *testing.T) {
	s := runtime.PodSpec{
		ID:          "p",
		ResourceDir: "/var/res",
		Volumes: []runtime.Volume{
			{Name: "a", ScratchSize: 1 << 20},
			{Name: "a", ScratchSize: 1 << 20},
			{Name: "both", ScratchSize: 1, HostPath: "/x", HostRoot: "/"},
			{Name: "neither"},
			{Name: "neg", ScratchSize: -1},
			{Name: "unclean", HostPath: "/srv/../etc", HostRoot: "/srv"},
			{Name: "noroot", HostPath: "/srv/x"},
			{Name: "outside", HostPath: "/etc", HostRoot: "/srv"},
		},
		Containers: []runtime.ContainerSpec{{
			Name: "c", Image: api.Image{Rootfs: "/i"}, Args: []string{"/x"},
			Mounts: []runtime.Mount{
				{Volume: "a", Path: "/w"},
				{Volume: "a", Path: "/w"},
				{Volume: "ghost", Path: "/g"},
				{Volume: "a", Path: "/"},
				{Volume: "a", Path: "w"},
				{Volume: "a", Path: "/proc/x"},
				{Volume: "a", Path: "/run/sluice"},
			},
		}},
	}
	err := s.Validate()
	for _, w := range []string{
		`volumes[1].name: duplicate volume name "a"`,
		"volumes[2]: must be only one of scratch and host path",
		"volumes[3]: must be scratch (a positive size) or a host path",
		"volumes[4].scratch_size: must not be negative",
		"volumes[5].host_path: must be a clean absolute path",
		"volumes[6].host_root: must be a clean absolute path",
		"volumes[7].host_path: /etc is not below its root /srv",
		"containers[0].mounts[1].path: another mount of the container is at /w",
		`containers[0].mounts[2].volume: no volume "ghost" in the pod`,
		"containers[0].mounts[3].path: must not be the container's root",
		"containers[0].mounts[4].path: must be a clean absolute path",
		"containers[0].mounts[5].path: /proc/x:",
		"containers[0].mounts[6].path: /run/sluice:",
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Validate error lacks %q:\n%v", w, err)
		}
	}
	ph := runtime.PodSpec{ID: "p", Placeholder: true, Volumes: []runtime.Volume{{Name: "a", ScratchSize: 1}}, Containers: []runtime.ContainerSpec{{Name: "c"}}}
	if err := ph.Validate(); err == nil || !strings.Contains(err.Error(), "a placeholder has no volumes") {
		t.Errorf("placeholder with volumes: %v", err)
	}
}

func TestFromAPIVolumes(t *testing.T) {
	p := &api.PodSpec{
		Volumes: []api.Volume{
			{Name: "work", Scratch: &api.ScratchVolume{Size: 1 << 30}},
			{Name: "data", HostPath: &api.HostPathVolume{Path: "/srv/data", ReadOnly: true}},
		},
		Containers: []api.ContainerSpec{{Name: "c", Image: api.Image{Rootfs: "/i"}, Command: []string{"/x"},
			Mounts: []api.Mount{{Volume: "work", Path: "/work"}, {Volume: "data", Path: "/data", ReadOnly: true}}}},
	}
	s := runtime.FromAPI("p", 1, "", p)
	wantV := []runtime.Volume{{Name: "work", ScratchSize: 1 << 30}, {Name: "data", HostPath: "/srv/data", ReadOnly: true}}
	wantM := []runtime.Mount{{Volume: "work", Path: "/work"}, {Volume: "data", Path: "/data", ReadOnly: true}}
	if !slices.Equal(s.Volumes, wantV) || !slices.Equal(s.Containers[0].Mounts, wantM) {
		t.Errorf("FromAPI: volumes %+v, mounts %+v", s.Volumes, s.Containers[0].Mounts)
	}
	// Unresolved, the host path does not validate.
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "volumes[1].host_root") {
		t.Errorf("Validate of an unresolved host path: %v", err)
	}
}

// TestResolveHostPaths: a volume is writable when a container mounts it
// writable; every refusal is named at once, and the spec is left as it
// was; the resolved volumes are the spec's own.
func TestResolveHostPaths(t *testing.T) {
	top := t.TempDir()
	for _, d := range []string{"in", "out"} {
		if err := os.Mkdir(filepath.Join(top, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	roots := []runtime.VolumeRoot{{Path: filepath.Join(top, "in")}, {Path: filepath.Join(top, "out"), Writable: true}}
	shared := []runtime.Volume{
		{Name: "in", HostPath: filepath.Join(top, "in")},
		{Name: "out", HostPath: filepath.Join(top, "out")},
		{Name: "work", ScratchSize: 1 << 20},
	}
	s := runtime.PodSpec{Volumes: shared, Containers: []runtime.ContainerSpec{
		{Mounts: []runtime.Mount{{Volume: "in", Path: "/in", ReadOnly: true}, {Volume: "out", Path: "/out"}}},
		{Mounts: []runtime.Mount{{Volume: "in", Path: "/in", ReadOnly: true}}},
	}}
	if err := s.ResolveHostPaths(roots); err != nil {
		t.Fatal(err)
	}
	if !s.Volumes[0].ReadOnly || s.Volumes[1].ReadOnly || s.Volumes[0].HostRoot != roots[0].Path || s.Volumes[2] != shared[2] {
		t.Errorf("resolved %+v", s.Volumes)
	}
	if shared[0].HostRoot != "" {
		t.Error("ResolveHostPaths changed the shared volumes")
	}
	// A writable mount of the read-only root, and a path outside: both named.
	s = runtime.PodSpec{Volumes: []runtime.Volume{
		{Name: "in", HostPath: filepath.Join(top, "in")},
		{Name: "etc", HostPath: "/etc", ReadOnly: true},
	}, Containers: []runtime.ContainerSpec{{Mounts: []runtime.Mount{{Volume: "in", Path: "/in"}, {Volume: "etc", Path: "/etc"}}}}}
	err := s.ResolveHostPaths(roots)
	if !errors.Is(err, runtime.ErrVolumeDenied) || !strings.Contains(err.Error(), `volume "in"`) || !strings.Contains(err.Error(), `volume "etc"`) || strings.Contains(err.Error(), "\n") {
		t.Errorf("ResolveHostPaths = %v, want one line naming both volumes", err)
	}
	if s.Volumes[0].HostRoot != "" {
		t.Error("a refused spec was changed")
	}
}
