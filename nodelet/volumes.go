package nodelet

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet/runtime"
)

// resolveVolumes resolves the host path volumes of spec against the
// node's volume roots (runtime.ResolveHostPath), whatever the runtime: a
// volume is writable when it is not read-only and a container mounts it
// writable. It gives spec a Volumes slice of its own (spec may share its
// slices with other pods' specs). The error names every volume refused;
// it is a runtime.ErrVolumeDenied one.
func (a *Agent) resolveVolumes(spec *runtime.PodSpec) error {
	if len(spec.Volumes) == 0 {
		return nil
	}
	vols := slices.Clone(spec.Volumes)
	var denied volumeErrors
	for i := range vols {
		v := &vols[i]
		if v.HostPath == "" {
			continue
		}
		writable := !v.ReadOnly && slices.ContainsFunc(spec.Containers, func(c runtime.ContainerSpec) bool {
			return slices.ContainsFunc(c.Mounts, func(m runtime.Mount) bool { return m.Volume == v.Name && !m.ReadOnly })
		})
		r, err := runtime.ResolveHostPath(a.cfg.VolumeRoots, v.Name, v.HostPath, writable)
		if err != nil {
			denied = append(denied, err)
			continue
		}
		*v = r
	}
	if len(denied) > 0 {
		return denied
	}
	spec.Volumes = vols
	return nil
}

// volumeErrors are the refusals of a pod's volumes, in one line.
type volumeErrors []error

func (e volumeErrors) Error() string {
	s := make([]string, len(e))
	for i, err := range e {
		s[i] = err.Error()
	}
	return strings.Join(s, "; ")
}

func (e volumeErrors) Unwrap() []error { return e }

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
