/**
 * `canopy serve --config` on Istio, Kuma and Kubernetes documents, with real
 * gRPC backends on 127.0.14.x and real proxyless gRPC clients
 * (@grpc/grpc-js-xds) whose node metadata carries their labels: the policy
 * CLAs are accepted (no NACK) and route as the source system means.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startBackend, type Backend } from '../server/src/demo/backend.js';
import { xdsBootstrap } from '../server/src/demo/bootstrap.js';
import { formatTally, XdsEchoClient, type Tally } from '../server/src/demo/xds-client.js';
import { parseLocality, type Locality } from '../server/src/domain/locality.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';

const only = (ids: string[]) => (t: Tally) =>
  t.failures === 0 && [...t.byBackend.keys()].every((id) => ids.includes(id)) && ids.every((id) => t.byBackend.has(id));

describe('imported policies with real xDS clients', () => {
  const backends = new Map<string, Backend>();
  const clients: XdsEchoClient[] = [];
  let canopy: CanopyProcess;

  const b = (id: string) => backends.get(id)!;
  const client = (target: string, locality: Locality, metadata: Record<string, unknown>) => {
    const c = new XdsEchoClient({
      target: `xds:///${target}`,
      bootstrap: xdsBootstrap({ serverUri: canopy.xdsUri, nodeId: `client-${clients.length}`, locality, metadata }),
    });
    clients.push(c);
    return c;
  };

  before(async () => {
    const specs: [string, string, string][] = [
      ['v1-us', '127.0.14.1', 'us/us-a'],
      ['v2-us', '127.0.14.2', 'us/us-a'],
      ['v1-eu', '127.0.14.3', 'eu/eu-a'],
      ['k-n1', '127.0.14.11', '/zone-1'],
      ['k-n2', '127.0.14.12', '/zone-1'],
      ['k-z2', '127.0.14.13', '/zone-2'],
      ['w-za', '127.0.14.21', '/za'],
      ['w-zb', '127.0.14.22', '/zb'],
    ];
    for (const [id, host, loc] of specs)
      backends.set(id, await startBackend({ id, host, locality: parseLocality(loc) }));
    // A rollout: the old pod terminating (still serving), the new one not ready yet; one slice, one port.
    backends.set('t-old', await startBackend({ id: 't-old', host: '127.0.14.31', locality: parseLocality('/za') }));
    backends.set(
      't-new',
      await startBackend({ id: 't-new', host: '127.0.14.32', port: b('t-old').port, locality: parseLocality('/za') }),
    );
    const ep = (id: string) => `{ address: ${b(id).address}, ports: { grpc: ${b(id).port} }`;
    const dp = (id: string, zone: string, extra: string) =>
      `type: Dataplane\nmesh: default\nname: ${id}\nnetworking: { address: ${b(id).address}, inbound: [{ port: ${b(id).port}, tags: { kuma.io/service: backend, kuma.io/zone: ${zone}${extra} } }] }\n`;
    const config = [
      'server: { debounceMs: 20 }\nservices: []\n',
      `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: { name: reviews }
spec:
  host: reviews
  trafficPolicy:
    outlierDetection: { consecutive5xxErrors: 5 }
    loadBalancer:
      localityLbSetting:
        failoverPriority: [version]
`,
      `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: { name: reviews }
spec:
  hosts: [reviews]
  addresses: [10.96.0.77]
  ports: [{ number: 9080, name: grpc }]
  endpoints:
    - ${ep('v1-us')}, locality: us/us-a, labels: { version: v1 } }
    - ${ep('v2-us')}, locality: us/us-a, labels: { version: v2 } }
    - ${ep('v1-eu')}, locality: eu/eu-a, labels: { version: v1 } }
`,
      `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: ratings
  annotations: { networking.istio.io/traffic-distribution: PreferClose }
spec:
  hosts: [ratings]
  ports: [{ number: 9080, name: grpc }]
  endpoints:
    - ${ep('v1-us')}, locality: us/us-a }
    - ${ep('v1-eu')}, locality: eu/eu-a }
`,
      `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: { name: catalog }
spec:
  host: catalog
  trafficPolicy:
    loadBalancer:
      simple: ROUND_ROBIN
      zoneAwareLbSetting: { enabled: true, failover: [{ from: ap, to: eu }] }
`,
      `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: { name: catalog }
spec:
  hosts: [catalog]
  ports: [{ number: 9080, name: grpc }]
  endpoints:
    - ${ep('v1-us')}, locality: us/us-a }
    - ${ep('v2-us')}, locality: us/us-a }
    - ${ep('v1-eu')}, locality: eu/eu-a }
`,
      `apiVersion: kuma.io/v1alpha1
kind: MeshLoadBalancingStrategy
metadata: { name: backend-la }
spec:
  to:
    - targetRef: { kind: MeshService, labels: { kuma.io/display-name: backend, k8s.kuma.io/namespace: kuma-demo } }
      default:
        localityAwareness:
          localZone:
            affinityTags: [{ key: k8s.io/node, weight: 100000 }]
          crossZone:
            failover: [{ to: { type: Any } }]
`,
      dp('k-n1', 'zone-1', ', k8s.io/node: n1'),
      dp('k-n2', 'zone-1', ', k8s.io/node: n2'),
      dp('k-z2', 'zone-2', ''),
      `apiVersion: v1
kind: Service
metadata: { name: web }
spec:
  ports: [{ port: 80 }]
  trafficDistribution: PreferSameZone
`,
      `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: web-1, labels: { kubernetes.io/service-name: web } }
addressType: IPv4
ports: [{ port: ${b('w-za').port} }]
endpoints:
  - { addresses: [${b('w-za').address}], zone: za }
`,
    ].join('---\n');
    // The two web backends listen on different ports; the slice has one port, so zb gets its own slice.
    const slice2 = `---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: { name: web-2, labels: { kubernetes.io/service-name: web } }\naddressType: IPv4\nports: [{ port: ${b('w-zb').port} }]\nendpoints:\n  - { addresses: [${b('w-zb').address}], zone: zb }\n`;
    const rollout = `---
apiVersion: v1
kind: Service
metadata: { name: rollout }
spec: { ports: [{ port: 80 }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: rollout-1, labels: { kubernetes.io/service-name: rollout } }
addressType: IPv4
ports: [{ port: ${b('t-old').port} }]
endpoints:
  - { addresses: [${b('t-old').address}], zone: za, conditions: { ready: false, serving: true, terminating: true } }
  - { addresses: [${b('t-new').address}], zone: za, conditions: { ready: false, serving: false, terminating: false } }
`;
    // Bare metal: nodes, no zones; each backend its own port, so its own slice.
    const bare = ['k-n1', 'k-n2']
      .map(
        (id, i) => `---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: bare-${i}, labels: { kubernetes.io/service-name: bare } }
addressType: IPv4
ports: [{ port: ${b(id).port} }]
endpoints:
  - { addresses: [${b(id).address}], nodeName: n${i + 1} }
`,
      )
      .join('');
    const bareService = `---
apiVersion: v1
kind: Service
metadata: { name: bare }
spec: { ports: [{ port: 80 }], trafficDistribution: PreferSameNode }
`;
    canopy = await startCanopyProcess(config + slice2 + rollout + bareService + bare);
  });
  after(async () => {
    for (const c of clients) c.close();
    await canopy?.stop();
    await Promise.all([...backends.values()].map((x) => x.stop()));
  });

  it('Istio failoverPriority: a v1 client (Istio LABELS metadata) reaches v1 only, then v2 when v1 is gone', async () => {
    const c = client('reviews', parseLocality('us/us-a'), { LABELS: { version: 'v1' } });
    await c.waitUntil(only(['v1-us', 'v1-eu']));
    const t = await c.tally(40);
    assert.ok(only(['v1-us', 'v1-eu'])(t), formatTally(t));
    for (const id of ['v1-us', 'v1-eu']) {
      const r = await canopy.admin(
        'PATCH',
        `/api/v1/services/reviews/endpoints/${encodeURIComponent(`${b(id).address}:${b(id).port}`)}`,
        { health: 'unhealthy' },
      );
      assert.equal(r.status, 200, JSON.stringify(r.body));
    }
    await c.waitUntil(only(['v2-us']));
  });

  it('Istio traffic-distribution annotation on a ServiceEntry: traffic stays local, no DestinationRule needed', async () => {
    const us = client('ratings', parseLocality('us/us-a'), {});
    const eu = client('ratings', parseLocality('eu/eu-b'), {});
    await us.waitUntil(only(['v1-us']));
    await eu.waitUntil(only(['v1-eu']));
    assert.ok(only(['v1-us'])(await us.tally(20)));
    assert.ok(only(['v1-eu'])(await eu.tally(20)));
  });

  it('Istio zoneAwareLbSetting: the client’s region first (any zone), its failover region next', async () => {
    const us = client('catalog', parseLocality('us/us-b'), {});
    const ap = client('catalog', parseLocality('ap/ap-a'), {});
    await us.waitUntil(only(['v1-us', 'v2-us']));
    await ap.waitUntil(only(['v1-eu']));
    assert.ok(only(['v1-us', 'v2-us'])(await us.tally(30)));
    assert.ok(only(['v1-eu'])(await ap.tally(20)));
  });

  it('Kuma affinity: the same-node locality outweighs the rest of the zone; the other zone is only a failover target', async () => {
    const c = client('backend', { region: '', zone: 'zone-1', subzone: '' }, { labels: { 'k8s.io/node': 'n1' } });
    await c.waitUntil((t) => t.failures === 0 && t.byBackend.has('k-n1'));
    const t = await c.tally(100);
    assert.equal(t.failures, 0, formatTally(t));
    assert.ok((t.byBackend.get('k-n1') ?? 0) >= 95, `weight 100000 : 1, got ${formatTally(t)}`);
    assert.ok(!t.byBackend.has('k-z2'), formatTally(t));
    for (const id of ['k-n1', 'k-n2']) {
      await canopy.admin(
        'PATCH',
        `/api/v1/services/backend/endpoints/${encodeURIComponent(`${b(id).address}:${b(id).port}`)}`,
        { health: 'unhealthy' },
      );
    }
    await c.waitUntil(only(['k-z2']));
  });

  it('Kubernetes PreferSameZone: a client in za stays in za', async () => {
    const c = client('web', { region: '', zone: 'za', subzone: '' }, {});
    await c.waitUntil(only(['w-za']));
    assert.ok(only(['w-za'])(await c.tally(30)));
  });

  it('Kubernetes, every endpoint terminating: the serving ones get the traffic until a ready one appears (kube-proxy)', async () => {
    const c = client('rollout', { region: '', zone: 'za', subzone: '' }, {});
    await c.waitUntil(only(['t-old']));
    assert.ok(only(['t-old'])(await c.tally(20)));
    const r = await canopy.admin(
      'PATCH',
      `/api/v1/services/rollout/endpoints/${encodeURIComponent(`${b('t-new').address}:${b('t-new').port}`)}`,
      { health: 'healthy' },
    );
    assert.equal(r.status, 200, JSON.stringify(r.body));
    await c.waitUntil(only(['t-new']));
    // The new pod fails too: the terminating one serves again rather than nothing.
    await canopy.admin(
      'PATCH',
      `/api/v1/services/rollout/endpoints/${encodeURIComponent(`${b('t-new').address}:${b('t-new').port}`)}`,
      { health: 'unhealthy' },
    );
    await c.waitUntil(only(['t-old']));
  });

  it('Kubernetes PreferSameNode with nodes but no zones: each client stays on its node', async () => {
    const n1 = client('bare', { region: '', zone: 'za', subzone: '' }, { node: 'n1' });
    const n2 = client('bare', { region: '', zone: '', subzone: '' }, { node: 'n2' });
    await n1.waitUntil(only(['k-n1']));
    await n2.waitUntil(only(['k-n2']));
    assert.ok(only(['k-n1'])(await n1.tally(20)));
    assert.ok(only(['k-n2'])(await n2.tally(20)));
  });

  it('the clients NACKed nothing they were sent', async () => {
    const metrics = await fetch(`${canopy.adminUrl}/metrics`).then((r) => r.text());
    assert.match(metrics, /canopy_xds_acks_total\{type="EDS"\} [1-9]/);
    assert.doesNotMatch(metrics, /canopy_xds_nacks_total\{[^}]*\} [1-9]/);
  });

  it('the server says which policy features node agents cannot apply', () => {
    const warn = canopy.logs().find((l) => l.includes('kernel tree cannot express'));
    assert.ok(warn, 'a warning is logged');
    assert.deepEqual(
      (JSON.parse(warn) as { service: string; unsupportedPolicy: string }).unsupportedPolicy,
      'failoverPriority',
    );
  });
});
