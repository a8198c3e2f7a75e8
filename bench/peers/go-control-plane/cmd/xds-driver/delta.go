package main

import (
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protowire"
)

const deltaPath = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources"

// exchangeDelta is exchange over delta ADS: CDS as a wildcard subscription, then the CLA its cluster
// names as one subscribed name; every response ACKed by its nonce.
func (d *driver) exchangeDelta(i int, s *stream, counted *bool) error {
	conn, st, err := d.open(i, s, deltaPath)
	if err != nil {
		return err
	}
	defer conn.Close()
	send := func(r *discovery.DeltaDiscoveryRequest) error { return sendProto(st, r) }
	if err := send(&discovery.DeltaDiscoveryRequest{Node: d.node(i, s), TypeUrl: clusterType}); err != nil {
		return err
	}
	claName := ""
	for {
		var b []byte
		if err := st.RecvMsg(&b); err != nil {
			return err
		}
		env := deltaEnvelope(b)
		if err := send(&discovery.DeltaDiscoveryRequest{TypeUrl: env.typeURL, ResponseNonce: env.nonce}); err != nil {
			return err
		}
		switch env.typeURL {
		case clusterType:
			if env.resource == nil {
				continue // removals only
			}
			name, err := clusterEdsName(env.resource)
			if err != nil {
				return err
			}
			if name != claName {
				req := &discovery.DeltaDiscoveryRequest{TypeUrl: claType, ResourceNamesSubscribe: []string{name}}
				if claName != "" {
					req.ResourceNamesUnsubscribe = []string{claName}
				}
				claName = name
				if err := send(req); err != nil {
					return err
				}
			}
		case claType:
			if env.resource != nil {
				d.holds(s, env.resource, len(b), counted)
			}
		}
	}
}

// deltaEnvelope reads a DeltaDiscoveryResponse's type URL, nonce and its first resource's value (the
// Any's bytes inside the Resource), skipping the rest.
func deltaEnvelope(b []byte) responseEnvelope {
	var e responseEnvelope
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return e
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return e
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return e
		}
		b = b[n:]
		switch num {
		case 1:
			e.version = string(v)
		case 2: // Resource: its field 2 is the Any
			if e.resource == nil {
				if any := field(v, 2); any != nil {
					e.resource = anyValue(any)
				}
			}
		case 4:
			e.typeURL = string(v)
		case 5:
			e.nonce = string(v)
		}
	}
	return e
}

// field is the first length-delimited field numbered num in a message's bytes (nil: none).
func field(b []byte, num protowire.Number) []byte {
	for len(b) > 0 {
		n0, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		if n0 == num && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b)
			return v
		}
		if n = protowire.ConsumeFieldValue(n0, typ, b); n < 0 {
			return nil
		}
		b = b[n:]
	}
	return nil
}
