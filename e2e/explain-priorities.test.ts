/**
 * `canopy explain` numbers priorities the same way in both of its blocks: with a locality whose endpoints
 * are all unhealthy, a proxyless gRPC client's CLA leaves it out (its next locality is p0) while an Envoy
 * sidecar under `unhealthy: count` keeps it at p0; each locality line then names the Envoy priority that
 * holds it, and each Envoy priority names its localities.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { dump } from 'js-yaml';
import { runCanopyCli } from './support/canopy-cli.js';

describe('canopy explain: one numbering of priorities', () => {
  it('the locality list names the Envoy priority of each locality; the Envoy block names its localities', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-explain-'));
    const file = path.join(dir, 'mesh.yaml');
    const ep = (address: string, region: string, zone: string, health = 'healthy') => ({
      address,
      port: 80,
      locality: { region, zone, subzone: 'r1' },
      health,
    });
    const endpoints = [
      ep('10.0.0.1', 'us-east', 'a', 'unhealthy'),
      ep('10.0.0.2', 'us-east', 'a', 'unhealthy'),
      ep('10.0.0.3', 'us-east', 'b'),
      ep('10.0.0.4', 'eu-west', 'a'),
    ];
    writeFileSync(file, dump({ services: [{ name: 'echo', endpoints }] }));
    const r = await runCanopyCli([
      ...['explain', '--config', file, '--service', 'echo'],
      ...['--region', 'us-east', '--zone', 'a', '--subzone', 'r1'],
    ]);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.split('\n');
    assert.ok(lines.includes('  p0 us-east/b/r1 [Envoy p1] weight 1, 1 healthy, share 100.0%'), r.stdout);
    assert.ok(lines.includes('  p1 eu-west/a/r1 [Envoy p2] weight 1, 1 healthy, share 0.0%'), r.stdout);
    assert.ok(lines.includes('  p0 us-east/a/r1: 0 of 2 healthy, health 0%, load 0%'), r.stdout);
    assert.ok(lines.includes('  p1 us-east/b/r1: 1 of 1 healthy, health 100%, load 100%'), r.stdout);
    // The JSON carries the same: each Envoy priority's localities.
    const json = await runCanopyCli([
      ...['explain', '--config', file, '--service', 'echo', '-o', 'json'],
      ...['--region', 'us-east', '--zone', 'a', '--subzone', 'r1'],
    ]);
    const view = JSON.parse(json.stdout) as { envoy: { priorities: { priority: number; localities: string[] }[] } };
    assert.deepEqual(
      view.envoy.priorities.map((p) => [p.priority, p.localities]),
      [
        [0, ['us-east/a/r1']],
        [1, ['us-east/b/r1']],
        [2, ['eu-west/a/r1']],
      ],
    );
  });

  it('PreferSameZone (routingPreference [zone], as import k8s writes it): the zone, then everything else', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-explain-'));
    const file = path.join(dir, 'mesh.yaml');
    const endpoints = [
      { address: '10.0.1.1', port: 80, locality: { region: 'r1', zone: 'z1' } },
      { address: '10.0.1.2', port: 80, locality: { region: 'r1', zone: 'z2' } },
      { address: '10.0.1.3', port: 80, locality: { region: 'r2', zone: 'z3' } },
    ];
    const loadBalancing = {
      mode: 'failover',
      routingPreference: ['zone'],
      policy: { trafficDistribution: 'PreferSameZone' },
    };
    writeFileSync(file, dump({ services: [{ name: 'web', loadBalancing, endpoints }] }));
    const r = await runCanopyCli([
      'explain',
      '--config',
      file,
      '--service',
      'web',
      '--region',
      'r1',
      '--zone',
      'z1',
      '-o',
      'json',
    ]);
    assert.equal(r.code, 0, r.stderr);
    const view = JSON.parse(r.stdout) as { endpoints: { address: string; priority: number | null }[] };
    // No region tier between: the other zone of the client's region ranks with the other region's.
    assert.deepEqual(
      view.endpoints.map((e) => [e.address, e.priority]),
      [
        ['10.0.1.1', 0],
        ['10.0.1.2', 1],
        ['10.0.1.3', 1],
      ],
    );
  });
});
