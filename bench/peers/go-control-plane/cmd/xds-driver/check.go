package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"
)

type assignment struct {
	Digest    string `json:"digest"`
	Groups    int    `json:"groups"`
	Endpoints int    `json:"endpoints"`
	// Per priority: "localities/endpoints", for a readable mismatch.
	Priorities []string `json:"priorities"`
}

// check writes, per client locality, what its last CLA decodes to: the digest of its assignment in a
// canonical form (groups by priority and locality, each with its weight and its endpoints with theirs,
// order within a level ignored; the overprovisioning factor) and counts.
func (d *driver) check(file string) error {
	d.mu.Lock()
	clas := map[string][]byte{}
	for _, s := range d.streams {
		if s.keep {
			clas[strings.Join(s.locality[:], "/")] = s.last
		}
	}
	d.mu.Unlock()
	outv := map[string]assignment{}
	for l, b := range clas {
		var c endpoint.ClusterLoadAssignment
		if err := proto.Unmarshal(b, &c); err != nil {
			return fmt.Errorf("locality %s: %w", l, err)
		}
		outv[l] = canonical(&c)
	}
	j, err := json.Marshal(outv)
	if err != nil {
		return err
	}
	return os.WriteFile(file, j, 0o644)
}

func canonical(c *endpoint.ClusterLoadAssignment) assignment {
	var groups []string
	perPriority := map[uint32][2]int{}
	total := 0
	for _, g := range c.GetEndpoints() {
		var eps []string
		for _, e := range g.GetLbEndpoints() {
			a := e.GetEndpoint().GetAddress().GetSocketAddress()
			w := uint32(1)
			if e.GetLoadBalancingWeight() != nil {
				w = e.GetLoadBalancingWeight().GetValue()
			}
			eps = append(eps, fmt.Sprintf("%s:%d*%d/%d", a.GetAddress(), a.GetPortValue(), w, e.GetHealthStatus()))
		}
		sort.Strings(eps)
		l := g.GetLocality()
		groups = append(groups, fmt.Sprintf("p%d %s/%s/%s w%d [%s]", g.GetPriority(), l.GetRegion(), l.GetZone(),
			l.GetSubZone(), g.GetLoadBalancingWeight().GetValue(), strings.Join(eps, " ")))
		pp := perPriority[g.GetPriority()]
		perPriority[g.GetPriority()] = [2]int{pp[0] + 1, pp[1] + len(eps)}
		total += len(eps)
	}
	sort.Strings(groups)
	h := sha256.New()
	fmt.Fprintf(h, "overprovisioning %d\n", c.GetPolicy().GetOverprovisioningFactor().GetValue())
	for _, g := range groups {
		fmt.Fprintln(h, g)
	}
	a := assignment{Digest: hex.EncodeToString(h.Sum(nil)), Groups: len(groups), Endpoints: total}
	for p := uint32(0); int(p) < len(perPriority); p++ {
		pp := perPriority[p]
		a.Priorities = append(a.Priorities, fmt.Sprintf("%d/%d", pp[0], pp[1]))
	}
	return a
}
