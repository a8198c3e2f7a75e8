/**
 * The embedded store's compact bucket form (store/level/endpoint-rows.ts): every
 * endpoint comes back as the config reader builds it, a directory written in
 * the old form still opens, and a service loaded without its bucket keys is
 * patched (and a failed patch undone) without losing an endpoint.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { ClassicLevel } from 'classic-level';
import fc from 'fast-check';
import { readValidEndpointList } from '../src/domain/endpoint-list.js';
import { endpointKey, HEALTH_VALUES, type Endpoint } from '../src/domain/service.js';
import { parseServiceSpec, serviceSpecToJson } from '../src/domain/spec.js';
import { decodeBucket, encodeBucket } from '../src/store/level/endpoint-rows.js';
import { fileEntryDigest } from '../src/config/file-source.js';
import { LevelJournal } from '../src/store/level/level-journal.js';
import { LocalStore } from '../src/store/level/local-store.js';
import { CountingJournal } from './support/counting-journal.js';
import { service } from './support/store-contract.js';

const dirs: string[] = [];
after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
const tmpDir = () => {
  const d = mkdtempSync(path.join(os.tmpdir(), 'canopy-rows-'));
  dirs.push(d);
  return d;
};

/** Endpoints as a config file may give them: any strings, defaults left out or spelled out. */
const rawEndpoint = fc.record(
  {
    address: fc.oneof(
      fc.tuple(fc.integer({ min: 1, max: 223 }), fc.nat(255), fc.nat(255)).map(([a, b, c]) => `${a}.${b}.${c}.9`),
      fc.constantFrom('fd00::1', 'fd00::2:3', 'backend.example.com', 'db-0.svc'),
    ),
    port: fc.integer({ min: 1, max: 65535 }),
    locality: fc.record(
      { region: fc.string(), zone: fc.constantFrom('z1', 'z2', '"quoted"', 'ü\\n'), subzone: fc.string() },
      { requiredKeys: [] },
    ),
    network: fc.string(),
    node: fc.string(),
    cluster: fc.constantFrom('', 'c1', 'ç'),
    labels: fc.dictionary(fc.string({ minLength: 1 }), fc.string(), { maxKeys: 3 }),
    health: fc.constantFrom(...HEALTH_VALUES),
    weight: fc.integer({ min: 1, max: 1_000_000 }),
  },
  { requiredKeys: ['address', 'port'] },
);

describe('the compact bucket form', () => {
  it('gives back every endpoint, field for field and in the reader’s field order', () => {
    fc.assert(
      fc.property(fc.array(rawEndpoint, { maxLength: 40 }), (raw) => {
        const endpoints = readValidEndpointList(raw);
        fc.pre(endpoints !== undefined); // duplicate address:port
        const back: Endpoint[] = [];
        decodeBucket(encodeBucket(endpoints!), back);
        assert.deepEqual(back, endpoints);
        back.forEach((ep, i) => {
          assert.deepEqual(Object.keys(ep), Object.keys(endpoints![i]!));
          assert.deepEqual(Object.keys(ep.locality), ['region', 'zone', 'subzone']);
        });
      }),
      { numRuns: 300 },
    );
  });

  it('writes each distinct locality once and leaves defaults out', () => {
    const endpoints = readValidEndpointList([
      { address: '10.0.0.1', port: 80, locality: { region: 'r1', zone: 'z1' } },
      { address: '10.0.0.2', port: 80, locality: { region: 'r1', zone: 'z1' } },
      { address: '10.0.0.3', port: 80, locality: { region: 'r1', zone: 'z2' }, labels: { a: 'b' } },
    ])!;
    assert.equal(
      encodeBucket(endpoints),
      '{"v":2,"l":[["r1","z1",""],["r1","z2",""]],"e":[["10.0.0.1",80,0],["10.0.0.2",80,0],' +
        '["10.0.0.3",80,1,1,"healthy","","","",{"a":"b"}]]}',
    );
  });

  it('refuses a bucket of a format it does not know, naming it', () => {
    assert.throws(() => decodeBucket('{"v":3,"l":[],"e":[]}', []), /format 3/);
  });
});

describe('the file entry digest', () => {
  it('is the SHA-256 of the entry’s canonical JSON, its endpoints written in pieces', () => {
    fc.assert(
      fc.property(
        fc.array(rawEndpoint, { maxLength: 30 }),
        fc.constantFrom({}, { port: 9090, vip: '10.96.0.1' }, { loadBalancing: { mode: 'random' } }),
        (endpoints, extra) => {
          const parsed = parseServiceSpec({ name: 'svc', endpoints, ...extra });
          fc.pre(parsed.ok);
          if (!parsed.ok) return;
          const whole = createHash('sha256')
            .update(JSON.stringify(serviceSpecToJson(parsed.value)))
            .digest('base64url');
          assert.equal(fileEntryDigest(parsed.value), whole);
        },
      ),
      { numRuns: 300 },
    );
    // Past one piece (64 KiB of JSON).
    const many = Array.from({ length: 3000 }, (_, i) => ({
      address: `10.9.${i >> 8}.${i & 255}`,
      port: 80,
      labels: { k: `v${i}` },
    }));
    const big = parseServiceSpec({ name: 'big', endpoints: many });
    assert.ok(big.ok);
    if (big.ok) {
      const whole = createHash('sha256')
        .update(JSON.stringify(serviceSpecToJson(big.value)))
        .digest('base64url');
      assert.equal(fileEntryDigest(big.value), whole);
    }
  });
});

const sortedKeys = (eps: readonly Endpoint[]) => eps.map((e) => `${endpointKey(e)}/${e.weight}/${e.health}`).sort();

describe('the LevelDB store on the compact form', () => {
  it('opens a directory written in the old form (a JSON list per bucket) and rewrites it in the new one', async () => {
    const dir = tmpDir();
    const spec = service('old', ['10.0.0.1', '10.0.0.2', 'fd00::7']);
    const db = new ClassicLevel<string, string>(dir, { valueEncoding: 'utf8' });
    await db.open();
    await db.put('rev', '3');
    const { endpoints, ...head } = spec;
    await db.put('s\u0000old', JSON.stringify({ head, owner: 'api', revision: 3, buckets: 1 }));
    await db.put('b\u0000old\u0000000', JSON.stringify(endpoints));
    await db.close();

    const store = await LocalStore.open(await LevelJournal.open(dir));
    const loaded = (await store.get('old'))!;
    assert.deepEqual(sortedKeys(loaded.spec.endpoints), sortedKeys(endpoints));
    assert.equal(loaded.revision, 3);
    await store.patchEndpoints('old', [{ ...endpoints[0]!, weight: 5 }], []);
    await store.close();

    const raw = new ClassicLevel<string, string>(dir, { valueEncoding: 'utf8' });
    await raw.open();
    assert.match((await raw.get('b\u0000old\u0000000'))!, /^\{"v":2,/);
    await raw.close();
    const again = await LocalStore.open(await LevelJournal.open(dir));
    assert.deepEqual(sortedKeys((await again.get('old'))!.spec.endpoints), [
      '10.0.0.1:80/5/healthy',
      '10.0.0.2:80/1/healthy',
      '[fd00::7]:80/1/healthy',
    ]);
    await again.close();
  });

  it('a service loaded at open is patched in its buckets; a failed patch is undone without losing an endpoint', async () => {
    const dir = tmpDir();
    const addresses = Array.from({ length: 900 }, (_, i) => `10.2.${i >> 8}.${i & 255}`);
    const first = await LocalStore.open(await LevelJournal.open(dir));
    await first.put(service('s', addresses), { owner: 'api' });
    await first.close();

    // Reopened: the journal knows how many buckets 's' has, not yet which keys each holds.
    const journal = new CountingJournal(await LevelJournal.open(dir));
    const store = await LocalStore.open(journal);
    const held = (await store.get('s'))!.spec.endpoints;
    const byAddress = (a: string) => held.find((e) => e.address === a)!;
    journal.failNext = true;
    await assert.rejects(store.patchEndpoints('s', [], ['10.2.1.1:80', '10.2.1.2:80']), /disk says no/);
    // Then patches that rewrite the buckets the failed one touched, and others.
    for (const a of addresses.slice(0, 40)) await store.patchEndpoints('s', [{ ...byAddress(a), weight: 3 }], []);
    await store.patchEndpoints('s', [], ['10.2.3.100:80']);
    const expected = (await store.get('s'))!.spec.endpoints;
    assert.equal(expected.length, 899);
    await store.close();

    const again = await LocalStore.open(await LevelJournal.open(dir));
    const back = (await again.get('s'))!.spec.endpoints;
    assert.deepEqual(sortedKeys(back), sortedKeys(expected));
    assert.ok(back.some((e) => e.address === '10.2.1.1') && back.some((e) => e.address === '10.2.1.2'));
    assert.equal(back.filter((e) => e.weight === 3).length, 40);
    await again.close();
  });
});
