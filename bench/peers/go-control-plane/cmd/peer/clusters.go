package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// clusterSnapshots gives each node, on its first request, a snapshot with the one Cluster, whose EDS
// service name is the CLA of the node's locality: a hand-rolled server's usual way to send per-locality
// assignments from a cache that keys resources by name.
type clusterSnapshots struct {
	mesh  *mesh
	cache cachev3.SnapshotCache
	mu    sync.Mutex
	known map[string]bool
}

func newClusterSnapshots(m *mesh, c cachev3.SnapshotCache) *clusterSnapshots {
	return &clusterSnapshots{mesh: m, cache: c, known: map[string]bool{}}
}

func (s *clusterSnapshots) ensure(ctx context.Context, node *core.Node) error {
	if node == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.known[node.GetId()] {
		return nil
	}
	name, ok := s.mesh.claFor(node.GetLocality())
	if !ok {
		return fmt.Errorf("node %s: locality %v is not in the plan", node.GetId(), node.GetLocality())
	}
	c := &cluster.Cluster{
		Name:                 s.mesh.plan.Service,
		ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_EDS},
		ConnectTimeout:       durationpb.New(5 * time.Second),
		EdsClusterConfig: &cluster.Cluster_EdsClusterConfig{
			ServiceName: name,
			EdsConfig: &core.ConfigSource{
				ResourceApiVersion:    core.ApiVersion_V3,
				ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}},
			},
		},
	}
	snap, err := cachev3.NewSnapshot("1", map[resourcev3.Type][]types.Resource{resourcev3.ClusterType: {c}})
	if err != nil {
		return err
	}
	if err := s.cache.SetSnapshot(ctx, node.GetId(), snap); err != nil {
		return err
	}
	s.known[node.GetId()] = true
	return nil
}
