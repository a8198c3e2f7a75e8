/**
 * The config file at start, against a real embedded store: a file whose
 * status (device, inode, size, modification and change times) is the one
 * recorded is not read at all; any write to it, even one that keeps its size
 * and puts its modification time back, makes it read and compared by content;
 * a file that changed just before it was looked at gets no stamp.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import type { StartConfig } from '../src/config/config-start.js';
import { applyStartConfig, readStartConfig, STAMP_SETTLE_MS } from '../src/config/config-start.js';
import { readConfigRecord } from '../src/config/config-record.js';
import { LevelJournal } from '../src/store/level/level-journal.js';
import { LocalStore } from '../src/store/level/local-store.js';

const config = (address: string) =>
  JSON.stringify({ services: [{ name: 'echo', endpoints: [{ address, port: 80, locality: { region: 'r1' } }] }] });

const settle = () => new Promise((r) => setTimeout(r, STAMP_SETTLE_MS + 100));

describe('the config file at start', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-config-start-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  /** readStartConfig then applyStartConfig on the store in `data`, as `canopy serve` does. */
  async function start(file: string, data: string): Promise<{ start: StartConfig; unchangedFile: boolean }> {
    const read = await readStartConfig(file, data);
    assert.ok(read.ok, JSON.stringify(!read.ok && read.errors));
    const store = await LocalStore.open(await LevelJournal.open(data));
    try {
      const applied = await applyStartConfig(store, read.value, data);
      return { start: read.value, unchangedFile: applied.unchangedFile };
    } finally {
      await store.close();
    }
  }

  it('is not read when its status is the one recorded; read again after any write', async () => {
    const file = path.join(dir, 'mesh.json');
    const data = path.join(dir, 'data');
    writeFileSync(file, config('10.0.0.1'));
    await settle();

    const first = await start(file, data);
    assert.equal(first.unchangedFile, false, 'a new data directory: applied');
    assert.ok(readConfigRecord(data)?.file, 'the record holds the settled file’s status');

    const second = await start(file, data);
    assert.equal(second.unchangedFile, true);
    assert.equal(second.start.unread, true, 'the status matched: not read');
    assert.equal(second.start.digest, first.start.digest, 'the watcher starts from the recorded digest');

    // The same size, the modification time put back to the nanosecond (as `cp -p` or `touch -r` would):
    // only the change time tells, and it does.
    const before = statSync(file, { bigint: true });
    writeFileSync(file, config('10.0.0.2'));
    const ns = before.mtimeNs.toString().padStart(10, '0');
    execFileSync('touch', ['-m', '-d', `@${ns.slice(0, -9)}.${ns.slice(-9)}`, file]);
    const after = statSync(file, { bigint: true });
    assert.equal(after.mtimeNs, before.mtimeNs, 'the modification time is back');
    assert.equal(after.size, before.size);
    assert.notEqual(after.ctimeNs, before.ctimeNs);
    await settle();
    const edited = await readStartConfig(file, data);
    assert.ok(edited.ok);
    assert.notEqual(edited.value.unread, true, 'the change time moved: read');
    assert.equal(edited.value.recorded, undefined, 'other content: parsed');
    assert.equal(edited.value.config.services[0]?.endpoints[0]?.address, '10.0.0.2');
    assert.equal((await start(file, data)).unchangedFile, false, 'the edit is applied');

    // Changed just now: read, and recorded without a stamp (a write in the same clock tick could hide).
    writeFileSync(file, config('10.0.0.4'));
    const fresh = await start(file, data);
    assert.equal(fresh.unchangedFile, false);
    assert.equal(fresh.start.stamp, undefined, 'changed just now: no stamp');
    assert.equal(readConfigRecord(data)?.file, undefined, 'recorded without a stamp');

    // Settled now: read once by digest (the store holds it), and the record gains its stamp.
    await settle();
    const byDigest = await start(file, data);
    assert.equal(byDigest.unchangedFile, true);
    assert.notEqual(byDigest.start.unread, true);
    assert.ok(readConfigRecord(data)?.file);
    assert.equal((await start(file, data)).start.unread, true);
  });

  it('a file renamed over it with the same content is read, and found unchanged by its digest', async () => {
    const file = path.join(dir, 'other.json');
    const data = path.join(dir, 'data2');
    writeFileSync(file, config('10.0.0.3'));
    await settle();
    await start(file, data);
    assert.equal((await start(file, data)).start.unread, true);
    writeFileSync(`${file}.new`, config('10.0.0.3'));
    renameSync(`${file}.new`, file);
    const again = await start(file, data);
    assert.notEqual(again.start.unread, true, 'another inode: read');
    assert.equal(again.unchangedFile, true, 'the same content: nothing to apply');
  });
});
