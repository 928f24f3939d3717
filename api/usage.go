package api

// Bounds of a usage value: those of a node's capacity.
const (
	maxUsageCPU    = 1 << 40 // millicores
	maxUsageMemory = 1 << 60 // bytes
)

// Validate checks a node's usage: no value may be negative (or beyond what
// a node's capacity may hold), and an overcommit status must be in order
// (OvercommitStatus). Problems are named by paths relative to the
// usage, such as "offline.cpu".
func (u *NodeUsage) Validate() error {
	c := &checker{item: -1}
	u.validate(c)
	return c.err()
}

func (u *NodeUsage) validate(c *checker) {
	for _, t := range []struct {
		name string
		u    Usage
	}{{"total", u.Total}, {"online", u.Online}, {"offline", u.Offline}} {
		c.push(t.name)
		c.amount("cpu", t.u.CPU, 0, maxUsageCPU, "millicores")
		c.amount("memory", t.u.Memory, 0, maxUsageMemory, "bytes")
		c.pop()
	}
	if o := u.Overcommit; o != nil {
		c.push("overcommit")
		o.validate(c)
		c.pop()
	}
	if len(u.Tasks) > MaxItemsPerRequest {
		c.push("tasks")
		c.addf("%d tasks: at most %d", len(u.Tasks), MaxItemsPerRequest)
		c.pop()
		return
	}
	for i := range u.Tasks {
		t := &u.Tasks[i]
		c.push("tasks")
		c.pushIndex(i)
		if t.TaskID == "" {
			c.push("task_id")
			c.add("must not be empty")
			c.pop()
		}
		if t.QoS != QoSOnline && t.QoS != QoSOffline {
			c.push("qos")
			c.addf("%q: want %q or %q", t.QoS, QoSOnline, QoSOffline)
			c.pop()
		}
		c.amount("cpu", t.CPU, 0, maxUsageCPU, "millicores")
		c.amount("memory", t.Memory, 0, maxUsageMemory, "bytes")
		c.pop()
		c.pop()
	}
}

// Validate checks a report request as the dispatcher does: every report,
// named "reports[i]..." with Problem.Item i, and the usage, named
// "usage..." with Item -1. It does not check the number of reports
// (MaxItemsPerRequest, a too_large error of its own). A request with
// neither reports nor usage is valid: it is a bare contact.
func (r *ReportRequest) Validate() error {
	c := &checker{item: -1}
	c.push("reports")
	for i := range r.Reports {
		c.item, c.itemStart = i, len(c.probs)
		c.pushIndex(i)
		r.Reports[i].validate(c)
		c.pop()
	}
	c.pop()
	if r.Usage != nil {
		c.item, c.itemStart = -1, len(c.probs)
		c.push("usage")
		r.Usage.validate(c)
		c.pop()
	}
	return c.err()
}

// validate checks an overcommit status: amounts within a node's, the quota
// between its floor and ceiling, the guarantee within the limit. The
// orderings are checked only when every amount is valid.
func (o *OvercommitStatus) validate(c *checker) {
	before := c.total
	c.amount("cpu_quota", o.CPUQuota, 0, maxUsageCPU, "millicores")
	c.amount("cpu_min", o.CPUMin, 0, maxUsageCPU, "millicores")
	c.amount("cpu_max", o.CPUMax, 0, maxUsageCPU, "millicores")
	c.amount("memory_limit", o.MemoryLimit, 0, maxUsageMemory, "bytes")
	c.amount("memory_guaranteed", o.MemoryGuaranteed, 0, maxUsageMemory, "bytes")
	if c.total != before {
		return
	}
	switch {
	case o.CPUMin > o.CPUMax:
		c.badAtf("cpu_min", "%d millicores is above cpu_max, %d", o.CPUMin, o.CPUMax)
	case o.CPUQuota < o.CPUMin || o.CPUQuota > o.CPUMax:
		c.badAtf("cpu_quota", "%d millicores is outside cpu_min..cpu_max, %d..%d", o.CPUQuota, o.CPUMin, o.CPUMax)
	}
	if o.MemoryGuaranteed > o.MemoryLimit {
		c.badAtf("memory_guaranteed", "%d bytes is above memory_limit, %d", o.MemoryGuaranteed, o.MemoryLimit)
	}
}
