/**
 * Group commit in the embedded store: writes that arrive while a durable
 * write is in flight share the next one, each is acknowledged only after its
 * group is durable, and a group whose commit fails is undone whole.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { LevelJournal } from '../src/store/level/level-journal.js';
import { LocalStore } from '../src/store/level/local-store.js';
import { CountingJournal } from './support/counting-journal.js';
import { service } from './support/store-contract.js';

const dirs: string[] = [];
const tmpDir = () => {
  const d = mkdtempSync(path.join(os.tmpdir(), 'canopy-group-'));
  dirs.push(d);
  return d;
};
after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('LocalStore group commit', () => {
  it('64 concurrent PATCHes share far fewer durable writes, each acknowledged after its own', async () => {
    const dir = tmpDir();
    const journal = new CountingJournal(await LevelJournal.open(dir));
    const store = await LocalStore.open(journal);
    const addresses = Array.from({ length: 64 }, (_, i) => `10.0.0.${i + 1}`);
    await store.put(service('s', addresses), { owner: 'api' });
    const before = journal.commits;
    const acked = await Promise.all(
      addresses.map((a, i) =>
        store
          .editEndpoints('s', (cur) => ({ upserts: [{ ...cur.get(`${a}:80`)!, weight: i + 2 }], removals: [] }))
          .then((rev) => ({ rev, durableAtAck: journal.durable })),
      ),
    );
    const commits = journal.commits - before;
    assert.ok(commits < 64 / 4, `64 writes in ${commits} commits`);
    // Write i (queued in order) is acknowledged only once it is durable: the PUT and writes 0..i are.
    acked.forEach(({ rev, durableAtAck }, i) => {
      assert.ok(rev !== undefined);
      assert.ok(durableAtAck >= i + 2, `write ${i} acknowledged with ${durableAtAck} durable`);
    });
    await store.close();
    const again = await LocalStore.open(await LevelJournal.open(dir));
    const weights = (await again.get('s'))!.spec.endpoints.map((e) => e.weight).sort((a, b) => a - b);
    assert.deepEqual(
      weights,
      addresses.map((_, i) => i + 2),
    );
    await again.close();
  });

  it('a failed commit rejects every write of its group and leaves the store as it was', async () => {
    const journal = new CountingJournal(await LevelJournal.open(tmpDir()));
    const store = await LocalStore.open(journal);
    await store.put(service('s', ['10.0.0.1', '10.0.0.2']), { owner: 'api' });
    const revision = (await store.list()).revision;
    const events: number[] = [];
    store.watch(revision, { onEvents: (e) => events.push(...e.map((x) => x.revision)) });
    // The first write goes alone; the next three queue behind it and share the failing commit.
    const first = store.put(service('t', ['10.0.1.1']), { owner: 'api' });
    const group = [
      store.patchEndpoints('s', [], ['10.0.0.1:80']),
      store.put(service('u', ['10.0.2.1']), { owner: 'api' }),
      store.delete('t'),
    ];
    journal.failNext = true;
    await first;
    const outcomes = await Promise.allSettled(group);
    assert.deepEqual(
      outcomes.map((o) => o.status),
      ['rejected', 'rejected', 'rejected'],
    );
    const after = await store.list();
    assert.deepEqual(
      after.services.map((s) => [s.spec.name, s.spec.endpoints.length]),
      [
        ['s', 2],
        ['t', 1],
      ],
    );
    assert.equal(after.revision, revision + 1, 'the failed group took no revision');
    assert.deepEqual(events, [revision + 1], 'watchers heard only the durable write');
    // And the store goes on.
    assert.equal(await store.patchEndpoints('s', [], ['10.0.0.1:80']), revision + 2);
    await store.close();
  });
});
