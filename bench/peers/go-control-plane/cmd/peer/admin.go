package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/pprof"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
)

// adminHandler takes a health change the way Canopy's admin API does:
// PATCH /api/v1/services/{service}/endpoints/{address:port} with {"health":"healthy"|"unhealthy"}.
func adminHandler(m *mesh, endpoints *cachev3.LinearCache) http.Handler {
	mux := http.NewServeMux()
	// Where the peer's time goes (docs/benchmarks.md, section P): go tool pprof http://ADMIN/debug/pprof/profile?seconds=N
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("PATCH /api/v1/services/{service}/endpoints/{endpoint}", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Health string `json:"health"`
		}
		if r.PathValue("service") != m.plan.Service {
			http.Error(w, `{"code":"NOT_FOUND","message":"no such service"}`, http.StatusNotFound)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || (body.Health != "healthy" && body.Health != "unhealthy") {
			http.Error(w, `{"code":"BAD_REQUEST","message":"health: healthy or unhealthy"}`, http.StatusBadRequest)
			return
		}
		err := m.setHealth(r.PathValue("endpoint"), body.Health == "healthy", func(clas map[string]types.Resource) error {
			if len(clas) == 0 {
				return nil
			}
			return endpoints.UpdateResources(clas, nil)
		})
		switch {
		case errors.Is(err, errNoEndpoint):
			http.Error(w, `{"code":"NOT_FOUND","message":"no such endpoint"}`, http.StatusNotFound)
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		default:
			w.Header().Set("content-type", "application/json")
			_, _ = w.Write([]byte(`{"ok":true}`))
		}
	})
	return mux
}
