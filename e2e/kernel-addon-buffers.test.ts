/**
 * The addon never trusts a caller's Buffer: the kernel copies a map's whole key and value, so every key
 * and value Buffer handed to the addon must be exactly the map's size (from the map's info), and one that
 * is not is refused with `code` CANOPY_BPF_BUFFER naming the map, before any syscall writes into it. Run
 * on the real maps of the BPF object, loaded into a fresh pin directory: for every map, every call that
 * takes a Buffer (lookup, update, delete, next key, batch update, batch delete) gets a short, a long and
 * then a right-sized Buffer. A 28-byte value Buffer for a 60-byte `canopy_services` lookup overran the
 * heap before (`double free or corruption`).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BPF_ANY, loadAddon, objectPath, type BpfAddon, type LoadedObject } from '../server/src/agent/bpf.js';
import { LAYOUT, MAP } from '../server/src/agent/abi.js';
import { SVC_LAYOUT } from '../server/src/agent/abi-svc.js';
import { SPILL_LAYOUT, SPILL_MAP } from '../server/src/agent/abi-spill.js';
import { kernelEnv, testCgroup } from './support/kernel.js';

const env = kernelEnv();

interface Shape {
  readonly key: number;
  /** one CPU's value; per-CPU maps hold one 8-byte-aligned slot per possible CPU */
  readonly value: number;
  readonly perCpu?: true;
  /** an array map: its keys are indexes, and deleting from it is not possible */
  readonly array?: true;
}

/** Every map of the object, with the sizes bpf/canopy_abi.h gives its key and value. */
const SHAPES: Readonly<Record<string, Shape>> = {
  [MAP.services]: { key: LAYOUT.canopy_svc_key.size, value: SVC_LAYOUT.canopy_svc.size },
  [MAP.services6]: { key: LAYOUT.canopy_svc_key6.size, value: SVC_LAYOUT.canopy_svc.size },
  [MAP.nodes]: { key: LAYOUT.canopy_node_key.size, value: LAYOUT.canopy_node.size },
  [MAP.endpoints]: { key: 4, value: LAYOUT.canopy_backend.size, array: true },
  [MAP.workloads]: { key: 8, value: LAYOUT.canopy_locality.size },
  [MAP.nodeloc]: { key: 4, value: LAYOUT.canopy_locality.size, array: true },
  [MAP.scopes]: { key: 4, value: 8, array: true },
  [MAP.config]: { key: 4, value: LAYOUT.canopy_config.size, array: true },
  [MAP.stats]: { key: 4, value: LAYOUT.canopy_stats.size, perCpu: true, array: true },
  [MAP.revnat]: { key: 4, value: LAYOUT.canopy_revnat.size, array: true },
  [SPILL_MAP.spill]: { key: SPILL_LAYOUT.canopy_spill_key.size, value: SPILL_LAYOUT.canopy_spill.size },
  [SPILL_MAP.counts]: { key: SPILL_LAYOUT.canopy_spill_cnt_key.size, value: 8, perCpu: true },
};

type Coded = Error & { code?: string };

/** Asserts `fn` is refused with CANOPY_BPF_BUFFER, naming the map and the Buffer's size. */
function refused(fn: () => unknown, map: string, got: number, what: string): void {
  assert.throws(fn, (e: Coded) => {
    assert.equal(e.code, 'CANOPY_BPF_BUFFER', `${what}: ${e.message}`);
    // The kernel keeps 15 characters of a map's name.
    assert.ok(e.message.includes(map.slice(0, 15)), e.message);
    assert.ok(e.message.includes(`has ${got} bytes`), e.message);
    return true;
  });
}

/** The buffer sizes around `n` that must be refused: one short, one long, and nothing at all. */
const wrong = (n: number): number[] => [0, n - 1, n + 1, Math.max(1, n >> 1)].filter((m, i, a) => a.indexOf(m) === i);

describe('the addon checks every Buffer against the map it is for', { skip: env.reason }, () => {
  let bpf: BpfAddon;
  let loaded: LoadedObject;
  let cg: ReturnType<typeof testCgroup>;
  let cpus = 1;

  before(() => {
    cg = testCgroup('addon-buffers');
    bpf = loadAddon();
    cpus = bpf.possibleCpus();
    loaded = bpf.load(objectPath(), cg.pinDir, {});
  });

  after(() => {
    for (const fd of Object.values(loaded?.maps ?? {})) bpf.close(fd);
    for (const fd of Object.values(loaded?.programs ?? {})) bpf.close(fd);
    cg?.cleanup();
  });

  it('the table covers every map of the object', () => {
    assert.deepEqual(Object.keys(loaded.maps).sort(), Object.keys(SHAPES).sort());
  });

  for (const [name, shape] of Object.entries(SHAPES)) {
    it(`${name}: short and long keys and values are refused; right-sized ones work`, () => {
      const fd = loaded.maps[name]!;
      const vs = shape.perCpu ? Math.ceil(shape.value / 8) * 8 * cpus : shape.value;
      const key = Buffer.alloc(shape.key);
      const value = Buffer.alloc(vs, 0x5a);
      for (const n of wrong(shape.key)) {
        const k = Buffer.alloc(n);
        refused(() => bpf.mapLookup(fd, k, Buffer.alloc(vs)), name, n, 'lookup key');
        refused(() => bpf.mapUpdate(fd, k, value, BPF_ANY), name, n, 'update key');
        refused(() => bpf.mapDelete(fd, k), name, n, 'delete key');
        refused(() => bpf.mapNextKey(fd, k, Buffer.alloc(shape.key)), name, n, 'next key');
        refused(() => bpf.mapNextKey(fd, null, k), name, n, 'next key out');
        refused(
          () => bpf.mapUpdateBatch(fd, Buffer.alloc(n * 2), Buffer.alloc(vs * 2), 2, BPF_ANY),
          name,
          n * 2,
          'keys',
        );
        refused(() => bpf.mapDeleteBatch(fd, Buffer.alloc(n * 2), 2), name, n * 2, 'batch delete keys');
      }
      for (const n of wrong(vs)) {
        const out = Buffer.alloc(n, 0xee);
        refused(() => bpf.mapLookup(fd, key, out), name, n, 'lookup value');
        assert.ok(
          out.every((b) => b === 0xee),
          'a refused lookup wrote nothing',
        );
        refused(() => bpf.mapUpdate(fd, key, Buffer.alloc(n), BPF_ANY), name, n, 'update value');
        refused(
          () => bpf.mapUpdateBatch(fd, Buffer.alloc(shape.key * 2), Buffer.alloc(n * 2), 2, BPF_ANY),
          name,
          n * 2,
          'values',
        );
      }
      // A batch's Buffers hold `count` entries, no more and no fewer.
      refused(
        () => bpf.mapUpdateBatch(fd, Buffer.alloc(shape.key), Buffer.alloc(vs * 2), 2, BPF_ANY),
        name,
        shape.key,
        'keys',
      );
      refused(() => bpf.mapDeleteBatch(fd, Buffer.alloc(shape.key * 3), 2), name, shape.key * 3, 'keys');

      // The right sizes go through to the kernel.
      bpf.mapUpdate(fd, key, value, BPF_ANY);
      const back = Buffer.alloc(vs);
      assert.equal(bpf.mapLookup(fd, key, back), true);
      if (!shape.perCpu) assert.deepEqual(back, value);
      const next = Buffer.alloc(shape.key);
      assert.equal(bpf.mapNextKey(fd, null, next), true);
      if (!shape.array) {
        assert.equal(bpf.mapDelete(fd, key), true);
        assert.equal(bpf.mapLookup(fd, key, back), false);
      }
    });
  }
});
