/**
 * Chooses and opens a backend: etcd when a URL is given, else the embedded
 * database in a data directory, else memory only (tests, the demo).
 */
import { LocalStore } from './level/local-store.js';
import type { Store } from './store.js';
import { CodedError } from '../domain/errors.js';

export interface StoreOptions {
  /** `etcd://host:port[,host:port…][/key/prefix/]`; the prefix defaults to `/canopy/`. */
  readonly url?: string;
  /** The embedded database's directory; created when missing. */
  readonly dataDir?: string;
  /** Open the embedded database even if it lost acknowledged writes (level-check.ts); `onStoreLoss` hears what. */
  readonly acceptStoreLoss?: boolean;
  readonly onStoreLoss?: (report: string) => void;
}

/** Each backend's client library is loaded only when that backend is chosen (etcd3 alone costs ~0.1 s of startup). */
export async function openStore(opts: StoreOptions): Promise<Store> {
  if (opts.url !== undefined) {
    const endpoints = parseEtcdUrl(opts.url);
    const { EtcdStore } = await import('./etcd/etcd-store.js');
    return EtcdStore.open(endpoints);
  }
  if (opts.dataDir === undefined) return LocalStore.open();
  const { LevelJournal } = await import('./level/level-journal.js');
  return LocalStore.open(
    await LevelJournal.open(opts.dataDir, {
      ...(opts.acceptStoreLoss !== undefined ? { acceptLoss: opts.acceptStoreLoss } : {}),
      ...(opts.onStoreLoss ? { onLoss: opts.onStoreLoss } : {}),
    }),
  );
}

export function parseEtcdUrl(url: string): { endpoints: string[]; prefix: string } {
  const m = /^etcd:\/\/([^/]+)(\/.*)?$/.exec(url);
  const hosts = m?.[1]?.split(',').filter(Boolean) ?? [];
  if (!m || hosts.length === 0 || !hosts.every((h) => /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/.test(h))) {
    throw new CodedError('CANOPY_BAD_OPTION', `--store must be etcd://host:port[,host:port…][/prefix/], got "${url}"`);
  }
  const path = m[2] ?? '/canopy/';
  return { endpoints: hosts, prefix: path.endsWith('/') ? path : `${path}/` };
}
