package api_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
)

func TestParseCPU(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"500m", 500, false},
		{"2", 2000, false},
		{"0.25", 250, false},
		{"1.5", 1500, false},
		{"0", 0, false},
		{"1.0005", 0, true}, // half a millicore
		{"0.5m", 0, true},
		{"", 0, true},
		{"m", 0, true},
		{"2 cores", 0, true},
		{"-1", 0, true},
		{"1.2.3", 0, true},
		{"9223372036854775807m", 9223372036854775807, false},
		{"9223372036854775808m", 0, true},
		{"99999999999999999999999", 0, true},
	} {
		got, err := api.ParseCPU(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseCPU(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"4096", 4096, false},
		{"512Mi", 512 << 20, false},
		{"1.5Gi", 3 << 29, false},
		{"100M", 100e6, false},
		{"1k", 1000, false},
		{"2Ti", 2 << 40, false},
		{"1P", 1e15, false},
		{"0.5", 0, true},
		{"1.1Ki", 0, true}, // 1126.4 bytes
		{"1Mb", 0, true},
		{"8Ei", 0, true},
		{"9000Pi", 0, true},
		{".5Ki", 512, false},
		{".", 0, true},
	} {
		got, err := api.ParseBytes(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestDurationJSON(t *testing.T) {
	d := api.Duration(90 * time.Second)
	b, err := json.Marshal(d)
	if err != nil || string(b) != `"1m30s"` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	var back api.Duration
	if err := json.Unmarshal(b, &back); err != nil || back != d {
		t.Fatalf("Unmarshal = %v, %v", back, err)
	}
	for _, bad := range []string{`90`, `"soon"`, `"-1s"`} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("Unmarshal(%s) succeeded", bad)
		}
	}
}
