package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

type locality struct {
	Region  string `json:"region" yaml:"region"`
	Zone    string `json:"zone" yaml:"zone"`
	Subzone string `json:"subzone" yaml:"subzone"`
}

// plan is the bench's per-locality assignment, worked out from the fixture: which endpoints each
// client locality's CLA holds, grouped by locality and priority. It carries no bytes: the peer
// builds, serialises, versions and sends every CLA itself.
type plan struct {
	Service                string         `json:"service"`
	OverprovisioningFactor uint32         `json:"overprovisioningFactor"`
	Groups                 []planGroup    `json:"groups"`
	Clas                   [][]int        `json:"clas"`
	Clients                map[string]int `json:"clients"`
}

type planGroup struct {
	Priority  uint32   `json:"priority"`
	Locality  locality `json:"locality"`
	Endpoints []string `json:"endpoints"`
}

type endpointState struct {
	address string
	port    uint32
	weight  uint32
	healthy bool
	groups  []int // plan groups that hold this endpoint
}

// mesh holds the endpoints' health and the protos built from them. One LocalityLbEndpoints per plan
// group is shared by every CLA that holds the group; a flip rebuilds the groups holding the endpoint
// and the CLAs holding those groups.
type mesh struct {
	mu        sync.Mutex
	plan      plan
	endpoints map[string]*endpointState
	groups    []*endpoint.LocalityLbEndpoints // nil: no healthy endpoint left
	groupClas [][]int                         // plan group → CLAs holding it
	tree      *treeNode                       // computing mode: a client's CLA is its deepest match's
	encoded   [][]byte                        // encoded mode: each group's bytes (groups stays nil)
	parsed    time.Duration                   // reading and decoding the config file
}

func readJSON(file string, into any) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}

// loadMesh reads the config file and either the bench's plan (planFile set) or computes it (planFile "").
func loadMesh(configFile, planFile string, encoded bool) (*mesh, error) {
	t0 := time.Now()
	f, err := readFixture(configFile)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	parsed := time.Since(t0)
	if planFile == "" {
		p, root, err := computePlan(f)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		m, err := newMesh(f, p, encoded)
		if m != nil {
			m.tree, m.parsed = root, parsed
		}
		return m, err
	}
	var p plan
	if err := readJSON(planFile, &p); err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	m, err := newMesh(f, p, encoded)
	if m != nil {
		m.parsed = parsed
	}
	return m, err
}

// newMesh builds every plan group's and so every CLA's protos (encoded: bytes) from the fixture's endpoints.
func newMesh(f *fixture, p plan, encoded bool) (*mesh, error) {
	m := &mesh{endpoints: map[string]*endpointState{}, plan: p}
	if encoded {
		m.encoded = make([][]byte, len(p.Groups))
	}
	for _, s := range f.Services {
		if s.Name != m.plan.Service {
			continue
		}
		for _, e := range s.Endpoints {
			m.endpoints[endpointKey(e.Address, e.Port)] = &endpointState{
				address: e.Address, port: e.Port, weight: e.weight(), healthy: e.healthy(),
			}
		}
	}
	m.groups = make([]*endpoint.LocalityLbEndpoints, len(m.plan.Groups))
	m.groupClas = make([][]int, len(m.plan.Groups))
	for g, pg := range m.plan.Groups {
		for _, k := range pg.Endpoints {
			e, ok := m.endpoints[k]
			if !ok {
				return nil, fmt.Errorf("plan: groups[%d]: endpoint %s is not in the config", g, k)
			}
			e.groups = append(e.groups, g)
		}
		m.rebuildGroup(g)
	}
	for c, gs := range m.plan.Clas {
		for _, g := range gs {
			m.groupClas[g] = append(m.groupClas[g], c)
		}
	}
	return m, nil
}

func endpointKey(address string, port uint32) string {
	return fmt.Sprintf("%s:%d", address, port)
}

// claName is the EDS resource name of plan CLA c: the name the cluster of a node in that locality names.
func (m *mesh) claName(c int) string {
	return fmt.Sprintf("%s~%d", m.plan.Service, c)
}

// buildGroup is one locality at one priority: its healthy endpoints, weighted by their sum.
func (m *mesh) buildGroup(g int) *endpoint.LocalityLbEndpoints {
	pg := m.plan.Groups[g]
	out := &endpoint.LocalityLbEndpoints{
		Locality: &core.Locality{Region: pg.Locality.Region, Zone: pg.Locality.Zone, SubZone: pg.Locality.Subzone},
		Priority: pg.Priority,
	}
	var weight uint32
	for _, k := range pg.Endpoints {
		e := m.endpoints[k]
		if !e.healthy {
			continue
		}
		lb := &endpoint.LbEndpoint{HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{
			Address: &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
				Address:       e.address,
				PortSpecifier: &core.SocketAddress_PortValue{PortValue: e.port},
			}}},
		}}}
		if e.weight != 1 {
			lb.LoadBalancingWeight = wrapperspb.UInt32(e.weight)
		}
		out.LbEndpoints = append(out.LbEndpoints, lb)
		weight += e.weight
	}
	if len(out.LbEndpoints) == 0 {
		return nil
	}
	out.LoadBalancingWeight = wrapperspb.UInt32(weight)
	return out
}

func (m *mesh) buildCla(c int) *endpoint.ClusterLoadAssignment {
	out := &endpoint.ClusterLoadAssignment{
		ClusterName: m.claName(c),
		Policy: &endpoint.ClusterLoadAssignment_Policy{
			OverprovisioningFactor: wrapperspb.UInt32(m.plan.OverprovisioningFactor),
		},
	}
	for _, g := range m.plan.Clas[c] {
		if m.groups[g] != nil {
			out.Endpoints = append(out.Endpoints, m.groups[g])
		}
	}
	return out
}

// allClas is every CLA by resource name, for the LinearCache's initial resources.
func (m *mesh) allClas() map[string]types.Resource {
	out := make(map[string]types.Resource, len(m.plan.Clas))
	for c := range m.plan.Clas {
		out[m.claName(c)] = m.cla(c)
	}
	return out
}

// rebuildGroup brings plan group g up to its endpoints' health: its protos, or in the encoded mode its bytes.
func (m *mesh) rebuildGroup(g int) {
	if m.encoded != nil {
		m.encoded[g] = m.encodeGroup(g)
	} else {
		m.groups[g] = m.buildGroup(g)
	}
}

// cla is CLA c as the cache gets it: built from the groups' protos, or carrying their bytes.
func (m *mesh) cla(c int) *endpoint.ClusterLoadAssignment {
	if m.encoded != nil {
		return m.encodedCla(c)
	}
	return m.buildCla(c)
}

// setHealth applies one endpoint's health and hands the CLAs it changed to publish, under the lock, so
// that two changes reach the cache in the order they were applied.
func (m *mesh) setHealth(key string, healthy bool, publish func(map[string]types.Resource) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.endpoints[key]
	if !ok {
		return errNoEndpoint
	}
	if e.healthy == healthy {
		return nil
	}
	e.healthy = healthy
	touched := map[int]bool{}
	for _, g := range e.groups {
		m.rebuildGroup(g)
		for _, c := range m.groupClas[g] {
			touched[c] = true
		}
	}
	out := make(map[string]types.Resource, len(touched))
	for c := range touched {
		out[m.claName(c)] = m.cla(c)
	}
	return publish(out)
}

var errNoEndpoint = errors.New("no such endpoint")

// claFor names the CLA a node in this locality gets, if the plan has the locality.
func (m *mesh) claFor(l *core.Locality) (string, bool) {
	if m.tree != nil {
		return m.claName(m.tree.match(l).cla), true
	}
	c, ok := m.plan.Clients[l.GetRegion()+"|"+l.GetZone()+"|"+l.GetSubZone()]
	if !ok {
		return "", false
	}
	return m.claName(c), true
}
