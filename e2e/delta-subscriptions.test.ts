/**
 * Delta subscriptions as Envoy makes them, over real DeltaAggregatedResources
 * streams against a spawned `canopy serve`; each test names the rule's source:
 * - xds_protocol.rst "How the client specifies what resources to return" and
 *   Envoy's DeltaSubscriptionState::isInitialRequestForLegacyWildcard: a legacy
 *   wildcard (empty first request) stays when names are subscribed after it
 *   (on-demand CDS on the wildcard CDS stream); only unsubscribing `*` ends it.
 * - DeltaSubscriptionState::updateSubscriptionInterest: a name subscribed again
 *   (held, or unsubscribed then subscribed) is sent again.
 * - WatchMap::watchesInterestedIn: an xdstp glob with context parameters
 *   (node_context_params) matches members named with the same parameters.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { envoyType } from '../server/test/support/envoy-protos.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { CDS, EDS, LEDS, globOfMember } from './support/envoy-peer.js';
import { RawDeltaStream, type RawDeltaResponse } from './support/raw-ads.js';

const QUIET_MS = 400;

function service(i: number, extra: Record<string, unknown> = {}) {
  return {
    port: 8080,
    endpoints: [
      { address: `127.0.32.${i}`, port: 8080, locality: { region: 'r1', zone: 'z1', subzone: 's1' } },
      { address: `127.0.33.${i}`, port: 8080, locality: { region: 'r1', zone: 'z2', subzone: 's1' } },
    ],
    ...extra,
  };
}

const node = (id: string, envoy = false) => ({
  id,
  cluster: 'test',
  locality: { region: 'r1', zone: 'z1', sub_zone: 's1' },
  ...(envoy
    ? { user_agent_name: 'envoy', metadata: { fields: { 'canopy.outbound_address': { stringValue: '127.0.0.1' } } } }
    : {}),
});

const names = (r: RawDeltaResponse) => r.resources.map((x) => x.name).sort();
const ack = (s: RawDeltaStream, r: RawDeltaResponse) => s.send({ type_url: r.type_url, response_nonce: r.nonce });

describe('delta subscriptions as Envoy makes them', () => {
  let canopy: CanopyProcess;
  const streams: RawDeltaStream[] = [];
  const open = () => {
    const s = new RawDeltaStream(canopy.xdsUri.replace(/^.*:\/\//, ''));
    streams.push(s);
    return s;
  };
  const put = async (name: string, i: number, extra: Record<string, unknown> = {}) => {
    const r = await canopy.admin('PUT', `/api/v1/services/${name}`, service(i, extra));
    assert.ok(r.status === 200 || r.status === 201, JSON.stringify(r.body));
  };

  before(async () => {
    canopy = await startCanopyProcess({
      server: { debounceMs: 20 },
      services: [
        { name: 'od-a', ...service(1) },
        { name: 'od-b', ...service(2) },
      ],
    });
  });
  after(async () => {
    for (const s of streams) s.close();
    await canopy?.stop();
  });

  it('isInitialRequestForLegacyWildcard: on-demand CDS after a legacy wildcard keeps the wildcard', async () => {
    const s = open();
    s.send({ node: node('odcds-1', true), type_url: CDS });
    const all = await s.next();
    assert.deepEqual(names(all), ['od-a', 'od-b']);
    ack(s, all);
    // On-demand CDS on the same stream: a name held through the wildcard (sent again) and one that does not exist.
    s.send({ type_url: CDS, resource_names_subscribe: ['od-b', 'od-missing'] });
    const od = await s.next();
    assert.deepEqual(names(od), ['od-b'], 'a name subscribed again is sent again');
    assert.deepEqual(od.removed_resources, ['od-missing']);
    ack(s, od);
    // The wildcard holds: a new cluster, a change and a removal all still arrive.
    await put('od-c', 3);
    const added = await s.next();
    assert.deepEqual(names(added), ['od-c'], 'a new cluster after on-demand CDS');
    ack(s, added);
    await put('od-a', 1, { connectTimeoutMs: 2000 });
    const changed = await s.next();
    assert.deepEqual(names(changed), ['od-a'], 'a change after on-demand CDS');
    ack(s, changed);
    await canopy.admin('DELETE', '/api/v1/services/od-a');
    const removed = await s.next();
    assert.deepEqual(removed.removed_resources, ['od-a'], 'a removal after on-demand CDS');
    ack(s, removed);
    await put('od-missing', 4);
    const created = await s.next();
    assert.deepEqual(names(created), ['od-missing'], 'the on-demand name once it exists');
    ack(s, created);
    // Only an explicit unsubscribe of * ends it (od-missing stays, named).
    s.send({ type_url: CDS, resource_names_unsubscribe: ['*'] });
    const after = await s.maybeNext(QUIET_MS);
    if (after) ack(s, after);
    await put('od-d', 5);
    assert.equal(await s.maybeNext(QUIET_MS), undefined, 'no wildcard after unsubscribing *');
    await canopy.admin('DELETE', '/api/v1/services/od-missing');
    assert.deepEqual((await s.next()).removed_resources, ['od-missing'], 'the named subscription remains');
  });

  it('updateSubscriptionInterest: a name subscribed again, or unsubscribed then subscribed, is sent again', async () => {
    await put('rs-a', 6);
    const s = open();
    s.send({ node: node('resub-1'), type_url: EDS, resource_names_subscribe: ['rs-a'] });
    const first = await s.next();
    assert.deepEqual(names(first), ['rs-a']);
    const version = first.resources[0]!.version;
    ack(s, first);
    s.send({ type_url: EDS, resource_names_subscribe: ['rs-a'] });
    const again = await s.next();
    assert.deepEqual(names(again), ['rs-a'], 'subscribe of a held name');
    assert.equal(again.resources[0]!.version, version, 'unchanged, sent again all the same');
    ack(s, again);
    s.send({ type_url: EDS, resource_names_unsubscribe: ['rs-a'] });
    assert.equal(await s.maybeNext(QUIET_MS), undefined, 'an unsubscribe is not answered');
    s.send({ type_url: EDS, resource_names_subscribe: ['rs-a'] });
    assert.deepEqual(names(await s.next()), ['rs-a'], 'unsubscribe then subscribe');

    // Under a wildcard the unsubscribed name stays held; subscribing it again still sends it.
    const w = open();
    w.send({ node: node('resub-2'), type_url: CDS });
    ack(w, await w.next());
    w.send({ type_url: CDS, resource_names_unsubscribe: ['rs-a'] });
    w.send({ type_url: CDS, resource_names_subscribe: ['rs-a'] });
    assert.deepEqual(names(await w.next()), ['rs-a']);
  });

  it('WatchMap::watchesInterestedIn: a LEDS glob with node context parameters gets its members, named with them', async () => {
    await put('ctx-a', 7);
    const s = open();
    s.send({ node: node('ctx-1', true), type_url: EDS, resource_names_subscribe: ['ctx-a'] });
    const cla = await s.next();
    assert.deepEqual(names(cla), ['ctx-a']);
    ack(s, cla);
    const claType = envoyType('envoy.config.endpoint.v3.ClusterLoadAssignment');
    const decoded = claType.toObject(claType.decode(cla.resources[0]!.resource!.value)) as {
      endpoints: { leds_cluster_locality_config?: { leds_collection_name: string } }[];
    };
    const globs = decoded.endpoints.flatMap((e) => e.leds_cluster_locality_config?.leds_collection_name ?? []);
    assert.ok(globs.length >= 1, 'the CLA names collections');
    const context = '?xds.node.cluster=test&xds.node.id=ctx-1';
    const glob = `${globs[0]!}${context}`;
    s.send({ type_url: LEDS, resource_names_subscribe: [glob] });
    const members = await s.next();
    assert.equal(members.type_url, LEDS);
    assert.deepEqual(members.removed_resources, [], 'the glob is recognised, not answered as removed');
    assert.ok(members.resources.length >= 1);
    for (const m of members.resources) {
      assert.equal(globOfMember(m.name), glob, `${m.name} matches the glob Envoy subscribed to`);
      assert.equal(m.resource?.type_url, LEDS);
    }
    ack(s, members);
    // A health flip: the member comes again, named with the parameters.
    const member = members.resources[0]!.name;
    const address = /\/([^/?]+)\?/.exec(member)![1]!;
    const flip = await canopy.admin('PATCH', `/api/v1/services/ctx-a/endpoints/${address}`, { health: 'unhealthy' });
    assert.equal(flip.status, 200, JSON.stringify(flip.body));
    const flipped = await s.next();
    assert.deepEqual(names(flipped), [member]);
    ack(s, flipped);
    // A reconnect that holds the members at their versions gets none of them again.
    const held = Object.fromEntries([...members.resources, ...flipped.resources].map((m) => [m.name, m.version]));
    const again = open();
    again.send({
      node: node('ctx-1', true),
      type_url: LEDS,
      resource_names_subscribe: [glob],
      initial_resource_versions: held,
    });
    const resumed = await again.next();
    assert.deepEqual([resumed.resources, resumed.removed_resources], [[], []], 'nothing to resend, nothing removed');
  });
});
