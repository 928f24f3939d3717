package api_test

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/api"
)

func ExampleDecodeJobs() {
	body := []byte(`{"name":"hello","tasks":[{"count":1000,"pod":{"containers":[
		{"image":{"rootfs":"/srv/rootfs/busybox"},"command":["echo","hi"],
		 "resources":{"cpu":"250m","memory":"64Mi"}}]}}]}`)
	jobs, err := api.DecodeJobs(body)
	if err != nil {
		fmt.Println(err)
		return
	}
	j := jobs[0]
	fmt.Println(j.Queue, j.QoS, j.Tasks[0].Count, j.Tasks[0].Pod.Containers[0].Resources.CPU)

	bad := []byte(`{"name":"broken","tasks":[{"count":1,"pod":{"containers":[
		{"image":{"rootfs":"busybox"},"command":["echo"],"resources":{"cpu":0,"memory":"64Mi"}}]}}]}`)
	_, err = api.DecodeJobs(bad)
	var ve *api.ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems {
			fmt.Println(p)
		}
	}
	// Output:
	// default offline 1000 250
	// jobs[0].tasks[0].pod.containers[0].image.rootfs: "busybox" must be an absolute path
	// jobs[0].tasks[0].pod.containers[0].resources.cpu: must be positive
}
