package overcommit

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
)

// cpuTimes is the aggregate "cpu" line of /proc/stat, in clock ticks.
type cpuTimes struct {
	busy, total uint64
	cpus        int // number of "cpuN" lines
}

// parseProcStat reads the aggregate CPU line and counts CPUs. Busy time is
// everything but idle and iowait; guest time is already in user time and
// is not counted twice.
func parseProcStat(b []byte) (cpuTimes, error) {
	var t cpuTimes
	found := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("cpu")) {
			continue
		}
		if len(line) > 3 && line[3] >= '0' && line[3] <= '9' {
			t.cpus++
			continue
		}
		f := bytes.Fields(line)
		if len(f) < 5 {
			return t, fmt.Errorf("/proc/stat: short cpu line %q", line)
		}
		var v [8]uint64
		for i := 1; i < len(f) && i <= 8; i++ {
			n, err := strconv.ParseUint(string(f[i]), 10, 64)
			if err != nil {
				return t, fmt.Errorf("/proc/stat: cpu field %d: %w", i, err)
			}
			v[i-1] = n
		}
		for _, n := range v {
			t.total += n
		}
		t.busy = t.total - v[3] - v[4] // idle, iowait
		found = true
	}
	if !found {
		return t, fmt.Errorf("/proc/stat: no aggregate cpu line")
	}
	if t.cpus == 0 {
		t.cpus = 1
	}
	return t, nil
}

// parseMeminfo returns MemTotal and MemAvailable in bytes.
func parseMeminfo(b []byte) (total, avail int64, err error) {
	var haveT, haveA bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 2 {
			continue
		}
		var dst *int64
		switch string(f[0]) {
		case "MemTotal:":
			dst, haveT = &total, true
		case "MemAvailable:":
			dst, haveA = &avail, true
		default:
			continue
		}
		n, perr := strconv.ParseInt(string(f[1]), 10, 64)
		if perr != nil {
			return 0, 0, fmt.Errorf("/proc/meminfo: %s: %w", f[0], perr)
		}
		if len(f) > 2 && string(f[2]) == "kB" {
			n *= 1024
		}
		*dst = n
	}
	if !haveT || !haveA {
		return 0, 0, fmt.Errorf("/proc/meminfo: MemTotal or MemAvailable missing")
	}
	return total, avail, nil
}
