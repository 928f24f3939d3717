package overcommitbench

import (
	"context"
	goruntime "runtime"
	"time"
)

// sample takes a Sample every SampleEvery until ctx ends.
func (b *bench) sample(ctx context.Context) {
	t := time.NewTicker(b.cfg.SampleEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b.takeSample()
	}
}

// takeSample records the node's allocation as the dispatcher's state has
// it, and the host's utilisation and the tiers' use as the overcommit
// loop last measured them.
func (b *bench) takeSample() {
	s := Sample{T: time.Since(b.start).Seconds()}
	for _, n := range b.srv.FSM().Nodes() {
		if n.Spec.Name != nodeName {
			continue
		}
		used := n.Used.Online.Plus(n.Used.Offline, 1)
		s.Allocation = ratio(used.CPU, n.Spec.Capacity.CPU)
		s.MemoryAllocation = ratio(used.Memory, n.Spec.Capacity.Memory)
	}
	loop := b.node.agent.Overcommit()
	cpu, _ := loop.LastDecision()
	s.Utilization, s.OfflineQuotaMillis = cpu.Util, cpu.OfflineQuotaMillis
	if rep, ok := loop.LastReport(); ok {
		s.OnlineCPUMillis, s.OfflineCPUMillis = rep.Online.CPUMillis, rep.Offline.CPUMillis
	}
	s.OfflineRunning, s.OfflinePending = b.offlineCounts()
	b.mu.Lock()
	s.Phase = b.mu.phase
	b.mu.series = append(b.mu.series, s)
	b.mu.Unlock()
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// summarize fills res's series and the figures drawn from it: the
// highest allocation of the loaded phase and the phases' mean
// utilisation and tier use.
func (b *bench) summarize(res *Result) {
	hostMillis := int64(goruntime.NumCPU()) * 1000
	b.mu.Lock()
	res.Series = append([]Sample(nil), b.mu.series...)
	b.mu.Unlock()
	var loaded, unloaded int
	var onlineCPU, offlineCPU float64
	for _, s := range res.Series {
		switch s.Phase {
		case "loaded":
			loaded++
			res.AllocationRatio = max(res.AllocationRatio, s.Allocation)
			res.MemoryAllocationRatio = max(res.MemoryAllocationRatio, s.MemoryAllocation)
			res.Utilization += s.Utilization
			onlineCPU += float64(s.OnlineCPUMillis)
			offlineCPU += float64(s.OfflineCPUMillis)
		case "unloaded":
			unloaded++
			res.UtilizationUnloaded += s.Utilization
			res.BackgroundCPUMillis += s.Utilization*float64(hostMillis) - float64(s.OnlineCPUMillis)
		}
	}
	if loaded > 0 {
		res.Utilization /= float64(loaded)
		res.OnlineCPUMillis, res.OfflineCPUMillis = onlineCPU/float64(loaded), offlineCPU/float64(loaded)
	}
	if unloaded > 0 {
		res.UtilizationUnloaded /= float64(unloaded)
		res.BackgroundCPUMillis = max(0, res.BackgroundCPUMillis/float64(unloaded))
	}
}
