package api

// CapboxRequest asks for Count capboxes: resource slots on nodes that an
// appmaster leases and runs its own tasks in. Capboxes take the queue,
// priority and QoS class of the appmaster that asks for them.
type CapboxRequest struct {
	// Name identifies the request to people and in the appmaster's callbacks.
	Name string `json:"name"`
	// Count is the number of capboxes, 1 to MaxTaskCount.
	Count int64 `json:"count"`
	// Resources are what each capbox holds.
	Resources Resources `json:"resources"`
	// AllOrNothing places the Count capboxes together or not at all (a gang).
	AllOrNothing bool `json:"all_or_nothing,omitempty"`
	// Constraints are hard requirements on node labels.
	Constraints []Constraint `json:"constraints,omitempty"`
	// DistinctNodes puts every capbox of the request on a different node.
	DistinctNodes bool `json:"distinct_nodes,omitempty"`
	// PreferredNodes are nodes the capboxes would rather be on.
	PreferredNodes []string `json:"preferred_nodes,omitempty"`
	// IdempotencyKey makes a retried request safe, as for jobs.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}
