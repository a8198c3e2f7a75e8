package main

// The encoded mode (--mode=encoded): what a Go engineer who profiled the protos mode would do. A flip's
// cost there is protobuf-go marshalling every CLA that holds the flipped endpoint, each ~70,000 small
// messages; but a CLA is only its name and policy plus its (locality, priority) groups, and the same
// group is in many CLAs. So each group is encoded once, when it changes, into the bytes of one
// `endpoints` entry (field 2), and a CLA carries its groups' bytes as its unknown fields: protobuf
// writes unknown fields verbatim, so the cache's marshal is a copy and the wire bytes are an ordinary
// ClusterLoadAssignment (its fields in the order 1, 4, 2, which decoders accept). Everything goes
// through go-control-plane's public API: the cache gets ordinary proto messages.

import (
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// claEndpointsField is ClusterLoadAssignment.endpoints.
const claEndpointsField = 2

// encodeGroup is plan group g as one `endpoints` entry of a CLA, tag and length included; nil when the
// group has no healthy endpoint (left out of every CLA, as the protos mode leaves it out).
func (m *mesh) encodeGroup(g int) []byte {
	group := m.buildGroupTogether(g)
	if group == nil {
		return nil
	}
	body, err := proto.Marshal(group)
	if err != nil {
		panic(err) // a message built here from valid fields always marshals
	}
	out := make([]byte, 0, len(body)+protowire.SizeTag(claEndpointsField)+protowire.SizeVarint(uint64(len(body))))
	out = protowire.AppendTag(out, claEndpointsField, protowire.BytesType)
	return protowire.AppendBytes(out, body)
}

// buildGroupTogether is buildGroup with one group's endpoint messages allocated side by side, in a few
// slices instead of five objects per endpoint: the one marshal per change walks memory in order.
func (m *mesh) buildGroupTogether(g int) *endpoint.LocalityLbEndpoints {
	pg := m.plan.Groups[g]
	healthy := make([]*endpointState, 0, len(pg.Endpoints))
	for _, k := range pg.Endpoints {
		if e := m.endpoints[k]; e.healthy {
			healthy = append(healthy, e)
		}
	}
	if len(healthy) == 0 {
		return nil
	}
	n := len(healthy)
	lbs := make([]endpoint.LbEndpoint, n)
	eps := make([]endpoint.Endpoint, n)
	addrs := make([]core.Address, n)
	sockets := make([]core.SocketAddress, n)
	out := &endpoint.LocalityLbEndpoints{
		Locality:    &core.Locality{Region: pg.Locality.Region, Zone: pg.Locality.Zone, SubZone: pg.Locality.Subzone},
		Priority:    pg.Priority,
		LbEndpoints: make([]*endpoint.LbEndpoint, n),
	}
	var weight uint32
	for i, e := range healthy {
		sockets[i].Address = e.address
		sockets[i].PortSpecifier = &core.SocketAddress_PortValue{PortValue: e.port}
		addrs[i].Address = &core.Address_SocketAddress{SocketAddress: &sockets[i]}
		eps[i].Address = &addrs[i]
		lbs[i].HostIdentifier = &endpoint.LbEndpoint_Endpoint{Endpoint: &eps[i]}
		if e.weight != 1 {
			lbs[i].LoadBalancingWeight = wrapperspb.UInt32(e.weight)
		}
		out.LbEndpoints[i] = &lbs[i]
		weight += e.weight
	}
	out.LoadBalancingWeight = wrapperspb.UInt32(weight)
	return out
}

// encodedCla is CLA c as its name and policy, its groups' cached encodings riding as unknown fields.
func (m *mesh) encodedCla(c int) *endpoint.ClusterLoadAssignment {
	out := &endpoint.ClusterLoadAssignment{
		ClusterName: m.claName(c),
		Policy: &endpoint.ClusterLoadAssignment_Policy{
			OverprovisioningFactor: wrapperspb.UInt32(m.plan.OverprovisioningFactor),
		},
	}
	size := 0
	for _, g := range m.plan.Clas[c] {
		size += len(m.encoded[g])
	}
	raw := make([]byte, 0, size)
	for _, g := range m.plan.Clas[c] {
		raw = append(raw, m.encoded[g]...)
	}
	out.ProtoReflect().SetUnknown(protoreflect.RawFields(raw))
	return out
}
