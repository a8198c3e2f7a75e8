/**
 * What Istio and Kuma reject, Canopy rejects too, the way a user meets it:
 * `canopy import SYSTEM FILE` exits 1 and `canopy serve --config FILE`
 * refuses to start, both naming the source document's field.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { runCanopyCli } from './support/canopy-cli.js';

const CASES: { name: string; system: string; text: string; paths: string[] }[] = [
  {
    name: 'Istio distribute with a wildcard not at the end and overlapping keys',
    system: 'istio',
    text: `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: { name: r }
spec:
  host: r
  trafficPolicy:
    loadBalancer:
      localityLbSetting:
        distribute: [{ from: "*/z1", to: { "r1/*": 50, "r1/z1": 50 } }]
`,
    paths: [
      'bad.yaml[0].spec.trafficPolicy.loadBalancer.localityLbSetting.distribute[0].from',
      'bad.yaml[0].spec.trafficPolicy.loadBalancer.localityLbSetting.distribute[0].to.r1/z1',
    ],
  },
  {
    name: 'Kuma broken failover rules and mixed affinity weights',
    system: 'kuma',
    text: `type: MeshLoadBalancingStrategy
name: mlbs
mesh: default
spec:
  to:
    - targetRef: { kind: MeshService, labels: { kuma.io/display-name: backend } }
      default:
        localityAwareness:
          localZone: { affinityTags: [{ key: k8s.io/node, weight: 9 }, { key: k8s.io/az }] }
          crossZone:
            failover:
              - { from: { zones: [] }, to: { type: Any } }
              - { to: { type: None, zones: [zone-2] } }
              - { to: { type: Only } }
`,
    paths: [
      'bad.yaml[0].spec.to[0].default.localityAwareness.localZone.affinityTags',
      'bad.yaml[0].spec.to[0].default.localityAwareness.crossZone.failover[0].from.zones',
      'bad.yaml[0].spec.to[0].default.localityAwareness.crossZone.failover[1].to.zones',
      'bad.yaml[0].spec.to[0].default.localityAwareness.crossZone.failover[2].to.zones',
    ],
  },
  {
    name: 'Istio ServiceEntries: DNS_ROUND_ROBIN with two endpoints, a STATIC hostname endpoint',
    system: 'istio',
    text: `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: { name: ext }
spec:
  hosts: [api.example.com]
  ports: [{ number: 443, name: tls }]
  resolution: DNS_ROUND_ROBIN
  endpoints: [{ address: api-1.example.com, locality: r1/z1 }, { address: api-2.example.com, locality: r1/z2 }]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: { name: static }
spec:
  hosts: [static.example.com]
  ports: [{ number: 443, name: tls }]
  resolution: STATIC
  endpoints: [{ address: api-1.example.com }]
`,
    paths: ['bad.yaml[0].spec.endpoints', 'bad.yaml[1].spec.endpoints[0].address'],
  },
];

describe('refused as the source system refuses, through the CLI', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-refusals-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  for (const c of CASES) {
    it(c.name, async () => {
      const sub = mkdtempSync(path.join(dir, 'c-'));
      const file = path.join(sub, 'bad.yaml');
      writeFileSync(file, c.text);
      const imported = await runCanopyCli(['import', c.system, file]);
      assert.equal(imported.code, 1, imported.stdout);
      for (const p of c.paths) assert.ok(imported.stderr.includes(`  ${p}: `), `${p} in:\n${imported.stderr}`);
      const served = await runCanopyCli([
        'serve',
        '--config',
        file,
        '--data-dir',
        path.join(sub, 'data'),
        '--xds-port',
        '0',
        '--admin-port',
        '0',
        '--host',
        '127.0.0.1',
      ]);
      assert.notEqual(served.code, 0);
      for (const p of c.paths) assert.ok(served.stderr.includes(p), `${p} in:\n${served.stderr}`);
    });
  }
});
