// Command sluice-shim creates one container for the nodelet's container
// runtime and is that container's init until it execs the program: a
// small binary, so that each container's init boots it instead of the
// whole sluice binary. See package nodelet/runtime/container/shim.
package main

import "github.com/sluicehq/sluice/nodelet/runtime/container/shim"

func main() { shim.Main() }
