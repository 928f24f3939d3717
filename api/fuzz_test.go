package api_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/api"
)

// FuzzDecodeJobs feeds arbitrary bodies to decode+validate. It must never
// panic or hang; every rejection must be explained by at least one problem
// with a message; and whatever is accepted must survive a round trip through
// encoding/json unchanged.
func FuzzDecodeJobs(f *testing.F) {
	f.Add([]byte(typicalJob(1)))
	f.Add(ndjson(3))
	f.Add([]byte(`[{"name":"a","labels":{"k":"v"},"tasks":[{"count":2,"pod":{"sim":{"run_time":"1s","usage":{"cpu":"200m","memory":"1Gi","peak":{"cpu":2,"period":"1m","length":"10s"}}},"containers":[{"image":{"oci_layout":"/l"},"command":["x"],"env":{"A":"\u00e9"},"resources":{"cpu":"1.5","memory":"1Gi","ports":[{"name":"p"}]}}]}}],"policy":{"scorers":[{"name":"spread"}]}}]`))
	f.Add([]byte(`{"name":"a\ud83d\ude00","tasks":[{"count":1e3}]}`))
	f.Add([]byte(`[1,{"x":[[[{}]]]},null]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		jobs, err := api.DecodeJobs(body)
		if err != nil {
			checkExplained(t, err)
			return
		}
		again, err := json.Marshal(jobs)
		if err != nil {
			t.Fatalf("marshal accepted jobs: %v", err)
		}
		back, err := api.DecodeJobs(again)
		if err != nil {
			t.Fatalf("re-decoding accepted jobs failed: %v\nbody: %s\nagain: %s", err, body, again)
		}
		if !reflect.DeepEqual(back, jobs) {
			t.Fatalf("round trip of accepted jobs differs\nbody: %s\nagain: %s", body, again)
		}
	})
}

// FuzzDecodeCapboxRequests does the same for capbox requests.
func FuzzDecodeCapboxRequests(f *testing.F) {
	f.Add([]byte(`{"name":"w","count":3,"resources":{"cpu":100,"memory":"1Mi"},"all_or_nothing":true}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := api.DecodeCapboxRequests(body); err != nil {
			checkExplained(t, err)
		}
	})
}

// FuzzDecodeCapTasks does the same for capbox tasks.
func FuzzDecodeCapTasks(f *testing.F) {
	f.Add([]byte(`{"capbox":"j4/0/1/1","name":"t1","pod":{"containers":[{"image":{"rootfs":"/img"},"command":["/w"],"resources":{"cpu":"500m","memory":"64Mi"}}],"sim":{"run_time":"1s"}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := api.DecodeCapTasks(body); err != nil {
			checkExplained(t, err)
		}
	})
}

// FuzzDecodeNodeTarget feeds arbitrary bodies to the target decoder: it
// must never panic, every rejection must be explained, and an accepted
// target must survive a round trip through encoding/json unchanged (as
// encoded: an empty map and no map encode alike).
func FuzzDecodeNodeTarget(f *testing.F) {
	f.Add([]byte(`{"generation":7,"base":5,"pods":[{"task_id":"j1/0/0/1","job":"j1","group":"g","qos":"offline","priority":3,"pod":{"containers":[{"name":"c","image":{"rootfs":"/img"},"command":["/w"],"env":{"A":"b"},"resources":{"cpu":500,"memory":67108864}}],"sim":{"run_time":"1s"}},"max_run_time":"1m0s","capbox":true,"in_capbox":"j2/0/0/1"}],"removed":["j0/0/0/1"]}`))
	f.Add([]byte(`{"generation":1,"pods":null}`))
	fuzzRoundTrip(f, api.DecodeNodeTarget, "target")
}

// FuzzDecodeReportRequest does the same for report requests.
func FuzzDecodeReportRequest(f *testing.F) {
	f.Add([]byte(`{"reports":[{"task_id":"j1/0/0/1","state":"running","reason":"started","exit_code":0,"message":"m","time":"2030-01-01T00:00:00.5Z","usage":{"cpu":5,"memory":6}}],"usage":{"total":{"cpu":1,"memory":2},"online":{"cpu":1,"memory":1},"offline":{"cpu":0,"memory":1},"tasks":[{"task_id":"j1/0/0/1","qos":"online","cpu":1,"memory":1}]}}`))
	f.Add([]byte(`{"reports":null,"usage":null}`))
	f.Add([]byte(`{"reports":[],"usage":{"total":{"cpu":1,"memory":2},"online":{"cpu":0,"memory":0},"offline":{"cpu":1,"memory":2},"overcommit":{"cpu_quota":1500,"cpu_min":100,"cpu_max":2000,"memory_limit":3221225472,"memory_guaranteed":1073741824,"decided":"2030-01-01T00:00:00.5+01:00"}}}`))
	f.Add([]byte(`{"usage":{"overcommit":null}}`))
	fuzzRoundTrip(f, api.DecodeReportRequest, "request")
}

// FuzzDecodeSubmitResponse does the same for the submit reply.
func FuzzDecodeSubmitResponse(f *testing.F) {
	f.Add([]byte(`{"jobs":["j1","j2","j\u00e9"],"existing":[1]}`))
	f.Add([]byte(`{"jobs":null,"later":{"x":[1,2]}}`))
	fuzzRoundTrip(f, api.DecodeSubmitResponse, "reply")
}

// FuzzDecodeWatchEvent does the same for the watch stream's events.
func FuzzDecodeWatchEvent(f *testing.F) {
	f.Add([]byte(`{"index":7,"job":{"id":"j7","state":"running","submitted":"2030-01-01T00:00:00.5Z","spec":{"name":"n","tasks":[{"count":2,"pod":{"containers":[{"image":{"rootfs":"/img"},"command":["/bin/x"]}]}}]},"tasks":{"total":2,"active":2},"groups":[{"name":"g","total":2,"active":2}],"pending_diagnosis":[{"group":"g","tasks":1,"reason":"r"}],"new_field":[1]}}`))
	f.Add([]byte(`{"index":1,"job":{"groups":null}}`))
	fuzzRoundTrip(f, api.DecodeWatchEvent, "event")
}

// FuzzDecodeTaskList does the same for pages of a job's tasks.
func FuzzDecodeTaskList(f *testing.F) {
	f.Add([]byte(`{"tasks":[{"id":"j1/0/0/1","group":"g","index":3,"attempt":1,"state":"failed","node":"n\u00e9","reason":"exited","exit_code":2,"updated":"2030-01-01T00:00:00.5Z","new":{}}],"next":"j1/0/0/1"}`))
	f.Add([]byte(`{"tasks":null}`))
	fuzzRoundTrip(f, api.DecodeTaskList, "page")
}

// fuzzRoundTrip fuzzes decode: it must never panic, every rejection must
// be explained, and an accepted value (a what) must survive a round trip
// through encoding/json unchanged (as encoded: an empty map and no map
// encode alike).
func fuzzRoundTrip[T any](f *testing.F, decode func([]byte) (T, error), what string) {
	f.Fuzz(func(t *testing.T, body []byte) {
		v, err := decode(body)
		if err != nil {
			checkExplained(t, err)
			return
		}
		again, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("marshal an accepted %s: %v", what, err)
		}
		back, err := decode(again)
		if err != nil {
			t.Fatalf("re-decoding an accepted %s: %v\nbody: %s\nagain: %s", what, err, body, again)
		}
		if third, _ := json.Marshal(back); !bytes.Equal(third, again) {
			t.Fatalf("round trip of an accepted %s differs\nbody: %s\nagain: %s\nthird: %s", what, body, again, third)
		}
	})
}

func checkExplained(t *testing.T, err error) {
	t.Helper()
	var ve *api.ValidationError
	switch {
	case errors.Is(err, api.ErrTooLarge):
	case errors.As(err, &ve):
		if len(ve.Problems) == 0 || ve.Total < len(ve.Problems) {
			t.Fatalf("rejection without problems: %+v", ve)
		}
		for _, p := range ve.Problems {
			if p.Message == "" {
				t.Fatalf("problem without a message: %+v", p)
			}
		}
	default:
		t.Fatalf("unexpected error type %T: %v", err, err)
	}
}
