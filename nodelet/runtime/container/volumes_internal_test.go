package container

import (
	"testing"

	"github.com/sluicehq/sluice/nodelet/runtime"
)

func TestMentionsMount(t *testing.T) {
	cs := []runtime.ContainerSpec{{Mounts: []runtime.Mount{{Volume: "work", Path: "/work"}, {Volume: "data", Path: "/data"}}}}
	for line, want := range map[string]bool{
		"workload: tally: write /work/out.txt.tmp: no space left on device":        true,
		"dd: error writing '/work/big': No space left on device":                   true,
		"OSError: [Errno 28] No space left on device: '/work'":                     true,
		"write /workspace/x: no space left on device":                              false,
		"write /data/work/x: no space left on device":                              false,
		"write /tmp/x: no space left on device, while /work was fine":              true,
		"no space left on device":                                                  false,
		"write /data/work/x: no space left on device; also /work/y: no space left": true,
	} {
		if got := mentionsMount([]string{line}, cs, "work"); got != want {
			t.Errorf("%q: %v, want %v", line, got, want)
		}
	}
}
