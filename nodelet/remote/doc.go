// Package remote connects a nodelet to a dispatcher over its HTTP API
// (api/wire.go): Dispatcher is the nodelet.Dispatcher that registers the
// node, long-polls its target and delivers its reports through an
// *api.Client; LogServer serves the host's pod logs at
// api.PathNodeletLogs for the dispatcher to proxy; HostCapacity detects
// what the host offers, for defaults.
//
// # Invariants
//
//   - A task's pod ID is PodID(task ID): valid under runtime.CheckName,
//     distinct for distinct task IDs and stable across restarts, so a
//     restarted nodelet adopts the pods the target still names.
//   - The first target request of a Dispatcher is answered at once, even
//     when the node's target is empty, so that the agent stops recovered
//     pods no longer wanted without waiting for a placement.
//   - Once it holds a whole target, the Dispatcher asks for differences
//     (diff=1) and applies them to it; an answer it cannot apply (a base
//     it does not hold) makes it ask for the whole target again. The
//     agent receives the difference too (nodelet.Target.Base) when it
//     holds the target the Dispatcher returned last, and the whole target
//     otherwise, so a change costs both in proportion to what changed,
//     not to the pods on the node.
//   - When the dispatcher answers not_found for the node (it lost or never
//     had its registration), the Dispatcher registers it again before
//     retrying; concurrent Target and Report calls register it once.
//   - The Dispatcher starts no goroutines. A LogServer owns one goroutine
//     that accepts connections (plus, per following stream, one that
//     watches the client); Close ends them all.
//
// # Usage
//
//	client, _ := api.NewClient(api.ClientConfig{Addrs: addrs, Token: nodeToken})
//	spec.LogToken = api.NewLogToken() // what the log server takes of the dispatcher
//	d, err := remote.New(remote.Config{Client: client, Node: spec})
//	if err != nil { ... }
//	if err := d.Join(ctx); err != nil { ... }
//	logs, _ := remote.NewLogServer(remote.LogServerConfig{Runtime: rt, Token: spec.LogToken, FirstContainer: d.FirstContainer})
//	defer logs.Close()
//	agent, _ := nodelet.New(nodelet.Config{Node: spec.Name, Runtime: rt, Dispatcher: d})
//	err = agent.Run(ctx)
package remote
