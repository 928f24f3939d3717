package server_test

import (
	"testing"

	"github.com/sluicehq/sluice/api"
)

// TestCapboxEndpoints follows the README's capbox examples and checks
// that bad requests are refused whole with a reply that says why.
func TestCapboxEndpoints(t *testing.T) {
	s := openOne(t, parseTokens(t, "admin-t admin\nsub-a submitter a\n"))
	base := s.Addr()
	admin := map[string]string{"Authorization": "Bearer admin-t"}
	am := submit(t, base, "admin-t", `{"name":"am","appmaster":true,"tasks":[]}`, nil).Jobs[0]
	plain := submit(t, base, "admin-t", jobJSON("plain", "", 1), nil).Jobs[0]
	path := base + api.PathJob + am + "/capboxes"

	created := decode[api.CreateCapboxesResponse](t, do(t, req{method: "POST", url: path, header: admin,
		body: []byte(`{"name":"workers","count":4,"resources":{"cpu":"1","memory":"1Gi"}}`)}), 200)
	if len(created.Sets) != 1 {
		t.Fatalf("created %+v", created)
	}
	list := decode[api.CapboxList](t, do(t, req{method: "GET", url: path, header: admin}), 200)
	if len(list.Capboxes) != 4 || list.Capboxes[0].State != api.CapboxPending || list.Capboxes[0].Resources.CPU != 1000 || list.Index == 0 {
		t.Fatalf("capboxes %+v", list)
	}
	j := decode[api.JobStatus](t, do(t, req{method: "GET", url: base + api.PathJob + created.Sets[0], header: admin}), 200)
	if j.Appmaster != am {
		t.Errorf("capbox set's appmaster %q, want %s", j.Appmaster, am)
	}

	for _, tc := range []struct {
		name, method, url, body string
		header                  map[string]string
		status                  int
		code, want              string
	}{
		{"invalid requests", "POST", path, `[{"name":"x","count":0,"resources":{"cpu":1,"memory":1}},{"name":"y","count":1,"resources":{"cpu":-1,"memory":1}}]`,
			admin, 400, api.CodeInvalid, "capboxes[0].count"},
		{"unknown field", "POST", path, `{"name":"x","count":1,"cnt":2,"resources":{"cpu":1,"memory":1}}`, admin, 400, api.CodeInvalid, "cnt"},
		{"not an appmaster", "POST", base + api.PathJob + plain + "/capboxes", `{"name":"x","count":1,"resources":{"cpu":1,"memory":1}}`,
			admin, 409, api.CodeConflict, "not an appmaster"},
		{"no such job", "POST", base + api.PathJob + "j99/capboxes", `{"name":"x","count":1,"resources":{"cpu":1,"memory":1}}`,
			admin, 404, api.CodeNotFound, "j99"},
		{"release nothing", "DELETE", path, "", admin, 400, api.CodeInvalid, "at least one capbox"},
		{"release another's", "DELETE", base + api.PathJob + plain + "/capboxes?id=" + created.Sets[0] + "/0/0/1", "", admin, 404, api.CodeNotFound, "not " + plain + "'s"},
		{"release one of none", "DELETE", path + "?id=" + created.Sets[0] + "/0/0/1&id=" + created.Sets[0] + "/0/9/1", "", admin, 404, api.CodeNotFound, "/0/9/1"},
		{"another queue", "POST", path, `{"name":"x","count":1,"resources":{"cpu":1,"memory":1}}`,
			map[string]string{"Authorization": "Bearer sub-a"}, 403, api.CodeForbidden, "queue"},
		{"no token", "GET", path, "", nil, 401, api.CodeUnauthorized, ""},
		{"invalid task", "POST", base + api.PathJob + am + "/captasks", `{"name":"t","pod":{"containers":[]}}`, admin, 400, api.CodeInvalid, "tasks[0].capbox"},
		{"task in a pending capbox", "POST", base + api.PathJob + am + "/captasks",
			`{"capbox":"` + created.Sets[0] + `/0/0/1","name":"t","pod":{"containers":[{"image":{"rootfs":"/img"},"command":["/x"],"resources":{"cpu":1,"memory":1}}]}}`,
			admin, 404, api.CodeNotFound, "no placed capbox"},
		{"stop no task", "DELETE", base + api.PathJob + am + "/captasks", "", admin, 400, api.CodeInvalid, "at least one capbox task"},
		{"stop an unknown task", "DELETE", base + api.PathJob + am + "/captasks?id=" + created.Sets[0] + "/0/0/1/t", "", admin, 404, api.CodeNotFound, "no capbox task"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			errorReply(t, do(t, req{method: tc.method, url: tc.url, header: tc.header, body: body}), tc.status, tc.code, tc.want)
		})
	}
	// Nothing of the refused requests was applied.
	if l := decode[api.CapboxList](t, do(t, req{method: "GET", url: path, header: admin}), 200); len(l.Capboxes) != 4 || l.Capboxes[0].State != api.CapboxPending {
		t.Fatalf("after the refused requests: %+v", l)
	}
	r := decode[api.ReleaseCapboxesResponse](t, do(t, req{method: "DELETE", url: path + "?id=" + created.Sets[0] + "/0/1/1", header: admin}), 200)
	if r.Dropped != 1 || r.Stopping != 0 {
		t.Fatalf("release: %+v", r)
	}
	if l := decode[api.CapboxList](t, do(t, req{method: "GET", url: path, header: admin}), 200); l.Capboxes[1].State != api.CapboxReleased || l.Capboxes[0].State != api.CapboxPending {
		t.Fatalf("after a release: %+v", l)
	}
}
