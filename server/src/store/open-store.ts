/**
 * Chooses and opens a backend: the embedded database in a data directory,
 * or memory only when no directory is given (tests, the demo).
 */
import { LevelJournal } from './level-journal.js';
import { LocalStore } from './local-store.js';
import type { Store } from './store.js';

export interface StoreOptions {
  /** The embedded database's directory; created when missing. */
  readonly dataDir?: string;
}

export async function openStore(opts: StoreOptions): Promise<Store> {
  if (opts.dataDir === undefined) return LocalStore.open();
  return LocalStore.open(await LevelJournal.open(opts.dataDir));
}
