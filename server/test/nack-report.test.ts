/** What a NACK names (nack-report.ts): the service behind each kind of resource name. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { dnsChildName } from '../src/resources/dns-cluster.js';
import { collectionName, collectionStem, memberName } from '../src/resources/endpoint/leds-names.js';
import { incarnatedName } from '../src/resources/incarnations.js';
import {
  nackServiceLabel,
  SEVERAL_SERVICES,
  serviceOfName,
  servicesOf,
  shortDetail,
} from '../src/sessions/nack-report.js';

describe('the service a NACKed resource belongs to', () => {
  const cases: [string, string, string][] = [
    ['a plain cluster, CLA or listener', 'good.repro', 'good.repro'],
    ['a later incarnation', incarnatedName('good.repro', 2), 'good.repro'],
    ['a DNS child cluster', dnsChildName('db', { address: 'db.example', port: 5432 }), 'db'],
    ['a LEDS collection', collectionName('oops.repro', ['r1', 'z1', '']), 'oops.repro'],
    ['a LEDS member', memberName(collectionStem('we ird', ['r1']), '10.0.0.1', 80), 'we ird'],
  ];
  for (const [what, name, service] of cases) it(what, () => assert.equal(serviceOfName(name), service));

  it("keeps the start and the end of a long error detail (Envoy's why comes last)", () => {
    const detail = `cluster_name: "oops"\n${'x'.repeat(500)} : Proto constraint validation failed (lte: 65535)`;
    const short = shortDetail(detail);
    assert.ok(short.length <= 200, `${short.length}`);
    assert.match(short, /^cluster_name: "oops" x+ … x+ : Proto constraint validation failed \(lte: 65535\)$/);
    assert.equal(shortDetail('bad\n port'), 'bad port');
  });

  it('labels a NACK by its one service, or as several', () => {
    const a = collectionName('a', ['r1']);
    assert.deepEqual(servicesOf([a, 'a', 'b']), ['a', 'b']);
    assert.equal(nackServiceLabel([a, 'a']), 'a');
    assert.equal(nackServiceLabel([a, 'b']), SEVERAL_SERVICES);
  });
});
