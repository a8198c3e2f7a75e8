/**
 * Real proxyless gRPC clients (@grpc/grpc-js-xds), each with its own
 * bootstrap and node.locality, against `canopy serve` as a child process and
 * real gRPC backends on 127.0.0.x that say who served each request.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startBackend, type Backend } from '../server/src/demo/backend.js';
import { xdsBootstrap } from '../server/src/demo/bootstrap.js';
import { formatTally, XdsEchoClient, type Tally } from '../server/src/demo/xds-client.js';
import { parseLocality } from '../server/src/domain/locality.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';

const BACKENDS: [id: string, host: string, locality: string][] = [
  ['b1', '127.0.10.1', 'r1/z1/s1'],
  ['b2', '127.0.10.2', 'r1/z1/s1'],
  ['b3', '127.0.10.3', 'r1/z1/s2'],
  ['b4', '127.0.10.4', 'r1/z2/s1'],
  ['b5', '127.0.10.5', 'r2/z1/s1'],
];

/** Every request went to one of `ids`, none failed, and every one of `ids` served some. */
const onlyAndAll = (ids: string[]) => (t: Tally) =>
  t.failures === 0 && [...t.byBackend.keys()].every((id) => ids.includes(id)) && ids.every((id) => t.byBackend.has(id));

describe('locality-aware routing with real xDS clients', () => {
  const backends: Backend[] = [];
  const clients = new Map<string, XdsEchoClient>();
  let canopy: CanopyProcess;

  const spec = (mode: 'failover' | 'strict', health: Record<string, string> = {}) => ({
    loadBalancing: { mode, routingPreference: ['region', 'zone', 'subzone'] },
    endpoints: backends.map((b, i) => ({
      address: b.address,
      port: b.port,
      locality: parseLocality(BACKENDS[i]?.[2]),
      health: health[b.id] ?? 'healthy',
    })),
  });

  const client = (locality: string): XdsEchoClient => {
    let c = clients.get(locality);
    if (!c) {
      c = new XdsEchoClient({
        target: 'xds:///echo',
        bootstrap: xdsBootstrap({
          serverUri: canopy.xdsUri,
          nodeId: `client-${locality}`,
          locality: parseLocality(locality),
        }),
      });
      clients.set(locality, c);
    }
    return c;
  };

  before(async () => {
    for (const [id, host, locality] of BACKENDS)
      backends.push(await startBackend({ id, host, locality: parseLocality(locality) }));
    canopy = await startCanopyProcess({
      server: { debounceMs: 20 },
      services: [{ name: 'echo', ...spec('failover') }],
    });
  });
  after(async () => {
    for (const c of clients.values()) c.close();
    await canopy?.stop();
    await Promise.all(backends.map((b) => b.stop()));
  });

  it('each client reaches only its nearest healthy backends', async () => {
    const cases: [string, string[]][] = [
      ['r1/z1/s1', ['b1', 'b2']],
      ['r1/z2/s1', ['b4']],
      ['r2/z1/s1', ['b5']],
      ['r1/z1/s9', ['b1', 'b2', 'b3']],
    ];
    for (const [locality, want] of cases) {
      await client(locality).waitUntil(onlyAndAll(want));
      const t = await client(locality).tally(40);
      assert.ok(onlyAndAll(want)(t), `${locality}: want only ${want.join(',')}, got ${formatTally(t)}`);
    }
  });

  it('marking the nearest backends unhealthy moves traffic to the next priority, and back', async () => {
    for (const b of backends.slice(0, 2)) {
      const r = await canopy.admin(
        'PATCH',
        `/api/v1/services/echo/endpoints/${encodeURIComponent(`${b.address}:${b.port}`)}`,
        { health: 'unhealthy' },
      );
      assert.equal(r.status, 200, JSON.stringify(r.body));
    }
    const a = client('r1/z1/s1');
    await a.waitUntil(onlyAndAll(['b3']));
    assert.ok(onlyAndAll(['b3'])(await a.tally(30)));
    // The other zone's client is not disturbed.
    assert.ok(onlyAndAll(['b4'])(await client('r1/z2/s1').tally(20)));
    for (const b of backends.slice(0, 2)) {
      await canopy.admin('PATCH', `/api/v1/services/echo/endpoints/${encodeURIComponent(`${b.address}:${b.port}`)}`, {
        health: 'healthy',
      });
    }
    await a.waitUntil(onlyAndAll(['b1', 'b2']));
  });

  it('in strict mode no request leaves the locality', async () => {
    const r = await canopy.admin('PUT', '/api/v1/services/echo', spec('strict'));
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const inside = client('r1/z1/s1');
    const outside = client('r1/z1/s9');
    await outside.waitUntil((t) => t.byBackend.size === 0 && t.failures > 0);
    for (let i = 0; i < 3; i++) {
      const t = await inside.tally(30);
      assert.ok(onlyAndAll(['b1', 'b2'])(t), `strict r1/z1/s1: ${formatTally(t)}`);
      const o = await outside.tally(10, { deadlineMs: 500 });
      assert.equal(o.byBackend.size, 0, `strict r1/z1/s9 must reach nothing, got ${formatTally(o)}`);
    }
    // With its own locality's backends unhealthy, a strict client gets nothing rather than another locality.
    await canopy.admin('PUT', '/api/v1/services/echo', spec('strict', { b1: 'unhealthy', b2: 'unhealthy' }));
    await inside.waitUntil((t) => t.byBackend.size === 0 && t.failures > 0);
  });

  it('deleting the service makes clients see it gone', async () => {
    await canopy.admin('PUT', '/api/v1/services/echo', spec('failover'));
    const c = client('r2/z1/s1');
    await c.waitUntil(onlyAndAll(['b5']));
    const r = await canopy.admin('DELETE', '/api/v1/services/echo');
    assert.equal(r.status, 204);
    const gone = await c.waitUntil((t) => t.byBackend.size === 0 && t.failures > 0);
    assert.match(gone.lastError ?? '', /UNAVAILABLE|does not exist|not found/i);
    assert.equal((await canopy.admin('GET', '/api/v1/services/echo')).status, 404);
  });

  it('the clients, strict xDS peers, NACKed nothing they were sent', async () => {
    const metrics = await fetch(`${canopy.adminUrl}/metrics`).then((r) => r.text());
    assert.match(metrics, /canopy_xds_acks_total\{type="EDS"\} [1-9]/);
    assert.doesNotMatch(metrics, /canopy_xds_nacks_total\{[^}]*\} [1-9]/);
    assert.deepEqual(
      canopy.logs().filter((l) => l.includes('NACK')),
      [],
    );
  });
});
