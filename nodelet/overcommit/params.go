package overcommit

import (
	"errors"
	"fmt"
	"time"
)

// Params are the controller's knobs. A zero field means its documented
// default; Validate reports every problem at once.
type Params struct {
	// CPUWatermark is the safe host CPU utilization (0..1]. Default 0.80.
	CPUWatermark float64
	// CPUDeadband: the offline quota grows only while utilization is below
	// CPUWatermark-CPUDeadband, and holds inside the band. Default 0.05.
	CPUDeadband float64
	// OfflineCPUMinMillis is offline's guaranteed CPU floor, never reduced
	// further (no starvation). Default max(100, 5% of host capacity).
	OfflineCPUMinMillis int64
	// OfflineCPUMaxMillis bounds the offline quota. Default: host capacity.
	OfflineCPUMaxMillis int64
	// OfflineCPUInitMillis is the quota before the first step. Default: the
	// minimum.
	OfflineCPUInitMillis int64
	// CPUGrowFactor and CPUGrowStepMillis: under the watermark the quota
	// grows by max(quota*(factor-1), step), but never by more than the
	// headroom under the watermark. Defaults 1.25 and 100.
	CPUGrowFactor     float64
	CPUGrowStepMillis int64
	// CPUShrinkFactor: above the watermark the quota becomes
	// min(quota*factor, quota-excess), floored at the minimum. Default 0.5.
	CPUShrinkFactor float64

	// MemWatermark bounds lending: the offline limit never lets projected
	// host memory use exceed MemWatermark*MemTotal (beyond offline's
	// guarantee). It is lower than the CPU one because memory is not
	// elastic. Default 0.70.
	MemWatermark float64
	// OfflineMemGuaranteedBytes is offline's guaranteed memory. Default:
	// the sum of the offline pods' memory requests.
	OfflineMemGuaranteedBytes int64
	// Idle online memory (online requests minus online working set) is lent
	// at MemLendRatio up to MemLendKnee*MemTotal, and at MemLendRatioAbove
	// beyond: the borrowing ratio falls as borrowing grows. Defaults 0.8,
	// 0.10, 0.3.
	MemLendRatio      float64
	MemLendKnee       float64
	MemLendRatioAbove float64
	// KillFreeFraction: when MemAvailable stays below
	// KillFreeFraction*MemTotal for KillGrace, offline pods are killed.
	// Defaults 0.05 and 5s.
	KillFreeFraction float64
	KillGrace        time.Duration

	// EWMAAlpha is the weight of the newest sample in usage reports
	// (0..1]. Default 0.3.
	EWMAAlpha float64
}

func (p Params) withDefaults() Params {
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&p.CPUWatermark, 0.80)
	def(&p.CPUDeadband, 0.05)
	def(&p.CPUGrowFactor, 1.25)
	def(&p.CPUShrinkFactor, 0.5)
	def(&p.MemWatermark, 0.70)
	def(&p.MemLendRatio, 0.8)
	def(&p.MemLendKnee, 0.10)
	def(&p.MemLendRatioAbove, 0.3)
	def(&p.KillFreeFraction, 0.05)
	def(&p.EWMAAlpha, 0.3)
	if p.CPUGrowStepMillis == 0 {
		p.CPUGrowStepMillis = 100
	}
	if p.KillGrace == 0 {
		p.KillGrace = 5 * time.Second
	}
	return p
}

// Validate reports every problem with p (after defaults are filled).
func (p Params) Validate() error {
	p = p.withDefaults()
	var errs []error
	frac := func(name string, v float64, lo, hi float64) {
		if !(v >= lo && v <= hi) {
			errs = append(errs, fmt.Errorf("overcommit: %s = %v, want in [%v, %v]", name, v, lo, hi))
		}
	}
	frac("CPUWatermark", p.CPUWatermark, 0.01, 1)
	frac("CPUDeadband", p.CPUDeadband, 0, p.CPUWatermark)
	frac("CPUGrowFactor", p.CPUGrowFactor, 1, 100)
	frac("CPUShrinkFactor", p.CPUShrinkFactor, 0.01, 1)
	frac("MemWatermark", p.MemWatermark, 0.01, 1)
	frac("MemLendRatio", p.MemLendRatio, 0, 1)
	frac("MemLendKnee", p.MemLendKnee, 0, 1)
	frac("MemLendRatioAbove", p.MemLendRatioAbove, 0, p.MemLendRatio)
	frac("KillFreeFraction", p.KillFreeFraction, 0, 0.9)
	frac("EWMAAlpha", p.EWMAAlpha, 0.001, 1)
	for _, c := range []struct {
		name string
		v    int64
	}{
		{"OfflineCPUMinMillis", p.OfflineCPUMinMillis}, {"OfflineCPUMaxMillis", p.OfflineCPUMaxMillis},
		{"OfflineCPUInitMillis", p.OfflineCPUInitMillis}, {"CPUGrowStepMillis", p.CPUGrowStepMillis},
		{"OfflineMemGuaranteedBytes", p.OfflineMemGuaranteedBytes},
	} {
		if c.v < 0 {
			errs = append(errs, fmt.Errorf("overcommit: %s = %d, must not be negative", c.name, c.v))
		}
	}
	if p.OfflineCPUMaxMillis != 0 && p.OfflineCPUMinMillis > p.OfflineCPUMaxMillis {
		errs = append(errs, fmt.Errorf("overcommit: OfflineCPUMinMillis %d > OfflineCPUMaxMillis %d", p.OfflineCPUMinMillis, p.OfflineCPUMaxMillis))
	}
	if p.KillGrace < 0 {
		errs = append(errs, fmt.Errorf("overcommit: KillGrace %v is negative", p.KillGrace))
	}
	return errors.Join(errs...)
}
