/**
 * What Canopy's LoadReportingService answers, over a real gRPC stream to
 * `canopy serve`: the clusters to report by the names each client knows them
 * by. A proxyless client of a re-created service knows its cluster as
 * `NAME@incarnation-N` (resources/incarnations.ts); a client without
 * send_all_clusters support reports only the clusters named, so naming
 * `NAME` there would leave that service without its reports. Envoy keeps the
 * service's name, and is named its clusters even though it supports
 * send_all_clusters (it would report every cluster it holds).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { RawLrsStream, type LoadStatsAnswer } from './support/raw-lrs.js';

const SEND_ALL = 'envoy.lrs.supports_send_all_clusters';
const locality = { region: 'r1', zone: 'za', sub_zone: 's' };
const grpcNode = { id: 'ccore-like', locality, user_agent_name: 'grpc-c', client_features: [] };
const envoyNode = { id: 'sidecar', locality, user_agent_name: 'envoy', client_features: [SEND_ALL] };
const spec = {
  loadBalancing: {
    mode: 'failover',
    routingPreference: ['region', 'zone', 'subzone'],
    loadAware: { balancing: 'waterfall', capacityRps: 10 },
  },
  endpoints: [{ address: '127.0.31.1', port: 8080, locality: { region: 'r1', zone: 'za', subzone: 's' } }],
};

const names = (a: LoadStatsAnswer) => [...a.clusters].sort();

describe('the LRS answer names clusters as each client knows them', { timeout: 60_000 }, () => {
  let canopy: CanopyProcess;
  const streams: RawLrsStream[] = [];
  const open = (node: object) => {
    const s = new RawLrsStream(canopy.xdsUri, node);
    streams.push(s);
    return s;
  };

  before(async () => {
    canopy = await startCanopyProcess({ server: { debounceMs: 20, loadReportingIntervalMs: 1000 }, services: [] });
    for (const name of ['echo', 'plain'])
      assert.equal(
        (await canopy.admin('PUT', `/api/v1/services/${name}`, name === 'plain' ? { endpoints: spec.endpoints } : spec))
          .status,
        201,
      );
  });
  after(async () => {
    for (const s of streams) s.close();
    await canopy?.stop();
  });

  it('names the load-aware clusters, with the interval; send_all_clusters only to a gRPC client that supports it', async () => {
    const g = await open(grpcNode).next();
    assert.deepEqual(names(g), ['echo']);
    assert.equal(g.send_all_clusters, false);
    assert.deepEqual(g.load_reporting_interval, { seconds: '1', nanos: 0 });
    const e = await open(envoyNode).next();
    assert.deepEqual(names(e), ['echo'], 'Envoy is named its clusters');
    assert.equal(e.send_all_clusters, false);
    const all = await open({ ...grpcNode, id: 'grpc-js-like', client_features: [SEND_ALL] }).next();
    assert.equal(all.send_all_clusters, true);
  });

  it('after the service is deleted and re-created, a proxyless client is named NAME@incarnation-1 and its reports count', async () => {
    const before = open({ ...grpcNode, id: 'before' });
    assert.deepEqual(names(await before.next()), ['echo']);
    const envoy = open({ ...envoyNode, id: 'envoy-before' });
    assert.deepEqual(names(await envoy.next()), ['echo']);
    assert.equal((await canopy.admin('DELETE', '/api/v1/services/echo')).status, 204);
    assert.equal((await canopy.admin('PUT', '/api/v1/services/echo', spec)).status, 201);
    await sleep(200);
    // A stream opened before is answered again on its next report, with the name its routes now use.
    before.report({});
    assert.deepEqual(names(await before.next()), ['echo@incarnation-1']);
    envoy.report({});
    assert.equal(await envoy.maybeNext(500), undefined, 'Envoy keeps the name: nothing new to say');
    const after = open({ ...grpcNode, id: 'after' });
    assert.deepEqual(names(await after.next()), ['echo@incarnation-1']);
    // What it reports under that name is the service's load.
    const deadline = Date.now() + 10_000;
    let offered = 0;
    while (Date.now() < deadline && offered < 15) {
      after.report({ 'echo@incarnation-1': [{ locality, issued: 20 }] });
      await sleep(300);
      const d = (await canopy.admin('GET', '/debug/load/echo')).body as { clientNodes?: { offeredRps: number }[] };
      offered = d.clientNodes?.reduce((t, n) => t + n.offeredRps, 0) ?? 0;
    }
    assert.ok(offered >= 15, `the re-created service's reports count: ${offered} rps`);
  });
});
