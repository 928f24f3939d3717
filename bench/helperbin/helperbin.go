package helperbin

import (
	"os"
	"os/exec"
	"path/filepath"
)

// Find returns path if it is set, else the executable called name beside
// the running executable (bin/NAME beside bin/sluice), else the one on
// PATH; ok is false when there is none.
func Find(name, path string) (found string, ok bool) {
	if path != "" {
		return path, true
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, true
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, true
	}
	return "", false
}
