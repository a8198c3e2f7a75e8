/**
 * `node dist/bench/lazy-xds.js`: resources and bytes one Envoy sidecar is sent
 * for its initial sync in a mesh of 1,000 services (3 endpoints each, in
 * three regions) when it uses 10 of them: full (wildcard LDS/CDS, then EDS and
 * RDS for what they name) against lazy (the same requests, the 10 declared in
 * node metadata), over SotW and over delta. On delta an Envoy's CLAs name
 * LEDS collections, and the Envoy subscribes to those next: their members
 * are counted too (as a row of their own and in the delta total). Sizes are
 * deterministic: one run.
 */
import { Mesh } from '../server/src/domain/mesh.js';
import type { ServiceSpec } from '../server/src/domain/service.js';
import { serverClaCache } from '../server/src/resources/endpoint/endpoint.js';
import { canopyResources } from '../server/src/resources/registry.js';
import {
  CLUSTER_TYPE,
  ENDPOINT_TYPE,
  LEDS_TYPE,
  LISTENER_TYPE,
  ROUTE_TYPE,
} from '../server/src/resources/type-urls.js';
import { DeltaSession } from '../server/src/sessions/delta-session.js';
import { handleNow, type OutgoingResponse } from '../server/src/sessions/session.js';
import { SotwSession } from '../server/src/sessions/sotw-session.js';
import type { NodeInfo } from '../server/src/wire/request.js';
import { collectionsInResponse, deltaResponseHead } from './delta-wire.js';

const SERVICES = 1000;
const USED = 10;
const REGIONS = ['us-east', 'eu-west', 'ap-south'];

function mesh(): Mesh {
  const m = new Mesh();
  for (let i = 0; i < SERVICES; i++) {
    const spec: ServiceSpec = {
      name: `svc-${i}`,
      port: 8080,
      vip: `10.${(i >> 8) & 255}.${i & 255}.1`,
      outboundPort: 20000 + i,
      loadBalancing: {
        mode: 'failover',
        routingPreference: ['region', 'zone', 'subzone'],
        crossNetworkFailover: true,
        overprovisioningFactor: 140,
      },
      endpoints: REGIONS.map((region, k) => ({
        address: `10.${100 + k}.${(i >> 8) & 255}.${i & 255}`,
        port: 8080,
        locality: { region, zone: `${region}-1a`, subzone: 'rack1' },
        network: '',
        node: '',
        cluster: '',
        labels: {},
        health: 'healthy' as const,
        weight: 1,
      })),
    };
    m.put(spec);
  }
  return m;
}

function node(lazy: boolean): NodeInfo {
  const demand = Array.from({ length: USED }, (_, i) => `svc-${i * 97}`);
  return {
    id: `sidecar-${lazy ? 'lazy' : 'full'}`,
    cluster: '',
    locality: { region: 'us-east', zone: 'us-east-1a', subzone: 'rack1' },
    metadata: { 'canopy.lazy': lazy, 'canopy.demand': demand, 'canopy.outbound_address': '127.0.0.1' },
    userAgentName: 'envoy',
  };
}

interface Figures {
  resources: number;
  bytes: number;
}

function add(f: Figures, rs: readonly OutgoingResponse[]): void {
  for (const r of rs) {
    f.resources += r.names.length;
    f.bytes += r.bytes.length;
  }
}

function sotw(lazy: boolean): Figures {
  const s = new SotwSession(1, 'bench', canopyResources(mesh(), serverClaCache()));
  const f: Figures = { resources: 0, bytes: 0 };
  const n = node(lazy);
  const cds = handleNow(s, { versionInfo: '', node: n, resourceNames: [], typeUrl: CLUSTER_TYPE, responseNonce: '' });
  add(f, cds.responses);
  const clusters = cds.responses[0]!.names.length;
  const names = (s.status().types[0]?.resources ?? []).map((r) => r.name);
  add(f, handleNow(s, { versionInfo: '', resourceNames: names, typeUrl: ENDPOINT_TYPE, responseNonce: '' }).responses);
  const lds = handleNow(s, { versionInfo: '', resourceNames: [], typeUrl: LISTENER_TYPE, responseNonce: '' });
  add(f, lds.responses);
  add(f, handleNow(s, { versionInfo: '', resourceNames: names, typeUrl: ROUTE_TYPE, responseNonce: '' }).responses);
  if (clusters !== names.length) throw new Error('cluster names do not match');
  return f;
}

function delta(lazy: boolean): { all: Figures; leds: Figures } {
  const s = new DeltaSession(1, 'bench', canopyResources(mesh(), serverClaCache()));
  const f: Figures = { resources: 0, bytes: 0 };
  const leds: Figures = { resources: 0, bytes: 0 };
  const n = node(lazy);
  const req = (typeUrl: string, subscribe: string[], withNode = false) =>
    handleNow(s, {
      ...(withNode ? { node: n } : {}),
      typeUrl,
      subscribe,
      unsubscribe: [],
      initialVersions: {},
      responseNonce: '',
    });
  add(f, req(CLUSTER_TYPE, ['*'], true).responses);
  const names = (s.status().types[0]?.resources ?? []).map((r) => r.name);
  const eds = req(ENDPOINT_TYPE, names).responses;
  add(f, eds);
  // What Envoy fetches next: the LEDS collections its CLAs name.
  const collections = [...new Set(eds.flatMap((r) => collectionsInResponse(r.bytes, deltaResponseHead(r.bytes))))];
  if (collections.length > 0) {
    const members = req(LEDS_TYPE, collections).responses;
    add(leds, members);
    add(f, members);
  }
  add(f, req(LISTENER_TYPE, ['*']).responses);
  add(f, req(ROUTE_TYPE, names).responses);
  return { all: f, leds };
}

const deltaFull = delta(false);
const deltaLazy = delta(true);
const rows: [string, Figures, Figures][] = [
  ['SotW', sotw(false), sotw(true)],
  ['delta (LEDS members included)', deltaFull.all, deltaLazy.all],
  ['  of which LEDS members', deltaFull.leds, deltaLazy.leds],
];
process.stdout.write(
  `Lazy xDS: one Envoy sidecar using ${USED} of ${SERVICES} services (initial sync: CDS, EDS, LDS, RDS)\n`,
);
process.stdout.write('protocol | full resources | full bytes | lazy resources | lazy bytes | bytes saved\n');
for (const [name, full, lazy] of rows) {
  const saved = (100 * (1 - lazy.bytes / full.bytes)).toFixed(1);
  process.stdout.write(`${name} | ${full.resources} | ${full.bytes} | ${lazy.resources} | ${lazy.bytes} | ${saved}%\n`);
}
