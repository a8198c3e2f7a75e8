// The go-control-plane peer of Canopy's benchmarks (docs/benchmarks.md, "Against go-control-plane"):
// the same mesh from the same config file, served over ADS (SotW and delta) by go-control-plane's
// server. Each client locality's assignment either comes from the bench (--plan: worked out by
// Canopy's domain code) or, without --plan, is computed here from the config file, JSON or YAML, as a
// hand-rolled server would compute it for the one mode the bench's fixture uses (compute.go). ClusterLoadAssignments, one per distinct client locality's assignment, come from a
// LinearCache (each resource serialised once, however many streams get it); each node's Cluster,
// naming its locality's CLA, from a SnapshotCache keyed by node id. Changes arrive as Canopy's do:
// an HTTP PATCH of one endpoint's health.
//
//	peer --config FILE [--plan FILE] [--mode protos|encoded] [--host 127.0.0.1]
//
// --mode protos (the default, the idiomatic use) hands the cache CLAs built of protos, which it
// marshals; --mode encoded encodes each (locality, priority) group once and hands it CLAs carrying
// those bytes (encoded.go), so the cache's marshal is a copy: the strongest peer on the public API.
//
// stdout, one JSON line once it serves, after it has read the file and built every CLA:
// {"event":"ready","xds":HOST:PORT,"admin":HOST:PORT,"parseMs":…,"buildMs":…}.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
)

func main() {
	config := flag.String("config", "", "Canopy's config file (the fixture)")
	planFile := flag.String("plan", "", "the per-locality assignments, from the bench (none: computed from the config file)")
	host := flag.String("host", "127.0.0.1", "address to listen on (ports are ephemeral)")
	mode := flag.String("mode", "protos", "protos: the cache marshals CLAs of protos; encoded: each group encoded once, CLAs carry the bytes")
	flag.Parse()
	if *mode != "protos" && *mode != "encoded" {
		fmt.Fprintf(os.Stderr, "peer: --mode: protos or encoded, not %q\n", *mode)
		os.Exit(2)
	}
	if err := run(*config, *planFile, *host, *mode == "encoded"); err != nil {
		fmt.Fprintf(os.Stderr, "peer: %v\n", err)
		os.Exit(1)
	}
}

func run(config, planFile, host string, encoded bool) error {
	t0 := time.Now()
	m, err := loadMesh(config, planFile, encoded)
	if err != nil {
		return err
	}
	ctx := context.Background()
	endpoints := cachev3.NewLinearCache(resourcev3.EndpointType, cachev3.WithInitialResources(m.allClas()))
	built := time.Since(t0)
	clusters := cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil)
	mux := &cachev3.MuxCache{
		Classify:      func(r *cachev3.Request) string { return r.GetTypeUrl() },
		ClassifyDelta: func(r *cachev3.DeltaRequest) string { return r.GetTypeUrl() },
		Caches:        map[string]cachev3.Cache{resourcev3.EndpointType: endpoints, resourcev3.ClusterType: clusters},
	}
	snapshots := newClusterSnapshots(m, clusters)
	callbacks := serverv3.CallbackFuncs{
		StreamRequestFunc: func(_ int64, r *discovery.DiscoveryRequest) error {
			return snapshots.ensure(ctx, r.GetNode())
		},
		StreamDeltaRequestFunc: func(_ int64, r *discovery.DeltaDiscoveryRequest) error {
			return snapshots.ensure(ctx, r.GetNode())
		},
	}
	xds := serverv3.NewServer(ctx, mux, callbacks)
	g := grpc.NewServer(grpc.MaxConcurrentStreams(1 << 20))
	discovery.RegisterAggregatedDiscoveryServiceServer(g, xds)

	xl, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return err
	}
	al, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return err
	}
	go func() { _ = http.Serve(al, adminHandler(m, endpoints)) }()
	ready, _ := json.Marshal(map[string]any{
		"event": "ready", "xds": xl.Addr().String(), "admin": al.Addr().String(),
		// Where the time to ready went: the file's read and decode, then everything until the CLAs were built.
		"parseMs": ms(m.parsed), "buildMs": ms(built - m.parsed),
	})
	fmt.Println(string(ready))
	return g.Serve(xl)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
