/**
 * loadBalancing.reach against `canopy serve` as a child process: a raw ADS
 * stream decodes the CLA with Envoy's protos to see which priorities it holds,
 * and a real proxyless gRPC client (@grpc/grpc-js-xds) shows where traffic
 * goes, while the admin API marks endpoints unhealthy.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startBackend, type Backend } from '../server/src/demo/backend.js';
import { xdsBootstrap } from '../server/src/demo/bootstrap.js';
import { formatTally, XdsEchoClient, type Tally } from '../server/src/demo/xds-client.js';
import { parseLocality } from '../server/src/domain/locality.js';
import { envoyType } from '../server/test/support/envoy-protos.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { RawAdsStream, type RawResponse } from './support/raw-ads.js';

const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const QUIET_MS = 400;

// Seen from r1/z1/s1 the tiers are {b1,b2}, {b3}, {b4}, {b5}.
const BACKENDS: [id: string, host: string, locality: string][] = [
  ['b1', '127.0.11.1', 'r1/z1/s1'],
  ['b2', '127.0.11.2', 'r1/z1/s1'],
  ['b3', '127.0.11.3', 'r1/z1/s2'],
  ['b4', '127.0.11.4', 'r1/z2/s1'],
  ['b5', '127.0.11.5', 'r2/z1/s1'],
];

interface DecodedCla {
  endpoints?: {
    priority?: number;
    lb_endpoints?: { endpoint?: { address?: { socket_address?: { address?: string } } } }[];
  }[];
}

/** Backend ids per priority, as an xDS peer decodes the CLA. */
function prioritiesOf(r: RawResponse, idOf: (host: string) => string): string[][] {
  assert.equal(r.resources.length, 1);
  const cla = envoyType('envoy.config.endpoint.v3.ClusterLoadAssignment').toObject(
    envoyType('envoy.config.endpoint.v3.ClusterLoadAssignment').decode(r.resources[0]!.value),
    {
      defaults: true,
    },
  ) as DecodedCla;
  const out: string[][] = [];
  for (const g of cla.endpoints ?? []) {
    const hosts = (g.lb_endpoints ?? []).map((e) => idOf(e.endpoint?.address?.socket_address?.address ?? ''));
    (out[g.priority ?? 0] ??= []).push(...hosts);
  }
  return out.map((ids) => ids.sort());
}

const onlyAndAll = (ids: string[]) => (t: Tally) =>
  t.failures === 0 && [...t.byBackend.keys()].every((id) => ids.includes(id)) && ids.every((id) => t.byBackend.has(id));

describe('reach: a capped CLA with a raw ADS peer and a real gRPC client', () => {
  const backends: Backend[] = [];
  let canopy: CanopyProcess;
  let ads: RawAdsStream;
  let grpcClient: XdsEchoClient;
  const idOf = (host: string) => BACKENDS.find((b) => b[1] === host)?.[0] ?? host;

  const endpoints = () =>
    backends.map((b, i) => ({ address: b.address, port: b.port, locality: parseLocality(BACKENDS[i]?.[2]) }));
  const setHealth = async (id: string, health: 'healthy' | 'unhealthy') => {
    const b = backends.find((x) => x.id === id)!;
    const r = await canopy.admin(
      'PATCH',
      `/api/v1/services/echo/endpoints/${encodeURIComponent(`${b.address}:${b.port}`)}`,
      {
        health,
      },
    );
    assert.equal(r.status, 200, JSON.stringify(r.body));
  };
  /** The next CLA pushed to the raw peer, ACKed. */
  const nextCla = async () => {
    const r = await ads.next(5000);
    assert.equal(r.type_url, EDS);
    ads.send({ type_url: EDS, version_info: r.version_info, response_nonce: r.nonce, resource_names: ['echo'] });
    return prioritiesOf(r, idOf);
  };

  before(async () => {
    for (const [id, host, locality] of BACKENDS)
      backends.push(await startBackend({ id, host, locality: parseLocality(locality) }));
    canopy = await startCanopyProcess({
      server: { debounceMs: 20 },
      services: [
        { name: 'echo', loadBalancing: { mode: 'failover', reach: { minEndpoints: 2 } }, endpoints: endpoints() },
      ],
    });
    ads = new RawAdsStream(canopy.xdsUri);
    ads.send({
      node: { id: 'raw-reach', cluster: 'test', locality: { region: 'r1', zone: 'z1', sub_zone: 's1' } },
      type_url: EDS,
      resource_names: ['echo'],
    });
    grpcClient = new XdsEchoClient({
      target: 'xds:///echo',
      bootstrap: xdsBootstrap({ serverUri: canopy.xdsUri, nodeId: 'grpc-reach', locality: parseLocality('r1/z1/s1') }),
    });
  });
  after(async () => {
    grpcClient?.close();
    ads?.close();
    await canopy?.stop();
    await Promise.all(backends.map((b) => b.stop()));
  });

  it('sends only the tiers needed to hold minEndpoints', async () => {
    assert.deepEqual(await nextCla(), [['b1', 'b2']]);
    await grpcClient.waitUntil(onlyAndAll(['b1', 'b2']));
  });

  it('a change in a tier outside the CLA pushes nothing to the client', async () => {
    const b5 = backends[4]!;
    const r = await canopy.admin(
      'PATCH',
      `/api/v1/services/echo/endpoints/${encodeURIComponent(`${b5.address}:${b5.port}`)}`,
      {
        weight: 5,
      },
    );
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(await ads.maybeNext(QUIET_MS), undefined, 'b5 is not in this client’s CLA');
  });

  it('an unhealthy endpoint brings in the next tier; traffic moves once the first tier is empty', async () => {
    await setHealth('b1', 'unhealthy');
    assert.deepEqual(await nextCla(), [['b2'], ['b3']]);
    await grpcClient.waitUntil(onlyAndAll(['b2']));
    await setHealth('b2', 'unhealthy');
    assert.deepEqual(await nextCla(), [['b3'], ['b4']]);
    const moved = await grpcClient.waitUntil(onlyAndAll(['b3']));
    assert.ok(onlyAndAll(['b3'])(moved), formatTally(moved));
    assert.ok(onlyAndAll(['b3'])(await grpcClient.tally(30)));
  });

  it('recovery shrinks the CLA back to the nearest tier', async () => {
    await setHealth('b1', 'healthy');
    assert.deepEqual(await nextCla(), [['b1'], ['b3']]);
    await setHealth('b2', 'healthy');
    assert.deepEqual(await nextCla(), [['b1', 'b2']]);
    await grpcClient.waitUntil(onlyAndAll(['b1', 'b2']));
  });

  it('the peers NACKed nothing', async () => {
    const metrics = await fetch(`${canopy.adminUrl}/metrics`).then((r) => r.text());
    assert.doesNotMatch(metrics, /canopy_xds_nacks_total\{[^}]*\} [1-9]/);
  });
});
