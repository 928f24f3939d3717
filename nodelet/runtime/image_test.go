package runtime_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/nodelet/runtime"
)

// TestConfineImage checks the containment of image paths in a tree of
// real directories and links: a root, a second root reached through a
// link, a link inside a root leading out of it (to the host's root and to
// a sibling directory), and one leading to another image of the root.
func TestConfineImage(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(base, "images")
	outside := filepath.Join(base, "outside")
	realRoot2 := filepath.Join(base, "real-root2")
	root2 := filepath.Join(base, "root2") // a link to realRoot2
	for _, d := range []string{filepath.Join(root, "busybox", "bin"), filepath.Join(outside, "etc"), filepath.Join(realRoot2, "alpine")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		root2:                                realRoot2,
		filepath.Join(root, "host"):          "/",
		filepath.Join(root, "escape"):        "../outside",
		filepath.Join(root, "abs-escape"):    outside,
		filepath.Join(root, "busybox-again"): "busybox",
		filepath.Join(root, "self"):          ".",
		filepath.Join(root, "busybox", "up"): "../../outside/etc",
	}
	for link, to := range links {
		if err := os.Symlink(to, link); err != nil {
			t.Fatal(err)
		}
	}
	roots := []string{root, root2}
	for _, tc := range []struct {
		path, want string // want "" with denied or otherErr
		denied     bool
	}{
		{path: filepath.Join(root, "busybox"), want: filepath.Join(root, "busybox")},
		{path: filepath.Join(root, "busybox", "bin"), want: filepath.Join(root, "busybox", "bin")},
		{path: filepath.Join(root, "busybox-again"), want: filepath.Join(root, "busybox")},
		{path: filepath.Join(root2, "alpine"), want: filepath.Join(realRoot2, "alpine")},
		{path: filepath.Join(realRoot2, "alpine"), denied: true}, // named below no root as spelled
		{path: filepath.Join(root, "host"), denied: true},
		{path: filepath.Join(root, "escape"), denied: true},
		{path: filepath.Join(root, "abs-escape"), denied: true},
		{path: filepath.Join(root, "busybox", "up"), denied: true},
		{path: filepath.Join(root, "self"), denied: true}, // the root itself
		{path: root, denied: true},
		{path: root2, denied: true},
		{path: filepath.Join(outside, "etc"), denied: true},
		{path: "/", denied: true},
		{path: "/etc", denied: true},
		{path: root + "/../outside", denied: true},
		{path: root + "/busybox/", denied: true},
		{path: root + "//busybox", denied: true},
		{path: root + "/busybox/.", denied: true},
		{path: "images/busybox", denied: true},
		{path: root + "-evil/busybox", denied: true},
		{path: ""},
		{path: filepath.Join(root, "missing")},
	} {
		got, err := runtime.ConfineImage(roots, tc.path)
		var de *runtime.ImageDeniedError
		switch {
		case tc.denied:
			if !errors.Is(err, runtime.ErrImageDenied) || !errors.As(err, &de) || de.Path != tc.path || got != "" {
				t.Errorf("%q: %q, %v; want an image denied error", tc.path, got, err)
			}
		case tc.want != "":
			if err != nil || got != tc.want {
				t.Errorf("%q: %q, %v; want %q", tc.path, got, err, tc.want)
			}
		default:
			if err == nil || got != "" {
				t.Errorf("%q: %q, %v; want an error", tc.path, got, err)
			}
		}
	}
	// A path outside the roots is refused before the disk is read: a
	// missing one is denied, not reported missing.
	if _, err := runtime.ConfineImage(roots, filepath.Join(outside, "missing")); !errors.Is(err, runtime.ErrImageDenied) {
		t.Errorf("missing path outside the roots: %v, want image denied", err)
	}
	if _, err := runtime.ConfineImage(roots, filepath.Join(root, "missing")); !errors.Is(err, fs.ErrNotExist) || errors.Is(err, runtime.ErrImageDenied) {
		t.Errorf("missing path below a root: %v, want not exist", err)
	}
	// Whatever the roots, the host's root is never an image.
	if _, err := runtime.ConfineImage([]string{"/"}, filepath.Join(root, "host")); !errors.Is(err, runtime.ErrImageDenied) {
		t.Errorf("link to / with root /: %v, want image denied", err)
	}
	if _, err := runtime.ConfineImage([]string{"/"}, "/"); !errors.Is(err, runtime.ErrImageDenied) {
		t.Errorf("/ with root /: %v, want image denied", err)
	}
	// A root that does not resolve confines nothing.
	if _, err := runtime.ConfineImage([]string{filepath.Join(base, "gone")}, filepath.Join(base, "gone", "x")); err == nil {
		t.Error("path below a missing root accepted")
	}
}

func TestCheckImageRoots(t *testing.T) {
	if err := runtime.CheckImageRoots([]string{"/var/lib/sluice/images", "/srv/images"}); err != nil {
		t.Errorf("good roots: %v", err)
	}
	err := runtime.CheckImageRoots([]string{"/", "rel", "/a/../b", "/a/", "/ok"})
	if err == nil {
		t.Fatal("bad roots accepted")
	}
	for _, want := range []string{`"/"`, `"rel"`, `"/a/../b"`, `"/a/"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if strings.Contains(err.Error(), `"/ok"`) {
		t.Errorf("error %q names the good root", err)
	}
	if runtime.CheckImageRoots(nil) == nil {
		t.Error("no roots accepted")
	}
}

// TestSpecErrorWrapsProblemErrors checks that a spec error is both
// ErrBadSpec and the sentinel of each problem that has one.
func TestSpecErrorWrapsProblemErrors(t *testing.T) {
	var e runtime.SpecError
	e.Add("containers[0].args", "a command is required")
	if err := e.Err(); !errors.Is(err, runtime.ErrBadSpec) || errors.Is(err, runtime.ErrImageDenied) {
		t.Errorf("plain problem: %v", err)
	}
	e.AddErr(runtime.ErrImageDenied, "containers[1].image.rootfs", "/etc is not below an image root")
	err := e.Err()
	if !errors.Is(err, runtime.ErrBadSpec) || !errors.Is(err, runtime.ErrImageDenied) {
		t.Errorf("denied problem: %v is not both ErrBadSpec and ErrImageDenied", err)
	}
	if want := "containers[1].image.rootfs: /etc is not below an image root"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not hold %q", err, want)
	}
}
