/** GET/POST /debug/explain through fastify's inject(), and `canopy explain` against a listening admin API. */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { Registry } from 'prom-client';
import { buildAdminApp } from '../src/admin/app.js';
import { ClaCache } from '../src/domain/cla-cache.js';
import type { Cla } from '../src/domain/cla.js';
import { importDocuments } from '../src/policy/import.js';
import { LocalStore } from '../src/store/level/local-store.js';
import { MeshFeed } from '../src/store/mesh-feed.js';

const run = promisify(execFile);
const CLI = new URL('../src/cli/canopy.js', import.meta.url).pathname;

async function setup() {
  const store = await LocalStore.open();
  const feed = await MeshFeed.open(store);
  const encode = (cla: Cla) => new TextEncoder().encode(JSON.stringify(cla.groups.map((g) => [g.priority, g.weight])));
  const app = buildAdminApp({
    store,
    mesh: feed.mesh,
    caughtUp: (revision) => feed.caughtUp(revision),
    claCache: new ClaCache(encode),
    registry: new Registry(),
    clients: () => [],
    ready: () => true,
  });
  return { store, feed, app };
}

const echo = {
  loadBalancing: { mode: 'failover' },
  endpoints: [
    { address: '127.0.0.1', port: 80, locality: { region: 'r1', zone: 'z1', subzone: 's1' } },
    { address: '127.0.0.2', port: 80, locality: { region: 'r1', zone: 'z2', subzone: 's1' }, weight: 3 },
    { address: '127.0.0.3', port: 80, locality: { region: 'r2', zone: 'z3', subzone: 's1' } },
    { address: '127.0.0.4', port: 80, locality: { region: 'r3', zone: 'z4', subzone: 's1' } },
    { address: '127.0.0.5', port: 80, locality: { region: 'r1', zone: 'z1', subzone: 's1' }, health: 'unhealthy' },
  ],
};

interface Explain {
  service: string;
  client: {
    locality: { region: string; zone: string; subzone: string };
    network: string;
    node: string;
    cluster: string;
    labels: Record<string, string>;
  };
  cacheKey: string;
  treeNode: string[];
  overprovisioningFactor: number;
  endpoints: {
    address: string;
    port: number;
    locality: object;
    health: string;
    weight: number;
    priority: number | null;
    reason: string;
  }[];
  localities: {
    locality: { region: string; zone: string; subzone: string };
    priority: number;
    weight: number;
    healthyEndpoints: number;
    share: number;
  }[];
  envoy: {
    priorities: { hosts: number; healthy: number; health: number; load: number; panic: boolean }[];
    shares: Record<string, number>;
  };
}

const prio = (x: Explain) => Object.fromEntries(x.endpoints.map((e) => [e.address, e.priority]));

async function put(app: Awaited<ReturnType<typeof setup>>['app'], name: string, body: object) {
  const res = await app.inject({ method: 'PUT', url: `/api/v1/services/${name}`, payload: body });
  assert.ok(res.statusCode < 300, res.body);
}

describe('/debug/explain', () => {
  it('explains every endpoint, the localities’ shares and the cache key, in the agreed shape', async () => {
    const { app } = await setup();
    await put(app, 'echo', echo);
    const res = await app.inject({
      url: '/debug/explain?service=echo&region=r1&zone=z1&subzone=s9&node=n1&label.team=a',
    });
    assert.equal(res.statusCode, 200, res.body);
    const x = res.json() as Explain;
    assert.deepEqual(Object.keys(x), [
      'service',
      'client',
      'cacheKey',
      'treeNode',
      'overprovisioningFactor',
      'endpoints',
      'envoy',
      'localities',
    ]);
    // gRPC sends everything to .1; an Envoy counts the unhealthy .5 beside it (unhealthy: count) and spills 30%.
    assert.deepEqual(x.envoy.shares, { '127.0.0.1:80': 0.7, '127.0.0.2:80': 0.3 });
    assert.deepEqual(
      x.envoy.priorities.map((p) => [p.hosts, p.healthy, p.health, p.load, p.panic]),
      [
        [2, 1, 70, 70, false],
        [1, 1, 100, 30, false],
        [2, 2, 100, 0, false],
      ],
    );
    assert.deepEqual(x.client, {
      locality: { region: 'r1', zone: 'z1', subzone: 's9' },
      network: '',
      node: 'n1',
      cluster: '',
      labels: { team: 'a' },
    });
    assert.deepEqual(x.treeNode, ['r1', 'z1'], 'the deepest matched node');
    assert.equal(x.overprovisioningFactor, 140);
    assert.deepEqual(prio(x), { '127.0.0.1': 0, '127.0.0.2': 1, '127.0.0.3': 2, '127.0.0.4': 2, '127.0.0.5': null });
    assert.match(x.endpoints[4]!.reason, /unhealthy: left out/);
    assert.match(x.endpoints[0]!.reason, /same region, zone as the client/);
    assert.deepEqual(Object.keys(x.endpoints[0]!), [
      'address',
      'port',
      'locality',
      'health',
      'weight',
      'priority',
      'reason',
    ]);
    assert.deepEqual(
      x.localities.map((l) => [l.priority, l.weight, l.healthyEndpoints, l.share]),
      [
        [0, 1, 1, 1],
        [1, 3, 1, 0],
        [2, 1, 1, 0],
        [2, 1, 1, 0],
      ],
    );
    // The same key and priorities as the CLA the cache serves.
    const cla = (
      await app.inject({ url: '/debug/cla?service=echo&region=r1&zone=z1&subzone=s9&node=n1&label.team=a' })
    ).json() as {
      key: string;
      priorities: { priority: number; localities: { endpoints: { address: string }[] }[] }[];
    };
    assert.equal(x.cacheKey, cla.key);
    const fromCla = Object.fromEntries(
      cla.priorities.flatMap((p) => p.localities.flatMap((l) => l.endpoints.map((e) => [e.address, p.priority]))),
    );
    assert.deepEqual(fromCla, Object.fromEntries(Object.entries(prio(x)).filter(([, p]) => p !== null)));
  });

  it('gives each p0 locality its share by weight (gRPC: priority 0 takes every request)', async () => {
    const { app } = await setup();
    await put(app, 'w', { ...echo, loadBalancing: { mode: 'random' } });
    const x = (await app.inject({ url: '/debug/explain?service=w' })).json() as Explain;
    const shares = Object.fromEntries(x.localities.map((l) => [`${l.locality.region}/${l.locality.zone}`, l.share]));
    assert.deepEqual(shares, { 'r1/z1': 1 / 6, 'r1/z2': 3 / 6, 'r2/z3': 1 / 6, 'r3/z4': 1 / 6 });
  });

  it('answers bad queries with 400 and the parameter’s path, and an unknown service with 404', async () => {
    const { app } = await setup();
    await put(app, 'echo', echo);
    const missing = await app.inject({ url: '/debug/explain?zone=z1' });
    assert.equal(missing.statusCode, 400);
    assert.deepEqual(missing.json().error.fields, [{ path: 'query.service', message: 'is required' }]);
    assert.equal(missing.json().error.code, 'CANOPY_BAD_REQUEST');
    const unknown = await app.inject({ url: '/debug/explain?service=echo&zoen=z1&zone=a&zone=b' });
    assert.equal(unknown.statusCode, 400);
    assert.deepEqual(
      unknown.json().error.fields.map((f: { path: string }) => f.path),
      ['query.zoen', 'query.zone'],
    );
    await put(app, 'empty', { endpoints: [] });
    const empty = (await app.inject({ url: '/debug/explain?service=empty&zone=z1' })).json() as Explain;
    assert.deepEqual([empty.treeNode, empty.endpoints, empty.localities], [[], [], []]);
    const none = await app.inject({ url: '/debug/explain?service=nope' });
    assert.equal(none.statusCode, 404);
    assert.equal(none.json().error.code, 'CANOPY_SERVICE_NOT_FOUND');
    const badPolicy = await app.inject({
      url: `/debug/explain?service=echo&policy=${encodeURIComponent('mode: sometimes\npolicy: { failover: { rules: 3 } }')}`,
    });
    assert.equal(badPolicy.statusCode, 400);
    assert.deepEqual(
      badPolicy
        .json()
        .error.fields.map((f: { path: string }) => f.path)
        .sort(),
      ['policy.mode', 'policy.policy.failover.rules'],
    );
  });

  it('?policy= shows the current and proposed CLAs and the endpoints that would move', async () => {
    const { app } = await setup();
    await put(app, 'echo', echo);
    const proposal =
      'mode: failover\npolicy:\n  failover:\n    rules:\n      - from: [r1]\n        to: { type: only, values: [r3] }\n';
    const res = await app.inject({
      url: `/debug/explain?service=echo&region=r1&zone=z1&subzone=s1&policy=${encodeURIComponent(proposal)}`,
    });
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json() as {
      current: Explain;
      proposed: Explain;
      diff: { endpoint: string; current: { priority: number }; proposed: { priority: number } }[];
    };
    assert.deepEqual(Object.keys(body), ['current', 'proposed', 'diff', 'settings', 'warnings']);
    assert.deepEqual(prio(body.proposed), {
      '127.0.0.1': 0,
      '127.0.0.2': 1,
      '127.0.0.4': 2,
      '127.0.0.3': 3,
      '127.0.0.5': null,
    });
    assert.deepEqual(
      body.diff.map((d) => [d.endpoint, d.current.priority, d.proposed.priority]),
      [['127.0.0.3:80', 2, 3]],
    );
    // Nothing was applied.
    const after = (
      await app.inject({ url: '/debug/explain?service=echo&region=r1&zone=z1&subzone=s1' })
    ).json() as Explain;
    assert.equal(after.endpoints[2]!.priority, 2);
  });

  it('POST takes Istio, Kuma or Kubernetes documents as the proposal', async () => {
    const { app } = await setup();
    await put(app, 'echo', echo);
    const dr = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: { name: echo }
spec:
  host: echo
  trafficPolicy:
    loadBalancer:
      localityLbSetting:
        distribute:
          - from: "r1/*"
            to: { "r1/z1/*": 75, "r1/z2/*": 25 }
`;
    const res = await app.inject({
      method: 'POST',
      url: '/debug/explain?service=echo&region=r1&zone=z1',
      payload: dr,
      headers: { 'content-type': 'application/yaml' },
    });
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json() as { proposed: Explain; diff: { endpoint: string }[] };
    assert.deepEqual(prio(body.proposed), {
      '127.0.0.1': 0,
      '127.0.0.2': 0,
      '127.0.0.3': null,
      '127.0.0.4': null,
      '127.0.0.5': null,
    });
    assert.deepEqual(
      body.proposed.localities.map((l) => [l.weight, l.share]),
      [
        [75, 0.75],
        [25, 0.25],
      ],
    );
    assert.match(body.proposed.endpoints[2]!.reason, /distribute rule 0 .* claims no pattern/);
    assert.deepEqual(body.diff.map((d) => d.endpoint).sort(), [
      '127.0.0.1:80',
      '127.0.0.2:80',
      '127.0.0.3:80',
      '127.0.0.4:80',
    ]);
    const bad = await app.inject({
      method: 'POST',
      url: '/debug/explain?service=echo',
      payload: dr.replace('75', '70'),
      headers: { 'content-type': 'application/yaml' },
    });
    assert.equal(bad.statusCode, 400);
    assert.equal(
      bad.json().error.fields[0].path,
      'policy[0].spec.trafficPolicy.loadBalancer.localityLbSetting.distribute[0].to',
    );
  });
});

/** One worked example per source system (the README's), each imported and explained. */
describe('worked examples', () => {
  const cases = [
    {
      system: 'istio',
      text: `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: { name: reviews }
spec:
  host: reviews
  trafficPolicy:
    outlierDetection: { consecutive5xxErrors: 5 }
    loadBalancer:
      localityLbSetting:
        failoverPriority: [topology.istio.io/network, version]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: { name: reviews }
spec:
  hosts: [reviews]
  ports: [{ number: 9080, name: http }]
  endpoints:
    - { address: 127.0.1.1, locality: us/us-a, network: n1, labels: { version: v1 } }
    - { address: 127.0.1.2, locality: us/us-b, network: n1, labels: { version: v2 } }
    - { address: 127.0.1.3, locality: eu/eu-a, network: n2, labels: { version: v1 } }
`,
      query: 'service=reviews&region=us&zone=us-a&network=n1&label.version=v1',
      want: { '127.0.1.1': 0, '127.0.1.2': 1, '127.0.1.3': 2 },
    },
    {
      system: 'kuma',
      text: `type: MeshLoadBalancingStrategy
mesh: default
name: backend-la
spec:
  to:
    - targetRef: { kind: MeshService, name: backend }
      default:
        localityAwareness:
          localZone:
            affinityTags: [{ key: k8s.io/node }, { key: k8s.io/az }]
          crossZone:
            failover:
              - to: { type: Only, zones: [zone-2] }
---
type: Dataplane
mesh: default
name: b1
networking: { address: 127.0.2.1, inbound: [{ port: 8080, tags: { kuma.io/service: backend, kuma.io/zone: zone-1, k8s.io/node: n1, k8s.io/az: a } }] }
---
type: Dataplane
mesh: default
name: b2
networking: { address: 127.0.2.2, inbound: [{ port: 8080, tags: { kuma.io/service: backend, kuma.io/zone: zone-1, k8s.io/node: n2, k8s.io/az: a } }] }
---
type: Dataplane
mesh: default
name: b3
networking: { address: 127.0.2.3, inbound: [{ port: 8080, tags: { kuma.io/service: backend, kuma.io/zone: zone-2 } }] }
---
type: Dataplane
mesh: default
name: b4
networking: { address: 127.0.2.4, inbound: [{ port: 8080, tags: { kuma.io/service: backend, kuma.io/zone: zone-3 } }] }
`,
      query: 'service=backend&zone=zone-1&label.k8s.io/node=n1&label.k8s.io/az=a',
      want: { '127.0.2.1': 0, '127.0.2.2': 0, '127.0.2.3': 1, '127.0.2.4': null },
    },
    {
      system: 'k8s',
      text: `apiVersion: v1
kind: Service
metadata: { name: web }
spec:
  clusterIP: 10.96.0.40
  ports: [{ port: 80 }]
  trafficDistribution: PreferSameNode
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: web-1, labels: { kubernetes.io/service-name: web } }
addressType: IPv4
ports: [{ port: 8080 }]
endpoints:
  - { addresses: [127.0.3.1], nodeName: node-a, zone: za }
  - { addresses: [127.0.3.2], nodeName: node-b, zone: za }
  - { addresses: [127.0.3.3], nodeName: node-c, zone: zb }
`,
      query: 'service=web&zone=za&node=node-a',
      want: { '127.0.3.1': 0, '127.0.3.2': 1, '127.0.3.3': 2 },
    },
  ] as const;
  for (const c of cases) {
    it(`${c.system}: imported and explained`, async () => {
      const { store, feed, app } = await setup();
      const imported = importDocuments([{ name: `${c.system}.yaml`, text: c.text }], c.system);
      assert.ok(imported.result.ok, JSON.stringify(!imported.result.ok && imported.result.errors));
      for (const s of imported.result.value.services) await feed.caughtUp(await store.put(s, { owner: 'api' }));
      const res = await app.inject({ url: `/debug/explain?${c.query}` });
      assert.equal(res.statusCode, 200, res.body);
      const x = res.json() as Explain;
      assert.deepEqual(prio(x), c.want);
      if (c.system === 'kuma') {
        assert.deepEqual(
          x.localities.filter((l) => l.priority === 0).map((l) => [l.locality.subzone, l.weight]),
          [
            ['k8s.io/node=n1', 90],
            ['k8s.io/az=a', 9],
          ],
        );
        assert.equal(x.overprovisioningFactor, 200);
        assert.match(x.endpoints[3]!.reason, /no failover rule .* accepts zone "zone-3"/);
      }
    });
  }
});

describe('canopy explain', () => {
  it('asks a listening admin API, and explains a config file offline', async () => {
    const { app } = await setup();
    await put(app, 'echo', echo);
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const { stdout } = await run(process.execPath, [
        CLI,
        'explain',
        '--admin',
        url,
        '--service',
        'echo',
        '--region',
        'r1',
        '--zone',
        'z2',
        '--json',
      ]);
      const x = JSON.parse(stdout) as Explain;
      assert.deepEqual(prio(x), { '127.0.0.1': 1, '127.0.0.2': 0, '127.0.0.3': 2, '127.0.0.4': 2, '127.0.0.5': null });
      const dir = mkdtempSync(path.join(tmpdir(), 'canopy-explain-'));
      const policy = path.join(dir, 'p.yaml');
      writeFileSync(policy, 'mode: random\n');
      const diff = await run(process.execPath, [
        CLI,
        'explain',
        '--admin',
        url,
        '--service',
        'echo',
        '--region',
        'r1',
        '--zone',
        'z2',
        '--policy',
        policy,
      ]);
      assert.match(diff.stdout, /changes:\n {2}mode: failover → random\n {2}127\.0\.0\.1:80: priority 1 → 0/);
      const config = path.join(dir, 'c.yaml');
      writeFileSync(
        config,
        `services:\n  - name: echo\n    endpoints:\n      - { address: 127.0.0.1, port: 80, locality: { region: r1 } }\n      - { address: 127.0.0.2, port: 80, locality: { region: r2 } }\n`,
      );
      const offline = await run(process.execPath, [
        CLI,
        'explain',
        '--config',
        config,
        '--service',
        'echo',
        '--region',
        'r2',
      ]);
      assert.match(offline.stdout, /127\.0\.0\.2:80 p0 /);
      assert.match(offline.stdout, /127\.0\.0\.1:80 p1 /);
      const notFound = await run(process.execPath, [CLI, 'explain', '--admin', url, '--service', 'nope']).then(
        () => assert.fail('should fail'),
        (e: { code: number; stderr: string }) => e,
      );
      assert.equal(notFound.code, 1);
      assert.match(notFound.stderr, /service "nope" not found/);
    } finally {
      await app.close();
    }
  });
});
