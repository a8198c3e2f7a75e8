package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// fixture is the part of Canopy's config file the peer reads: its services' load balancing and endpoints,
// with Canopy's defaults for what the file leaves out (health healthy, weight 1, failover by region,
// zone and subzone, overprovisioning 140).
type fixture struct {
	Services []service `json:"services" yaml:"services"`
}

type service struct {
	Name          string            `json:"name" yaml:"name"`
	LoadBalancing loadBalancing     `json:"loadBalancing" yaml:"loadBalancing"`
	Endpoints     []fixtureEndpoint `json:"endpoints" yaml:"endpoints"`
}

type loadBalancing struct {
	Mode                   string   `json:"mode" yaml:"mode"`
	RoutingPreference      []string `json:"routingPreference" yaml:"routingPreference"`
	OverprovisioningFactor uint32   `json:"overprovisioningFactor" yaml:"overprovisioningFactor"`
	// What this peer does not compute: set, the computing mode refuses the service.
	Policy    any `json:"policy" yaml:"policy"`
	Reach     any `json:"reach" yaml:"reach"`
	LoadAware any `json:"loadAware" yaml:"loadAware"`
}

type fixtureEndpoint struct {
	Address  string   `json:"address" yaml:"address"`
	Port     uint32   `json:"port" yaml:"port"`
	Locality locality `json:"locality" yaml:"locality"`
	Health   string   `json:"health" yaml:"health"`
	Weight   uint32   `json:"weight" yaml:"weight"`
}

func (e *fixtureEndpoint) healthy() bool { return e.Health == "" || e.Health == "healthy" }

func (e *fixtureEndpoint) weight() uint32 {
	if e.Weight == 0 {
		return 1
	}
	return e.Weight
}

// readFixture reads the config file as Canopy does: .json files as JSON, anything else as YAML.
func readFixture(file string) (*fixture, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var f fixture
	switch strings.ToLower(filepath.Ext(file)) {
	case ".json":
		err = json.Unmarshal(b, &f)
	default:
		err = yaml.Unmarshal(b, &f)
	}
	if err != nil {
		return nil, err
	}
	return &f, nil
}
