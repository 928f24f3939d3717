package nodelet

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet/cgroup"
	"github.com/sluicehq/sluice/nodelet/runtime"
)

// TestSpecSharesAGroupsContainers checks spec's memo: the pods of one api
// spec (the same memory, as api's decoder gives a group's pods) and tier
// share their runtime containers; another tier, or an equal api spec at
// another address, gets containers of its own, with its tier's CPU.
func TestSpecSharesAGroupsContainers(t *testing.T) {
	o := &owner{a: &Agent{cfg: Config{Node: "n1"}}, offlineParent: "sluice/offline", onlineParent: "sluice/online"}
	pod := api.PodSpec{Containers: []api.ContainerSpec{{Name: "main", Image: api.Image{Rootfs: "/img"}, Command: []string{"/bin/work"},
		Resources: api.Resources{CPU: 500, Memory: 64 << 20}}}, Sim: &api.SimSpec{RunTime: api.Duration(time.Second)}}
	other := api.PodSpec{Containers: slices.Clone(pod.Containers), Sim: pod.Sim}
	a := o.spec(DesiredPod{ID: "a", Generation: 1, Tier: cgroup.Offline, Pod: &pod})
	b := o.spec(DesiredPod{ID: "b", Generation: 2, Tier: cgroup.Offline, Pod: &pod})
	c := o.spec(DesiredPod{ID: "c", Generation: 1, Tier: cgroup.Online, Pod: &pod, Capbox: true})
	d := o.spec(DesiredPod{ID: "d", Generation: 1, Tier: cgroup.Online, Pod: &other, InCapbox: "c"})
	if &a.Containers[0] != &b.Containers[0] {
		t.Error("two offline pods of one api spec do not share containers")
	}
	if b.ID != "b" || b.Generation != 2 || b.CgroupParent != "sluice/offline" || b.Sim == nil || b.Sim.RunTime != time.Second || b.Placeholder {
		t.Errorf("the second offline pod: %+v", b)
	}
	if &c.Containers[0] == &a.Containers[0] || a.Containers[0].Resources.MilliCPU != 0 || c.Containers[0].Resources.MilliCPU != 500 {
		t.Errorf("an online pod of the offline pods' api spec: shares their containers %v; CPU %d offline, %d online, want 0 and 500",
			&c.Containers[0] == &a.Containers[0], a.Containers[0].Resources.MilliCPU, c.Containers[0].Resources.MilliCPU)
	}
	if c.ID != "c" || c.CgroupParent != "sluice/online" || !c.Placeholder || d.InPod != "c" || d.Placeholder {
		t.Errorf("online pods: %+v and %+v", c, d)
	}
	if &d.Containers[0] == &c.Containers[0] || !reflect.DeepEqual(d.Containers, c.Containers) {
		t.Errorf("a pod of an equal api spec elsewhere: shares containers %v, equal %v; want its own, equal",
			&d.Containers[0] == &c.Containers[0], reflect.DeepEqual(d.Containers, c.Containers))
	}
	// Each pod has its own identity, whatever it shares.
	if !slices.Contains(a.Env, "SLUICE_TASK_ID=a") || !slices.Contains(b.Env, "SLUICE_TASK_ID=b") || c.Env != nil {
		t.Errorf("identities: a %q, b %q, placeholder c %q", a.Env, b.Env, c.Env)
	}
	// A spec taken from the memo is the one derived afresh, field for field.
	fresh := func(d DesiredPod) runtime.PodSpec {
		return (&owner{a: o.a, offlineParent: o.offlineParent, onlineParent: o.onlineParent}).spec(d)
	}
	if want := fresh(DesiredPod{ID: "b", Generation: 2, Tier: cgroup.Offline, Pod: &pod}); !reflect.DeepEqual(b, want) {
		t.Errorf("the offline pod from the memo: %+v, derived afresh %+v", b, want)
	}
	// Volumes are shared with the api spec's; the same containers with
	// other volumes get their own.
	withVols := pod
	withVols.Volumes = []api.Volume{{Name: "work", Scratch: &api.ScratchVolume{Size: 1 << 20}}}
	otherVols := withVols
	otherVols.Volumes = []api.Volume{{Name: "data", HostPath: &api.HostPathVolume{Path: "/srv/data"}}}
	v1 := o.spec(DesiredPod{ID: "v1", Generation: 1, Tier: cgroup.Offline, Pod: &withVols})
	v2 := o.spec(DesiredPod{ID: "v2", Generation: 1, Tier: cgroup.Offline, Pod: &withVols})
	v3 := o.spec(DesiredPod{ID: "v3", Generation: 1, Tier: cgroup.Offline, Pod: &otherVols})
	if len(v1.Volumes) != 1 || len(v2.Volumes) != 1 || &v1.Volumes[0] != &v2.Volumes[0] {
		t.Errorf("two pods of one api spec with volumes: %+v and %+v, want one shared volume", v1.Volumes, v2.Volumes)
	}
	if want := fresh(DesiredPod{ID: "v3", Generation: 1, Tier: cgroup.Offline, Pod: &otherVols}); !reflect.DeepEqual(v3, want) {
		t.Errorf("a pod of the same containers with other volumes: %+v, derived afresh %+v", v3, want)
	}
}
