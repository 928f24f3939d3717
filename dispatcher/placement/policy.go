package placement

import (
	"errors"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/api"
)

// Class is an equivalence class: the groups of a round that placement
// cannot tell apart (same demand, class, pool, constraints and policy; for
// distinct-node groups, the same job). Filters and scorers see classes, so
// they run once per class and node, not once per group.
type Class struct {
	Demand        api.Capacity
	QoS           api.QoS
	Pool          string
	Constraints   []api.Constraint
	DistinctNodes bool
	// StaticPorts are the ports a task needs by number (Group's).
	StaticPorts []api.PortKey
	// Job is set only for distinct-node classes.
	Job     string
	Filters []Filter
	Scorers []WeightedScorer
}

// Filter is a hard rule: a node it does not admit is no candidate. Its
// answer depends only on the class and the node (a Placer keeps it for
// the nodes that did not change).
type Filter interface {
	Name() string
	Admit(c *Class, n *Node) bool
}

// Scorer is a soft preference: the cost, 0 (best) to MaxScore, of running
// a task of the class on the node. Like a Filter's answer, it depends only
// on the class and the node.
type Scorer interface {
	Name() string
	Cost(c *Class, n *Node) int64
}

// MaxScore is the largest cost a Scorer returns.
const MaxScore = 100

// WeightedScorer is a scorer with its weight in a policy.
type WeightedScorer struct {
	Scorer
	Weight int64
}

// Registry holds the filters and scorers policies name, and the default
// policy. It is a value: a dispatcher builds one at start and may add its
// own plugins.
type Registry struct {
	filters map[string]Filter
	scorers map[string]Scorer
	def     api.Policy
}

// NewRegistry returns a registry of the given plugins whose default policy
// is def. Every name must be unique and every name def uses registered.
func NewRegistry(filters []Filter, scorers []Scorer, def api.Policy) (*Registry, error) {
	r := &Registry{filters: map[string]Filter{}, scorers: map[string]Scorer{}, def: def}
	for _, f := range filters {
		if _, dup := r.filters[f.Name()]; dup {
			return nil, fmt.Errorf("placement registry: filter %q registered twice", f.Name())
		}
		r.filters[f.Name()] = f
	}
	for _, s := range scorers {
		if _, dup := r.scorers[s.Name()]; dup {
			return nil, fmt.Errorf("placement registry: scorer %q registered twice", s.Name())
		}
		r.scorers[s.Name()] = s
	}
	for _, name := range []string{api.FilterResources, api.FilterPorts} {
		if _, ok := r.filters[name]; !ok {
			return nil, fmt.Errorf("placement registry: the %q filter is required", name)
		}
	}
	if err := r.check(&def); err != nil {
		return nil, fmt.Errorf("placement registry: default policy: %w", err)
	}
	return r, nil
}

// DefaultRegistry returns the built-in filters and scorers, with a default
// policy of every filter and bin-packing, locality and slot reuse at weight
// 1.
func DefaultRegistry() *Registry {
	r, err := NewRegistry(
		[]Filter{resourceFilter{}, portFilter{}, labelFilter{}, poolFilter{}, distinctFilter{}},
		[]Scorer{binpackScorer{}, spreadScorer{}, localityScorer{}, slotScorer{}},
		api.Policy{
			Filters: slices.Clone(api.FilterNames),
			Scorers: []api.ScorerRef{{Name: api.ScorerBinpack, Weight: 1}, {Name: api.ScorerLocality, Weight: 1}, {Name: api.ScorerSlotReuse, Weight: 1}},
		})
	if err != nil {
		panic("placement: built-in registry: " + err.Error())
	}
	return r
}

// check reports names p uses that are not registered, and bad weights.
func (r *Registry) check(p *api.Policy) error {
	if p == nil {
		return nil
	}
	var errs []error
	for i, f := range p.Filters {
		if _, ok := r.filters[f]; !ok {
			errs = append(errs, fmt.Errorf("filters[%d]: unknown filter %q", i, f))
		}
	}
	for i, s := range p.Scorers {
		if _, ok := r.scorers[s.Name]; !ok {
			errs = append(errs, fmt.Errorf("scorers[%d]: unknown scorer %q", i, s.Name))
		}
		if s.Weight < 0 || s.Weight > api.MaxScorerWeight {
			errs = append(errs, fmt.Errorf("scorers[%d].weight: %d not in 0..%d", i, s.Weight, api.MaxScorerWeight))
		}
	}
	return errors.Join(errs...)
}

// resolve returns the filters and weighted scorers of policy p (nil: the
// default) for a class that asks for ports or not (ports); the resource
// filter always comes first, the port filter next for a class with ports
// (for one without, it would admit every node: it is left out, and costs
// no call per node).
func (r *Registry) resolve(p *api.Policy, ports bool) ([]Filter, []WeightedScorer) {
	if p == nil {
		p = &r.def
	}
	names := p.Filters
	if len(names) == 0 {
		names = r.def.Filters
	}
	filters := []Filter{r.filters[api.FilterResources]}
	if ports {
		filters = append(filters, r.filters[api.FilterPorts])
	}
	for _, name := range names {
		if name != api.FilterResources && name != api.FilterPorts {
			filters = append(filters, r.filters[name])
		}
	}
	refs := p.Scorers
	if len(refs) == 0 {
		refs = r.def.Scorers
	}
	var scorers []WeightedScorer
	for _, ref := range refs {
		w := int64(ref.Weight)
		if w == 0 {
			w = 1
		}
		scorers = append(scorers, WeightedScorer{r.scorers[ref.Name], w})
	}
	return filters, scorers
}

// The built-in filters.

type resourceFilter struct{}

func (resourceFilter) Name() string { return api.FilterResources }
func (resourceFilter) Admit(c *Class, n *Node) bool {
	return fits(pool(n.Free, c.QoS), c.Demand) > 0 || matchingSlots(c, n) > 0
}

type labelFilter struct{}

func (labelFilter) Name() string { return api.FilterLabels }
func (labelFilter) Admit(c *Class, n *Node) bool {
	for _, k := range c.Constraints {
		v, ok := n.Labels[k.Key]
		switch k.Op {
		case api.OpIn:
			if !ok || !slices.Contains(k.Values, v) {
				return false
			}
		case api.OpNotIn:
			if ok && slices.Contains(k.Values, v) {
				return false
			}
		case api.OpExists:
			if !ok {
				return false
			}
		case api.OpNotExists:
			if ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}

type poolFilter struct{}

func (poolFilter) Name() string                 { return api.FilterPool }
func (poolFilter) Admit(c *Class, n *Node) bool { return c.Pool == "" || c.Pool == n.Pool }

type distinctFilter struct{}

func (distinctFilter) Name() string { return api.FilterDistinctNodes }
func (distinctFilter) Admit(c *Class, n *Node) bool {
	return !c.DistinctNodes || !n.Jobs[c.Job]
}

// The built-in scorers.

// utilization returns the used share, in MaxScore units, of the node's
// most used dimension in the class's tier once one more task is on it.
func utilization(c *Class, n *Node) int64 {
	capa, free := pool(n.Capacity, c.QoS), pool(n.Free, c.QoS)
	share := func(capacity, free, d int64) int64 {
		if capacity <= 0 {
			return 0
		}
		used := min(max(capacity-free+d, 0), capacity)
		return used * MaxScore / capacity
	}
	u := share(capa.CPU, free.CPU, c.Demand.CPU)
	u = max(u, share(capa.Memory, free.Memory, c.Demand.Memory))
	if c.Demand.GPUs > 0 {
		u = max(u, share(capa.GPUs, free.GPUs, c.Demand.GPUs))
	}
	return u
}

type binpackScorer struct{}

func (binpackScorer) Name() string                 { return api.ScorerBinpack }
func (binpackScorer) Cost(c *Class, n *Node) int64 { return MaxScore - utilization(c, n) }

type spreadScorer struct{}

func (spreadScorer) Name() string                 { return api.ScorerSpread }
func (spreadScorer) Cost(c *Class, n *Node) int64 { return utilization(c, n) }

// localityScorer charges every node the full score; the arcs to a group's
// preferred nodes are spared it (see build), which is how the preference is
// paid for.
type localityScorer struct{}

func (localityScorer) Name() string                 { return api.ScorerLocality }
func (localityScorer) Cost(c *Class, n *Node) int64 { return MaxScore }

// slotScorer charges the full score for tasks that cut a new slot; the
// arcs to a node's matching cached slots are spared it (see build).
type slotScorer struct{}

func (slotScorer) Name() string                 { return api.ScorerSlotReuse }
func (slotScorer) Cost(c *Class, n *Node) int64 { return MaxScore }

// matchingSlots counts n's cached slots a task of c can reuse.
func matchingSlots(c *Class, n *Node) int64 {
	var k int64
	for _, s := range n.Slots {
		if s.QoS == c.QoS && s.Shape == c.Demand {
			k++
		}
	}
	return k
}
