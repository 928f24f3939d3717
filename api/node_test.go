package api_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
)

func validNode() api.NodeSpec {
	c := api.Capacity{CPU: 8000, Memory: 32 << 30, Disk: 100 << 30, Ports: 1000}
	return api.NodeSpec{
		Name: "node-1", Address: "127.0.0.1:7070", Labels: map[string]string{"zone": "a"},
		Capacity:    c,
		Allocatable: api.Allocatable{Online: c, Offline: api.Capacity{CPU: 12000, Memory: 40 << 30}},
	}
}

func TestNodeSpecValidate(t *testing.T) {
	n := validNode()
	if err := n.Validate(); err != nil {
		t.Fatalf("valid node: %v", err)
	}
	for _, tc := range []struct {
		edit func(*api.NodeSpec)
		want string
	}{
		{func(n *api.NodeSpec) { n.Name = "" }, "name: is required"},
		{func(n *api.NodeSpec) { n.Address = "nohost" }, "address: must be host:port"},
		{func(n *api.NodeSpec) { n.Capacity.CPU = 0 }, "capacity.cpu: must be positive"},
		{func(n *api.NodeSpec) { n.Capacity.GPUs = -1 }, "capacity.gpus: must not be negative"},
		{func(n *api.NodeSpec) { n.Allocatable.Online.Memory = 33 << 30 }, "allocatable.online.memory: 35433480192 is more than the capacity 34359738368"},
		{func(n *api.NodeSpec) { n.Allocatable.Offline.CPU = 40000 }, "allocatable.offline.cpu: 40000 is more than 4 times the capacity 8000"},
		{func(n *api.NodeSpec) { n.Labels = map[string]string{"bad key": ""} }, `labels["bad key"]: label key must be`},
	} {
		n := validNode()
		tc.edit(&n)
		err := n.Validate()
		if !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want a problem %q", err, tc.want)
		}
	}
}

func TestTaskReportValidate(t *testing.T) {
	ok := api.TaskReport{TaskID: "j1/g0/7", State: api.TaskFailed, Reason: api.ReasonExited, ExitCode: 3, Time: time.Unix(1, 0)}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid report: %v", err)
	}
	bad := api.TaskReport{State: api.TaskState(42), Reason: "bored", ExitCode: 256, Message: "a\x00b"}
	err := bad.Validate()
	var ve *api.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("got %v, want a *ValidationError", err)
	}
	var paths []string
	for _, p := range ve.Problems {
		paths = append(paths, p.Path)
	}
	if got, want := strings.Join(paths, " "), "task_id state reason exit_code message time"; got != want {
		t.Errorf("problems at %q, want %q", got, want)
	}
}
