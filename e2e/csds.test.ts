/**
 * CSDS on the xDS port of a spawned `canopy serve`, read by a real gRPC client
 * of envoy.service.status.v3.ClientStatusDiscoveryService (as grpcdebug is):
 * one ClientConfig per stream; per resource its status (SYNCED, STALE for
 * sent and not acknowledged, ERROR with the NACK, NOT_SENT), the version the
 * client acknowledged (SotW: the response's version_info; delta: the
 * resource's version), last_updated, and the resource itself (xds_config)
 * unless the request excludes contents; the same state /debug/clients shows.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ClientStatus } from '../server/src/sessions/client-status.js';
import { envoyType } from '../server/test/support/envoy-protos.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { CsdsClient, type CsdsClientConfig, type CsdsResource } from './support/csds-client.js';
import { RawAdsStream, RawDeltaStream, type RawDeltaResponse, type RawResponse } from './support/raw-ads.js';

const CDS = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';

function service(name: string) {
  return {
    name,
    endpoints: [{ address: '127.0.0.2', port: 9001, locality: { region: 'r1', zone: 'z1', subzone: 's1' } }],
  };
}

const find = (rs: CsdsResource[], type: string, name: string) => rs.find((x) => x.type_url === type && x.name === name);

describe('CSDS', () => {
  let canopy: CanopyProcess;
  let csds: CsdsClient;
  const streams: (RawAdsStream | RawDeltaStream)[] = [];
  const started = Date.now();
  let cds: RawResponse;
  let eds: RawResponse;
  let stale: RawResponse;
  let nacked: RawDeltaResponse;
  let twinAcked: RawDeltaResponse;

  before(async () => {
    canopy = await startCanopyProcess({ server: { debounceMs: 20 }, services: [service('a'), service('b')] });
    const address = canopy.xdsUri.replace(/^.*:\/\//, '');
    csds = new CsdsClient(address);

    // A SotW client: CDS wildcard ACKed, EDS for a (ACKed) and for a name that does not exist.
    const sotw = new RawAdsStream(address);
    streams.push(sotw);
    sotw.send({
      node: { id: 'sotw-1', cluster: 'c1', locality: { region: 'r1', zone: 'z1' } },
      type_url: CDS,
      resource_names: [],
    });
    cds = await sotw.next();
    sotw.send({ type_url: CDS, version_info: cds.version_info, response_nonce: cds.nonce, resource_names: [] });
    sotw.send({ type_url: EDS, resource_names: ['a', 'ghost'] });
    eds = await sotw.next();
    sotw.send({
      type_url: EDS,
      version_info: eds.version_info,
      response_nonce: eds.nonce,
      resource_names: ['a', 'ghost'],
    });

    // A SotW client that has not acknowledged yet: STALE.
    const slow = new RawAdsStream(address);
    streams.push(slow);
    slow.send({ node: { id: 'stale-1', user_agent_name: 'envoy' }, type_url: CDS, resource_names: [] });
    stale = await slow.next();

    // A delta client that NACKs b.
    const delta = new RawDeltaStream(address);
    streams.push(delta);
    delta.send({
      node: { id: 'delta-1', cluster: 'c2', locality: { region: 'r2' } },
      type_url: EDS,
      resource_names_subscribe: ['b'],
    });
    nacked = await delta.next();
    delta.send({
      type_url: EDS,
      response_nonce: nacked.nonce,
      error_detail: { code: 3, message: 'b is not acceptable' },
    });

    // Two streams of one node id (a restarted sidecar whose old stream lingers): told apart.
    for (let i = 0; i < 2; i++) {
      const twin = new RawDeltaStream(address);
      streams.push(twin);
      twin.send({ node: { id: 'twin' }, type_url: EDS, resource_names_subscribe: ['a'] });
      twinAcked = await twin.next();
      twin.send({ type_url: EDS, response_nonce: twinAcked.nonce });
    }
    await settled(canopy);
  });
  after(async () => {
    for (const s of streams) s.close();
    csds?.close();
    await canopy?.stop();
  });

  it('an empty request (grpcdebug) gets every stream: status, acknowledged version, last_updated, the resource', async () => {
    const res = await csds.fetch({});
    assert.deepEqual(res.config.map((c) => c.node.id).sort(), ['delta-1', 'sotw-1', 'stale-1', 'twin', 'twin']);
    const sotw = res.config.find((c) => c.node.id === 'sotw-1')!;
    assert.equal(sotw.node.cluster, 'c1');
    assert.equal(sotw.node.locality.region, 'r1');
    assert.equal(sotw.client_scope, '', 'one stream: no scope needed');
    const a = find(sotw.generic_xds_configs, CDS, 'a')!;
    assert.equal(a.client_status, 'ACKED');
    assert.equal(a.config_status, 'SYNCED');
    assert.equal(a.version_info, cds.version_info, 'SotW: the version_info the client acknowledged');
    assert.equal(find(sotw.generic_xds_configs, CDS, 'b')?.client_status, 'ACKED');
    assert.equal(find(sotw.generic_xds_configs, EDS, 'a')?.version_info, eds.version_info);
    assert.equal(find(sotw.generic_xds_configs, EDS, 'ghost')?.client_status, 'DOES_NOT_EXIST');
    // last_updated: when it was sent.
    const at = Number(a.last_updated?.seconds) * 1000;
    assert.ok(at >= Math.floor(started / 1000) * 1000 && at <= Date.now(), `last_updated ${at}`);
    // xds_config: the Cluster itself, as sent.
    assert.equal(a.xds_config?.type_url, CDS);
    const cluster = envoyType('envoy.config.cluster.v3.Cluster').decode(a.xds_config!.value) as unknown as {
      name: string;
    };
    assert.equal(cluster.name, 'a');
    const sentBytes = cds.resources.find((r) => r.value.equals(a.xds_config!.value));
    assert.ok(sentBytes, 'the body is the bytes the client was sent');
  });

  it('STALE while sent and not acknowledged; ERROR with the rejected version after a NACK', async () => {
    const res = await csds.fetch({});
    const slow = res.config.find((c) => c.node.id === 'stale-1')!;
    assert.equal(slow.node.user_agent_name, 'envoy');
    const a = find(slow.generic_xds_configs, CDS, 'a')!;
    assert.equal(a.config_status, 'STALE');
    assert.equal(a.client_status, 'REQUESTED');
    assert.equal(a.version_info, stale.version_info, 'the version in flight');

    const delta = res.config.find((c) => c.node.id === 'delta-1')!;
    const b = find(delta.generic_xds_configs, EDS, 'b')!;
    assert.equal(b.client_status, 'NACKED');
    assert.equal(b.config_status, 'ERROR');
    assert.equal(b.error_state?.details, 'b is not acceptable');
    assert.equal(b.error_state?.version_info, nacked.resources[0]!.version, 'the version rejected');
    assert.equal(b.version_info, '', 'nothing acknowledged: the client runs no version of b');
  });

  it('tells two streams of one node apart, each with the version its client acknowledged (delta)', async () => {
    const twins = (await csds.fetch({})).config.filter((c) => c.node.id === 'twin');
    assert.equal(twins.length, 2);
    assert.ok(twins.every((t) => t.client_scope !== ''));
    assert.notEqual(twins[0]!.client_scope, twins[1]!.client_scope);
    for (const t of twins) {
      const a = find(t.generic_xds_configs, EDS, 'a')!;
      assert.equal(a.config_status, 'SYNCED');
      assert.equal(a.version_info, twinAcked.resources[0]!.version);
    }
  });

  it('exclude_resource_contents leaves the bodies out', async () => {
    const res = await csds.fetch({ exclude_resource_contents: true });
    const all = res.config.flatMap((c: CsdsClientConfig) => c.generic_xds_configs);
    assert.ok(all.length >= 8);
    assert.ok(all.every((r) => r.xds_config === null));
  });

  it('reports the same state as /debug/clients', async () => {
    const res = await csds.fetch({});
    const body = (await canopy.admin('GET', '/debug/clients')).body as { clients: ClientStatus[] };
    const fromDebug = body.clients
      .flatMap((c) =>
        c.types.flatMap((t) => (t.resources ?? []).map((r) => `${c.nodeId} ${t.typeUrl} ${r.name} ${r.state}`)),
      )
      .sort();
    const fromCsds = res.config
      .flatMap((c) => c.generic_xds_configs.map((r) => `${c.node.id} ${r.type_url} ${r.name} ${r.client_status}`))
      .sort();
    assert.deepEqual(fromCsds, fromDebug);
    assert.ok(fromCsds.length >= 8);
  });

  it('filters by node matchers and answers each request on a Stream', async () => {
    const only = await csds.fetch({ node_matchers: [{ node_id: { prefix: 'delta-' } }] });
    assert.deepEqual(
      only.config.map((c) => c.node.id),
      ['delta-1'],
    );
    const answers = await csds.stream([{}, { node_matchers: [{ node_id: { exact: 'sotw-1' } }] }]);
    assert.equal(answers.length, 2);
    assert.equal(answers[0]!.config.length, 5);
    assert.deepEqual(
      answers[1]!.config.map((c) => c.node.id),
      ['sotw-1'],
    );
  });
});

/** Waits until the clients' last requests were handled (their NACK/ACKs visible in /debug/clients). */
async function settled(canopy: CanopyProcess): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const body = (await canopy.admin('GET', '/debug/clients')).body as { clients: ClientStatus[] };
    const states = body.clients.flatMap((c) => c.types.flatMap((t) => (t.resources ?? []).map((r) => r.state)));
    if (states.includes('NACKED') && states.filter((s) => s === 'ACKED').length >= 5) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('clients did not settle');
}
