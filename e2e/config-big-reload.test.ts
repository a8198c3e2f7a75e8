/**
 * A big config file edited under a running `canopy serve` (issue 19 §6): the
 * file is parsed on a worker thread, so the admin API keeps answering while
 * it is parsed, and the reload then lands whole. A behaviour test: answers
 * must arrive between the server's "parsing" and "parsed" log lines (asked
 * after the first, answered before the second), in whatever time the machine
 * takes; nothing is timed against a threshold. Parsed on the event loop, no
 * request asked during the parse is answered before it ends.
 */
import assert from 'node:assert/strict';
import { renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { dump } from 'js-yaml';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';

/** About 7 MB of YAML: seconds of parsing on a loaded machine, far above the off-thread threshold. */
const ENDPOINTS = 80_000;

function bigConfig(): string {
  const endpoints = Array.from({ length: ENDPOINTS }, (_, i) => ({
    address: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
    port: 8080,
    locality: { region: `r${i % 10}`, zone: `z${i % 7}`, subzone: `s${i % 3}` },
  }));
  return dump(
    {
      services: [
        { name: 'small', endpoints: [{ address: '10.9.0.1', port: 80 }] },
        { name: 'big', endpoints },
      ],
    },
    {
      flowLevel: 4,
    },
  );
}

describe('a big config reload', () => {
  let canopy: CanopyProcess;

  before(async () => {
    canopy = await startCanopyProcess({
      services: [{ name: 'small', endpoints: [{ address: '10.9.0.1', port: 80 }] }],
    });
  });
  after(async () => {
    await canopy?.stop();
  });

  const logged = (msg: string): boolean => canopy.logs().some((l) => l.includes(`"msg":"${msg}"`));

  it('keeps the admin API answering while the file is parsed, then serves the whole new config', async () => {
    const text = bigConfig();
    const tmp = path.join(path.dirname(canopy.configPath), 'mesh.yaml.tmp');
    writeFileSync(tmp, text);
    renameSync(tmp, canopy.configPath); // saved atomically, as documented
    let during = 0;
    let total = 0;
    const deadline = Date.now() + 120_000;
    while (!logged('config reloaded') && Date.now() < deadline) {
      const asked = logged('config file changed: parsing');
      const res = await fetch(`${canopy.adminUrl}/api/v1/services/small`);
      assert.equal(res.status, 200);
      await res.arrayBuffer();
      total++;
      if (asked && !logged('config file parsed: applying')) during++;
    }
    assert.ok(logged('config file changed: parsing'), 'the server logged the parse of the changed file');
    assert.ok(logged('config reloaded'), `the reload finished:\n${canopy.logs().slice(-5).join('\n')}`);
    // One request may straddle the end of the parse: more than that were answered while it ran.
    assert.ok(during >= 3, `admin answered during the parse (${during} of ${total} answers)`);
    const big = await canopy.admin('GET', '/api/v1/services/big');
    assert.equal(big.status, 200);
    assert.equal((big.body as { endpoints: unknown[] }).endpoints.length, ENDPOINTS, 'every endpoint of the new file');
  });
});
