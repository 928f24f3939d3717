package nodelet

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/nodelet/cgroup"
)

// Tier limits the overcommit loop starts from (EnsureTiers). Online work
// is guaranteed: a high weight, no quota, no memory limit, and the loop
// never writes it. Offline work has a low weight and is marked idle
// (cgroup.Limits.CPUIdle) where the kernel can, so that online work waking
// preempts it at once rather than wait for its slice to end; the loop sets
// its quota and memory limit.
var (
	OnlineTierLimits  = cgroup.Limits{CPUQuotaUS: -1, CPUShares: 8192, MemoryLimit: -1}
	OfflineTierLimits = cgroup.Limits{CPUShares: 128, CPUIdle: 1, MemoryLimit: -1}
)

// EnsureTiers creates the tiers of mgr with OnlineTierLimits and
// OfflineTierLimits. On a kernel without cpu.idle the offline tier keeps
// only its low weight, and idle is false.
func EnsureTiers(mgr *cgroup.Manager) (idle bool, err error) {
	idle = true
	err = mgr.EnsureTiers(OnlineTierLimits, OfflineTierLimits)
	if errors.Is(err, cgroup.ErrUnsupported) {
		offline := OfflineTierLimits
		offline.CPUIdle = 0
		idle, err = false, mgr.EnsureTiers(OnlineTierLimits, offline)
	}
	if err != nil {
		return false, fmt.Errorf("nodelet: cgroup tiers under %s: %w", mgr.Root(), err)
	}
	return idle, nil
}
