package main

// The computing mode: the peer works out each client locality's assignment from the config file itself,
// as a hand-rolled server would for this one mode, failover by region, zone and subzone (Canopy's
// docs/locality-and-policies.md). It is not a second Canopy: no other mode, no policy, no reach, no
// load-aware weights, and like the bench's plan it starts from a fixture whose endpoints are all healthy.
//
// The rule: a client's best endpoints are those of the deepest node of the region → zone → subzone tree
// its own locality reaches; priority 1 is that node's parent's subtree less the node, and so on up to
// the root, with empty tiers left out so that priorities stay dense. Each tier is one group per subzone
// (a leaf), weighted by the sum of its endpoints' weights. Every tree node is some client's deepest
// match, so the peer builds one CLA per node, before it says it is ready.

import (
	"fmt"
	"slices"
	"sort"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// treeNode is one region, zone or subzone (the root: depth 0) of the service's healthy endpoints.
type treeNode struct {
	value    string
	depth    int
	parent   *treeNode
	children map[string]*treeNode
	ordered  []*treeNode // children by value
	count    int         // endpoints in the subtree
	keys     []string    // a leaf's endpoint keys, sorted
	leaves   []*treeNode // the subtree's leaves, depth-first
	cla      int         // this node's CLA: the plan's index of a client whose deepest match it is
	groupAt  [4]int      // a leaf's plan group at each priority, plus one (0: none yet)
}

func (n *treeNode) child(value string) *treeNode {
	c := n.children[value]
	if c == nil {
		c = &treeNode{value: value, depth: n.depth + 1, parent: n, children: map[string]*treeNode{}}
		n.children[value] = c
	}
	return c
}

// match is the deepest node on the locality's path.
func (n *treeNode) match(l *core.Locality) *treeNode {
	at := n
	for _, v := range []string{l.GetRegion(), l.GetZone(), l.GetSubZone()} {
		c := at.children[v]
		if c == nil {
			break
		}
		at = c
	}
	return at
}

// order sorts children and endpoint keys and lists each node's leaves; it returns the nodes pre-order.
func (n *treeNode) order(out []*treeNode) []*treeNode {
	out = append(out, n)
	if n.depth == 3 {
		sort.Strings(n.keys)
		n.leaves = []*treeNode{n}
		return out
	}
	for _, c := range n.children {
		n.ordered = append(n.ordered, c)
	}
	sort.Slice(n.ordered, func(i, j int) bool { return n.ordered[i].value < n.ordered[j].value })
	for _, c := range n.ordered {
		out = c.order(out)
		n.leaves = append(n.leaves, c.leaves...)
	}
	return out
}

var defaultScopes = []string{"region", "zone", "subzone"}

// computePlan builds the tree of the file's one service and every node's CLA as a plan: the same data
// the bench's plan carries, so that health changes take the same path in both modes. No service: no
// tree (no client gets a CLA).
func computePlan(f *fixture) (plan, *treeNode, error) {
	switch {
	case len(f.Services) == 0:
		return plan{}, nil, nil
	case len(f.Services) > 1:
		return plan{}, nil, fmt.Errorf("services: the computing mode serves one service, the file has %d", len(f.Services))
	}
	s := &f.Services[0]
	lb := s.LoadBalancing
	if (lb.Mode != "" && lb.Mode != "failover") || lb.Policy != nil || lb.Reach != nil || lb.LoadAware != nil ||
		(lb.RoutingPreference != nil && !slices.Equal(lb.RoutingPreference, defaultScopes)) {
		return plan{}, nil, fmt.Errorf("services[0].loadBalancing: the computing mode does failover by region, zone and subzone only")
	}
	root := &treeNode{children: map[string]*treeNode{}}
	for i := range s.Endpoints {
		e := &s.Endpoints[i]
		if !e.healthy() {
			return plan{}, nil, fmt.Errorf("services[0].endpoints[%d]: the computing mode starts with every endpoint healthy", i)
		}
		leaf := root.child(e.Locality.Region).child(e.Locality.Zone).child(e.Locality.Subzone)
		leaf.keys = append(leaf.keys, endpointKey(e.Address, e.Port))
		for n := leaf; n != nil; n = n.parent {
			n.count++
		}
	}
	p := plan{Service: s.Name, OverprovisioningFactor: lb.OverprovisioningFactor}
	if p.OverprovisioningFactor == 0 {
		p.OverprovisioningFactor = 140
	}
	for _, n := range root.order(nil) {
		n.cla = len(p.Clas)
		p.Clas = append(p.Clas, p.tiers(n))
	}
	return p, root, nil
}

// tiers is the groups of the CLA of a client whose deepest match is m: each ancestor's leaves less the
// child already taken, one priority per non-empty tier.
func (p *plan) tiers(m *treeNode) []int {
	var out []int
	priority := uint32(0)
	var prev *treeNode
	for n := m; n != nil; prev, n = n, n.parent {
		if prev != nil && n.count == prev.count {
			continue
		}
		for _, leaf := range n.leaves {
			if prev != nil && within(leaf, prev) {
				continue
			}
			if leaf.groupAt[priority] == 0 {
				leaf.groupAt[priority] = len(p.Groups) + 1
				p.Groups = append(p.Groups, planGroup{
					Priority:  priority,
					Locality:  locality{Region: leaf.parent.parent.value, Zone: leaf.parent.value, Subzone: leaf.value},
					Endpoints: leaf.keys,
				})
			}
			out = append(out, leaf.groupAt[priority]-1)
		}
		priority++
	}
	return out
}

// within: whether the leaf is in n's subtree.
func within(leaf, n *treeNode) bool {
	for a := leaf; a != nil; a = a.parent {
		if a == n {
			return true
		}
	}
	return false
}
