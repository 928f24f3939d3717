package nodelet

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet/runtime"
)

// scratchFullMessage says why pod p, which ended as e with its scratch
// volumes e.ScratchFull full, failed.
func scratchFullMessage(p *api.PodSpec, e *runtime.Exit) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exited with code %d with its scratch ", e.Code)
	if len(e.ScratchFull) == 1 {
		b.WriteString("volume ")
	} else {
		b.WriteString("volumes ")
	}
	for i, name := range e.ScratchFull {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", name)
		if j := slices.IndexFunc(p.Volumes, func(v api.Volume) bool { return v.Name == name }); j >= 0 && p.Volumes[j].Scratch != nil {
			fmt.Fprintf(&b, " (%d bytes)", p.Volumes[j].Scratch.Size)
		}
	}
	b.WriteString(" full: writes past a scratch volume's size fail with \"no space left on device\"")
	return b.String()
}
