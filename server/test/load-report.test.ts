/** Kernel connect counts → what each LRS interval reports (agent/load-report.ts). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConnectDeltas } from '../src/agent/load-report.js';
import type { ConnectCount } from '../src/agent/spill-table.js';

const A = { region: 'r1', zone: 'za', subzone: 's' };
const B = { region: 'r1', zone: 'zb', subzone: 's' };
const count = (key: string, connects: number, service?: string, locality = A): ConnectCount => ({
  key,
  connects: BigInt(connects),
  ...(service ? { service, locality } : {}),
});

describe('ConnectDeltas', () => {
  it('reports connects since the last report, never those from before the agent started', () => {
    const d = new ConnectDeltas([count('k1', 500)]);
    assert.deepEqual(d.next([count('k1', 530, 'echo'), count('k2', 7, 'echo', B)], 'all'), [
      {
        cluster: 'echo',
        localities: [
          { locality: A, requests: 30 },
          { locality: B, requests: 7 },
        ],
      },
    ]);
    assert.deepEqual(d.next([count('k1', 530, 'echo'), count('k2', 10, 'echo', B)], 'all'), [
      {
        cluster: 'echo',
        localities: [
          { locality: A, requests: 0 },
          { locality: B, requests: 3 },
        ],
      },
    ]);
  });

  it('sums the counters of one locality; a counter created again counts whole; unnamed clusters are left out', () => {
    const d = new ConnectDeltas();
    d.next([count('k1', 10, 'echo'), count('k2', 10, 'echo'), count('k3', 5, 'other')], 'all');
    const r = d.next([count('k1', 4, 'echo'), count('k2', 12, 'echo'), count('k3', 9, 'other')], ['echo']);
    assert.deepEqual(r, [{ cluster: 'echo', localities: [{ locality: A, requests: 6 }] }]);
  });

  it('a counter no tree names yet is not reported, and what it held is not reported later', () => {
    const d = new ConnectDeltas();
    assert.deepEqual(d.next([count('k1', 100)], 'all'), []);
    assert.deepEqual(d.next([count('k1', 104, 'echo')], 'all'), [
      { cluster: 'echo', localities: [{ locality: A, requests: 4 }] },
    ]);
  });
});
