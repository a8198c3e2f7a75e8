/**
 * CSDS on the xDS port, read by a real gRPC client of
 * envoy.service.status.v3.ClientStatusDiscoveryService: one ClientConfig per
 * connected node, each resource's version and status (ACKED, NACKED with its
 * error, DOES_NOT_EXIST), the same state /debug/clients shows.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { parseConfig } from '../server/src/domain/spec.js';
import { startCanopy, type Canopy } from '../server/src/main.js';
import type { ClientStatus } from '../server/src/sessions/client-status.js';
import { CsdsClient, type CsdsResource } from './support/csds-client.js';
import { RawAdsStream, RawDeltaStream } from './support/raw-ads.js';

const CDS = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';

function service(name: string) {
  return {
    name,
    endpoints: [{ address: '127.0.0.2', port: 9001, locality: { region: 'r1', zone: 'z1', subzone: 's1' } }],
  };
}

describe('CSDS', () => {
  let canopy: Canopy;
  let csds: CsdsClient;
  const streams: (RawAdsStream | RawDeltaStream)[] = [];

  before(async () => {
    const parsed = parseConfig({ services: [service('a'), service('b')] });
    assert.ok(parsed.ok);
    canopy = await startCanopy({
      config: parsed.value,
      host: '127.0.0.1',
      xdsPort: 0,
      adminPort: 0,
      debounceMs: 20,
      logger: pino({ level: 'silent' }),
    });
    csds = new CsdsClient(canopy.xdsAddress);

    // A SotW client: CDS wildcard ACKed, EDS for a (ACKed) and for a name that does not exist.
    const sotw = new RawAdsStream(canopy.xdsAddress);
    streams.push(sotw);
    sotw.send({ node: { id: 'sotw-1', cluster: 'c1', locality: { region: 'r1', zone: 'z1' } }, type_url: CDS, resource_names: [] });
    const cds = await sotw.next();
    sotw.send({ type_url: CDS, version_info: cds.version_info, response_nonce: cds.nonce, resource_names: [] });
    sotw.send({ type_url: EDS, resource_names: ['a', 'ghost'] });
    const eds = await sotw.next();
    sotw.send({ type_url: EDS, version_info: eds.version_info, response_nonce: eds.nonce, resource_names: ['a', 'ghost'] });

    // A delta client that NACKs b.
    const delta = new RawDeltaStream(canopy.xdsAddress);
    streams.push(delta);
    delta.send({ node: { id: 'delta-1', cluster: 'c2', locality: { region: 'r2' } }, type_url: EDS, resource_names_subscribe: ['b'] });
    const r = await delta.next();
    delta.send({ type_url: EDS, response_nonce: r.nonce, error_detail: { code: 3, message: 'b is not acceptable' } });
    await settled(canopy);
  });
  after(async () => {
    for (const s of streams) s.close();
    csds?.close();
    await canopy?.stop();
  });

  it('Fetch returns one ClientConfig per node with each resource status, version and error', async () => {
    const res = await csds.fetch();
    const ids = res.config.map((c) => c.node.id).sort();
    assert.deepEqual(ids, ['delta-1', 'sotw-1']);
    const sotw = res.config.find((c) => c.node.id === 'sotw-1')!;
    assert.equal(sotw.node.cluster, 'c1');
    assert.equal(sotw.node.locality.region, 'r1');
    const status = (rs: CsdsResource[], type: string, name: string) => rs.find((x) => x.type_url === type && x.name === name);
    assert.equal(status(sotw.generic_xds_configs, CDS, 'a')?.client_status, 'ACKED');
    assert.equal(status(sotw.generic_xds_configs, CDS, 'a')?.config_status, 'SYNCED');
    assert.equal(status(sotw.generic_xds_configs, CDS, 'b')?.client_status, 'ACKED');
    assert.equal(status(sotw.generic_xds_configs, EDS, 'a')?.client_status, 'ACKED');
    assert.equal(status(sotw.generic_xds_configs, EDS, 'ghost')?.client_status, 'DOES_NOT_EXIST');
    assert.ok(status(sotw.generic_xds_configs, EDS, 'a')?.version_info);

    const delta = res.config.find((c) => c.node.id === 'delta-1')!;
    const b = status(delta.generic_xds_configs, EDS, 'b');
    assert.equal(b?.client_status, 'NACKED');
    assert.equal(b?.config_status, 'ERROR');
    assert.equal(b?.error_state?.details, 'b is not acceptable');
  });

  it('reports the same state as /debug/clients', async () => {
    const res = await csds.fetch();
    const body = (await (await fetch(`http://${canopy.adminAddress}/debug/clients`)).json()) as { clients: ClientStatus[] };
    const fromDebug = body.clients
      .flatMap((c) => c.types.flatMap((t) => (t.resources ?? []).map((r) => `${c.nodeId} ${t.typeUrl} ${r.name} ${r.version} ${r.state}`)))
      .sort();
    const fromCsds = res.config
      .flatMap((c) => c.generic_xds_configs.map((r) => `${c.node.id} ${r.type_url} ${r.name} ${r.version_info} ${r.client_status}`))
      .sort();
    assert.deepEqual(fromCsds, fromDebug);
    assert.ok(fromCsds.length >= 5);
  });

  it('filters by node id and answers each request on a Stream', async () => {
    const only = await csds.fetch({ node_matchers: [{ node_id: { prefix: 'delta-' } }] });
    assert.deepEqual(
      only.config.map((c) => c.node.id),
      ['delta-1'],
    );
    const answers = await csds.stream([{}, { node_matchers: [{ node_id: { exact: 'sotw-1' } }] }]);
    assert.equal(answers.length, 2);
    assert.equal(answers[0]!.config.length, 2);
    assert.deepEqual(
      answers[1]!.config.map((c) => c.node.id),
      ['sotw-1'],
    );
  });
});

/** Waits until both clients' last requests were handled (their NACK/ACK visible in /debug/clients). */
async function settled(canopy: Canopy): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const body = (await (await fetch(`http://${canopy.adminAddress}/debug/clients`)).json()) as { clients: ClientStatus[] };
    const states = body.clients.flatMap((c) => c.types.flatMap((t) => (t.resources ?? []).map((r) => r.state)));
    if (states.includes('NACKED') && states.filter((s) => s === 'ACKED').length >= 3) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('clients did not settle');
}
