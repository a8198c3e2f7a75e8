import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LoadView } from '../src/domain/load/load-view.js';

const client = { locality: { region: 'r1', zone: 'za', subzone: 's' }, network: '', node: '', cluster: '', labels: {} };
const at = (zone: string) => ({ region: 'r1', zone, subzone: 's' });
const up = (zone: string, issued: number) => ({
  locality: at(zone),
  issued,
  succeeded: issued,
  errors: 0,
  inProgress: 0,
});

describe('LoadView: what Envoy reports differently', () => {
  it('counts dropped requests as offered load that landed nowhere', () => {
    const v = new LoadView();
    v.record('e', client, [{ service: 'echo', intervalSeconds: 2, upstream: [up('za', 100)], dropped: 20 }], 0);
    assert.deepEqual(
      v.offered('echo', 0).map((o) => o.rps),
      [60],
    );
    assert.deepEqual([...v.landed('echo', 0)], [['r1/za/s', 50]]);
  });

  it('adds up one locality reported once per priority, and divides by the interval the client measured', () => {
    const v = new LoadView();
    v.record(
      'e',
      client,
      [{ service: 'echo', intervalSeconds: 0.5, upstream: [up('za', 10), up('zb', 5), up('za', 5)] }],
      0,
    );
    assert.deepEqual(
      v.offered('echo', 0).map((o) => o.rps),
      [40],
    );
    assert.deepEqual(Object.fromEntries(v.landed('echo', 0)), { 'r1/za/s': 30, 'r1/zb/s': 10 });
  });
});
