/**
 * The embedded store against kill -9: a real `canopy serve` process takes a
 * burst of admin writes (PUTs of new services, PATCHes of a file-owned
 * service's endpoints) from several concurrent writers, is killed with
 * SIGKILL in the middle, and is started again on the same data directory.
 * Every write that was acknowledged must be there.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';

const BIG = 300;
const config = {
  server: { debounceMs: 20 },
  services: [
    {
      name: 'big',
      endpoints: Array.from({ length: BIG }, (_, i) => ({
        address: `10.1.${Math.floor(i / 250)}.${(i % 250) + 1}`,
        port: 80,
        locality: { region: 'r1', zone: `z${i % 4}` },
      })),
    },
  ],
};
const bigKey = (i: number) => `10.1.${Math.floor(i / 250)}.${(i % 250) + 1}:80`;

describe('embedded store: kill -9 during a burst of admin writes', () => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'canopy-durable-'));
  const started: CanopyProcess[] = [];
  after(async () => {
    for (const p of started) await p.kill();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('keeps every acknowledged write across the kill and a restart', async (t) => {
    const first = await startCanopyProcess(config, ['--data-dir', dataDir]);
    started.push(first);
    const ackedPuts: number[] = [];
    const ackedPatches = new Map<number, number>(); // endpoint index → weight acknowledged
    let killed = false;
    let next = 0;

    const writer = async (): Promise<void> => {
      while (!killed && next < 5000) {
        const i = next++;
        try {
          if (i % 2 === 0) {
            const r = await first.admin('PUT', `/api/v1/services/burst-${i}`, {
              endpoints: [{ address: `10.2.${Math.floor(i / 250) % 250}.${(i % 250) + 1}`, port: 8000 + (i % 1000) }],
            });
            if (r.status === 201) ackedPuts.push(i);
          } else {
            const ep = (i >> 1) % BIG;
            const weight = 2 + (i >> 1);
            const r = await first.admin('PATCH', `/api/v1/services/big/endpoints/${encodeURIComponent(bigKey(ep))}`, {
              weight,
            });
            if (r.status === 200) ackedPatches.set(ep, weight);
          }
        } catch {
          // The connection died with the process: not acknowledged, so not owed.
        }
      }
    };
    const writers = Array.from({ length: 8 }, writer);
    // Kill once a good number of writes were acknowledged, with more in flight.
    const deadline = Date.now() + 20_000;
    while (ackedPuts.length + ackedPatches.size < 150 && Date.now() < deadline) await sleep(5);
    await first.kill();
    killed = true;
    await Promise.all(writers);
    assert.ok(
      ackedPuts.length > 20 && ackedPatches.size > 20,
      `a real burst: ${ackedPuts.length} PUTs, ${ackedPatches.size} PATCHes`,
    );

    t.diagnostic(`acknowledged before kill -9: ${ackedPuts.length} PUTs, ${ackedPatches.size} PATCHes`);
    const second = await startCanopyProcess(config, ['--data-dir', dataDir]);
    started.push(second);
    const list = (await second.admin('GET', '/api/v1/services')).body as {
      services: { name: string; endpoints: { address: string; port: number; weight: number }[] }[];
    };
    const byName = new Map(list.services.map((s) => [s.name, s]));
    const missing = ackedPuts.filter((i) => !byName.has(`burst-${i}`));
    assert.deepEqual(missing, [], 'every acknowledged PUT is there');
    for (const i of ackedPuts) assert.equal(byName.get(`burst-${i}`)?.endpoints[0]?.port, 8000 + (i % 1000));
    const big = byName.get('big');
    assert.equal(big?.endpoints.length, BIG);
    const weights = new Map(big?.endpoints.map((e) => [`${e.address}:${e.port}`, e.weight]));
    const lost = [...ackedPatches].filter(([ep, w]) => (weights.get(bigKey(ep)) ?? 0) < w);
    assert.deepEqual(lost, [], 'every acknowledged PATCH is there (the file entry is unchanged, so it stays)');
    await second.stop();
  });
});

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
