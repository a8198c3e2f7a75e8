package main

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

const (
	adsPath     = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"
	clusterType = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	claType     = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	maxReopens  = 5
)

// rawCodec leaves messages as bytes: requests are marshalled here, responses read only as far as needed.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}
func (rawCodec) Name() string { return "raw" }

// countingConn counts the bytes of one stream's connection, both ways.
type countingConn struct {
	net.Conn
	recv, sent *atomic.Int64
}

func (c countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.recv.Add(int64(n))
	return n, err
}

func (c countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.sent.Add(int64(n))
	return n, err
}

// serve runs stream i until the process ends, reopening it a few times after an error.
func (d *driver) serve(i int, s *stream) {
	counted := false
	for reopen := 0; reopen <= maxReopens; reopen++ {
		var err error
		if d.delta {
			err = d.exchangeDelta(i, s, &counted)
		} else {
			err = d.exchange(i, s, &counted)
		}
		say(map[string]any{"event": "error", "stream": i, "detail": err.Error()})
		time.Sleep(200 * time.Millisecond)
	}
}

// open dials the server for stream i (from its own source address when the driver spreads them) and
// opens one ADS stream at path, its bytes counted on s.
func (d *driver) open(i int, s *stream, path string) (*grpc.ClientConn, grpc.ClientStream, error) {
	d.opening <- struct{}{}
	defer func() { <-d.opening }()
	dialer := &net.Dialer{}
	if len(d.sources) > 0 {
		dialer.LocalAddr = &net.TCPAddr{IP: d.sources[i%len(d.sources)]}
	}
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, recv: &s.recv, sent: &s.sent}, nil
	}
	conn, err := grpc.NewClient("passthrough:///"+d.target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dial),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{}), grpc.MaxCallRecvMsgSize(64<<20)),
	)
	if err != nil {
		return nil, nil, err
	}
	st, err := conn.NewStream(context.Background(), &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, path)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, st, nil
}

func (d *driver) node(i int, s *stream) *core.Node {
	return &core.Node{
		Id:       fmt.Sprintf("bench-%d", i),
		Locality: &core.Locality{Region: s.locality[0], Zone: s.locality[1], SubZone: s.locality[2]},
	}
}

// holds records stream s's CLA and, the first time, that the stream holds one.
func (d *driver) holds(s *stream, cla []byte, size int, counted *bool) {
	d.received(s, cla, size)
	if !*counted {
		*counted = true
		d.first()
	}
}

// sendProto marshals m and sends its bytes (the stream's codec passes raw bytes through).
func sendProto(st grpc.ClientStream, m proto.Message) error {
	b, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	return st.SendMsg(&b)
}

func (d *driver) exchange(i int, s *stream, counted *bool) error {
	conn, st, err := d.open(i, s, adsPath)
	if err != nil {
		return err
	}
	defer conn.Close()
	send := func(r *discovery.DiscoveryRequest) error { return sendProto(st, r) }
	if err := send(&discovery.DiscoveryRequest{Node: d.node(i, s), TypeUrl: clusterType}); err != nil {
		return err
	}
	claName := ""
	for {
		var b []byte
		if err := st.RecvMsg(&b); err != nil {
			return err
		}
		env := envelope(b)
		switch env.typeURL {
		case clusterType:
			name, err := edsName(b)
			if err != nil {
				return err
			}
			if err := send(&discovery.DiscoveryRequest{TypeUrl: clusterType, VersionInfo: env.version, ResponseNonce: env.nonce}); err != nil {
				return err
			}
			if name != claName {
				claName = name
				if err := send(&discovery.DiscoveryRequest{TypeUrl: claType, ResourceNames: []string{name}}); err != nil {
					return err
				}
			}
		case claType:
			if err := send(&discovery.DiscoveryRequest{TypeUrl: claType, ResourceNames: []string{claName}, VersionInfo: env.version, ResponseNonce: env.nonce}); err != nil {
				return err
			}
			d.holds(s, env.resource, len(b), counted)
		}
	}
}

type responseEnvelope struct {
	version, nonce, typeURL string
	resource                []byte // the first resource's value (the Any's bytes)
}

// envelope reads a DiscoveryResponse's version, nonce, type URL and first resource, skipping the rest.
func envelope(b []byte) responseEnvelope {
	var e responseEnvelope
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return e
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
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
		case 2:
			if e.resource == nil {
				e.resource = anyValue(v)
			}
		case 4:
			e.typeURL = string(v)
		case 5:
			e.nonce = string(v)
		}
	}
	return e
}

// anyValue is an Any's value field.
func anyValue(b []byte) []byte {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return nil
		}
		if num == 2 && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b)
			return v
		}
		b = b[n:]
	}
	return nil
}

// edsName is the CLA the response's first Cluster names: its EDS service name, or else its own name.
func edsName(b []byte) (string, error) {
	var r discovery.DiscoveryResponse
	if err := proto.Unmarshal(b, &r); err != nil {
		return "", err
	}
	if len(r.Resources) == 0 {
		return "", fmt.Errorf("a CDS response without clusters")
	}
	return clusterEdsName(r.Resources[0].GetValue())
}

// clusterEdsName is the CLA an encoded Cluster names.
func clusterEdsName(b []byte) (string, error) {
	var c cluster.Cluster
	if err := proto.Unmarshal(b, &c); err != nil {
		return "", err
	}
	if n := c.GetEdsClusterConfig().GetServiceName(); n != "" {
		return n, nil
	}
	return c.GetName(), nil
}
