#!/usr/bin/env bash
# Builds the real kube-apiserver the Kubernetes tests start, into a cache
# outside the repository keyed by this module's files, and prints its path.
# A second run with the same files prints the cached binary at once; Go's
# build cache makes a rebuild after a version bump incremental.
set -euo pipefail
cd "$(dirname "$0")"
command -v go >/dev/null || { echo "build.sh: needs Go 1.26 or newer on PATH (https://go.dev/dl/)" >&2; exit 1; }
key=$(cat go.mod go.sum cmd/*/main.go | sha256sum | cut -c1-16)
out="${CANOPY_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/canopy-kube}/$key"
if [ ! -x "$out/kube-apiserver" ]; then
  mkdir -p "$out"
  start=$(date +%s)
  GOFLAGS=-mod=mod CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags=-s \
    -o "$out/kube-apiserver.tmp" ./cmd/kube-apiserver
  mv "$out/kube-apiserver.tmp" "$out/kube-apiserver"
  echo "built kube-apiserver in $(($(date +%s) - start)) s" >&2
fi
echo "$out/kube-apiserver"
