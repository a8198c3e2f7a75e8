/**
 * The real LevelDB journal behind a wrapper that counts its commits, tracks
 * how many writes are durable, and can fail the next commit (a full disk):
 * for tests of group commit and of what a failed commit undoes.
 */
import type { Journal, JournalBatch } from '../../src/store/held-service.js';

export class CountingJournal implements Journal {
  commits = 0;
  failNext = false;
  durable = 0;
  constructor(private readonly inner: Journal) {}
  get description() {
    return this.inner.description;
  }
  load() {
    return this.inner.load();
  }
  close() {
    return this.inner.close();
  }
  begin(): JournalBatch {
    const batch = this.inner.begin();
    return {
      put: (r, s) => batch.put(r, s),
      patch: (r, s, u, d) => batch.patch(r, s, u, d),
      delete: (r, n) => batch.delete(r, n),
      rollback: () => batch.rollback(),
      get size() {
        return batch.size;
      },
      commit: async () => {
        this.commits++;
        if (this.failNext) {
          this.failNext = false;
          throw new Error('disk says no');
        }
        await batch.commit();
        this.durable += batch.size;
      },
    };
  }
}
