/**
 * Lazy xDS over a real delta ADS stream: a Canopy process with lazy xDS on
 * and 30 services (15 HTTP, 15 TCP); an Envoy-like sidecar node that declares
 * two services gets only those in its wildcard CDS, and in its wildcard LDS
 * every HTTP service (their listeners fetch a missing cluster on demand) and
 * the declared TCP one; it adds a TCP service by on-demand CDS (a named
 * subscribe) and gets its listener on the wildcard LDS at once, and has it
 * removed again once unsubscribed and unused.
 * A node that overrides the switch gets the whole mesh.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { RawDeltaStream, type RawDeltaResponse } from './support/raw-ads.js';

const CDS = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
const LDS = 'type.googleapis.com/envoy.config.listener.v3.Listener';
const NAMES = Array.from({ length: 30 }, (_, i) => `svc-${i}`);

function node(id: string, metadata: Record<string, { stringValue?: string; boolValue?: boolean }>) {
  return {
    id,
    locality: { region: 'r1', zone: 'z1', sub_zone: 's1' },
    user_agent_name: 'envoy',
    metadata: { fields: metadata },
  };
}

const names = (r: RawDeltaResponse) => r.resources.map((x) => x.name).sort();

describe('lazy xDS over delta ADS', () => {
  let canopy: CanopyProcess;
  const streams: RawDeltaStream[] = [];
  const open = () => {
    const s = new RawDeltaStream(canopy.xdsUri.replace(/^.*:\/\//, ''));
    streams.push(s);
    return s;
  };

  before(async () => {
    const services = NAMES.map((name, i) => ({
      name,
      port: 8080 + i,
      outboundPort: 20000 + i,
      ...(i >= 15 ? { protocol: 'tcp' } : {}),
      endpoints: [{ address: `127.0.23.${i + 1}`, port: 8080, locality: { region: 'r1', zone: 'z1', subzone: 's1' } }],
    }));
    canopy = await startCanopyProcess({
      server: { debounceMs: 20, lazyXds: { enabled: true, unusedTimeoutMs: 200 } },
      services,
    });
  });
  after(async () => {
    for (const s of streams) s.close();
    await canopy?.stop();
  });

  it('a sidecar gets what it declares, adds on demand, and loses what it stopped using', async () => {
    const s = open();
    const metadata = {
      'canopy.demand': { stringValue: 'svc-1,svc-20' },
      'canopy.outbound_address': { stringValue: '127.0.0.1' },
    };
    s.send({ node: node('lazy-1', metadata), type_url: CDS, resource_names_subscribe: ['*'] });
    const first = await s.next(5000);
    assert.deepEqual(names(first), ['svc-1', 'svc-20']);
    s.send({ type_url: CDS, response_nonce: first.nonce });
    s.send({ type_url: LDS, resource_names_subscribe: ['*'] });
    const lds = await s.next(5000);
    assert.deepEqual(names(lds), [...NAMES.slice(0, 15), 'svc-20'].sort());
    s.send({ type_url: LDS, response_nonce: lds.nonce });
    // On-demand CDS: a cluster by name (a TCP one, whose listener only the demand set brings).
    s.send({ type_url: CDS, resource_names_subscribe: ['svc-17'] });
    const od = await s.next(5000);
    assert.deepEqual(names(od), ['svc-17']);
    // docs/envoy.md "Lazy xDS": the on-demand service joins the demand set, so its listener follows at once.
    const odLds = await s.next(5000);
    assert.equal(odLds.type_url, LDS);
    assert.deepEqual(names(odLds), ['svc-17']);
    s.send({ type_url: CDS, response_nonce: od.nonce });
    s.send({ type_url: LDS, response_nonce: odLds.nonce });
    // Unsubscribed: after the unused timeout, the next push removes it (a mesh change triggers one).
    s.send({ type_url: CDS, resource_names_unsubscribe: ['svc-17'] });
    await new Promise((r) => setTimeout(r, 300));
    const put = await canopy.admin('PUT', '/api/v1/services/svc-29', {
      port: 8109,
      outboundPort: 20029,
      protocol: 'tcp',
      endpoints: [{ address: '127.0.23.99', port: 8080, locality: { region: 'r1', zone: 'z1', subzone: 's1' } }],
    });
    assert.equal(put.status, 200);
    let removed: string[] = [];
    for (let i = 0; i < 5 && !removed.includes('svc-17'); i++) {
      const r = await s.next(5000);
      removed = [...removed, ...r.removed_resources];
      s.send({ type_url: r.type_url, response_nonce: r.nonce });
    }
    assert.ok(removed.includes('svc-17'), `svc-17 removed, got ${removed.join(',')}`);
  });

  it('a node that overrides the switch gets the whole mesh', async () => {
    const s = open();
    s.send({
      node: node('full-1', { 'canopy.lazy': { boolValue: false } }),
      type_url: CDS,
      resource_names_subscribe: ['*'],
    });
    const r = await s.next(5000);
    assert.equal(r.resources.length, NAMES.length);
  });
});
