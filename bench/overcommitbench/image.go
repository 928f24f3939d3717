package overcommitbench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// modulePath is this module's path, which buildImage looks for in go.mod.
const modulePath = "github.com/sluicehq/sluice"

// buildImage builds the workload image into dir: examples/workload,
// static, as dir/workload, and the mount points a container needs. The
// source is this module's, found from the working directory upwards; it
// returns ErrNoImage when there is none.
func buildImage(ctx context.Context, dir string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	for _, d := range []string{"", "proc", "dev", "sys", "tmp", "etc"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return fmt.Errorf("overcommitbench: image: %w", err)
		}
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(dir, "workload"), "./examples/workload")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		if _, lerr := exec.LookPath("go"); lerr != nil {
			return fmt.Errorf("%w: %v", ErrNoImage, lerr)
		}
		return fmt.Errorf("overcommitbench: image: go build ./examples/workload in %s: %v\n%s", root, err, out)
	}
	return nil
}

// moduleRoot is the nearest directory at or above the working directory
// whose go.mod declares this module.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoImage, err)
	}
	for {
		if declares(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ErrNoImage
		}
		dir = parent
	}
}

// declares reports whether the go.mod at path declares this module.
func declares(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "module" {
			return f[1] == modulePath
		}
	}
	return false
}
