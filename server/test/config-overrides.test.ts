/**
 * What the store keeps over the config file (config/config-overrides.ts), on a real store: an API edit of
 * a file-owned service's endpoint counts, a service the start just wrote from the file does not, and an
 * untouched file leaves nothing to say.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { storeOverrides } from '../src/config/config-overrides.js';
import { applyFileServices } from '../src/config/file-source.js';
import { LocalStore } from '../src/store/level/local-store.js';
import { ep, service } from './support/builders.js';

describe('store overrides of the config file', () => {
  it('counts API-changed endpoints of file-owned services, not the ones just written', async () => {
    const store = await LocalStore.open();
    try {
      const a = service('a', [ep({ address: '10.0.0.1', port: 80 }), ep({ address: '10.0.0.2', port: 80 })]);
      const b = service('b', [ep({ address: '10.0.1.1', port: 80 })]);
      await applyFileServices(store, [a, b]);
      assert.equal(await storeOverrides(store, [a, b], new Set()), undefined, 'the store holds the file as it is');
      await store.editEndpoints('a', (current) => {
        const held = current.get('10.0.0.1:80')!;
        return { upserts: [{ ...held, health: 'unhealthy' }], removals: [] };
      });
      assert.deepEqual(await storeOverrides(store, [a, b], new Set()), { endpoints: 1, services: ['a'] });
      assert.equal(await storeOverrides(store, [a, b], new Set(['a'])), undefined, 'a was just written');
    } finally {
      await store.close();
    }
  });
});
