package overcommit

import "testing"

func TestParseProcStat(t *testing.T) {
	in := "cpu  100 5 50 800 40 3 2 0 7 0\ncpu0 50 2 25 400 20 1 1 0 3 0\ncpu1 50 3 25 400 20 2 1 0 4 0\nintr 1 2 3\nctxt 99\n"
	got, err := parseProcStat([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	// total = 100+5+50+800+40+3+2+0 (guest is inside user); busy = total-idle-iowait
	if got.total != 1000 || got.busy != 160 || got.cpus != 2 {
		t.Errorf("parseProcStat = %+v", got)
	}
	for _, bad := range []string{"", "intr 1\n", "cpu 1 2\n", "cpu 1 x 3 4 5\n"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q) accepted", bad)
		}
	}
}

func TestParseMeminfo(t *testing.T) {
	in := "MemTotal:       24683656 kB\nMemFree:        23012320 kB\nMemAvailable:   24186924 kB\nBuffers: 1 kB\n"
	total, avail, err := parseMeminfo([]byte(in))
	if err != nil || total != 24683656*1024 || avail != 24186924*1024 {
		t.Errorf("parseMeminfo = %d, %d, %v", total, avail, err)
	}
	for _, bad := range []string{"", "MemTotal: 5 kB\n", "MemTotal: x kB\nMemAvailable: 1 kB\n"} {
		if _, _, err := parseMeminfo([]byte(bad)); err == nil {
			t.Errorf("parseMeminfo(%q) accepted", bad)
		}
	}
}
