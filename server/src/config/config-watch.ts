/**
 * The config file, watched while the server runs. The directory is watched
 * rather than the file, because editors and config management replace files
 * (write a temp file, rename it over) instead of writing them in place, and a
 * watch on the old inode would go quiet; but only what changes the file
 * counts: an event for the file's own name, or any event after which the path
 * (symlinks followed) reaches another file (a Kubernetes ConfigMap swapping
 * its `..data` link). A log or another config written beside it every half
 * second changes nothing. The path is polled as well, for what no directory
 * watch sees (a replaced directory, a link swapped further up).
 *
 * A change is read once the file has been quiet for `settleMs`, but never
 * later than `maxWaitMs` after it was first seen: a file rewritten without
 * pause is still read.
 */
import { readFileSync, statSync, watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { FieldError } from '../domain/errors.js';
import type { CanopyConfig } from '../domain/spec.js';
import { parseConfigTextAside } from './config-file.js';
import { contentDigest } from './config-text.js';

/** How a change came to be seen. */
export type SeenVia = 'file event' | 'link or rename event' | 'poll';

export interface ConfigWatchHandlers {
  /** `digest` is that of the bytes parsed (config-text.ts contentDigest; the data directory's record, config-record.ts). */
  onValid(config: CanopyConfig, digest: string, waitedMs: number): void;
  /** The running config stays; the edit is never passed to onValid. */
  onInvalid(errors: readonly FieldError[], waitedMs: number): void;
  /** The directory watch failed (e.g. the directory was removed); polling the path goes on. */
  onWatchError?(err: Error): void;
  /** A change was noticed; the file is read within `waitMs` (once quiet for the settle time). */
  onSeen?(via: SeenVia, waitMs: number): void;
  /** A changed content was read and is being parsed (`bytes` long): onValid or onInvalid follows. */
  onParsing?(bytes: number): void;
  /** Read after a change, the content is the running one (a `touch`, a save without an edit). */
  onUnchanged?(): void;
  /** The file could not be read (removed, unreadable): the running config stays. */
  onUnreadable?(why: string): void;
}

export interface ConfigWatchOptions {
  /**
   * Quiet time after the last change before the file is read (default
   * 1000 ms). An editor or a script that writes a file in two steps leaves a
   * valid-looking half in between; it is read only once nothing has changed
   * for this long. Saving atomically (write a temp file, rename it over) needs
   * no wait at all, and is what we recommend.
   */
  readonly settleMs?: number;
  /** The longest a seen change waits to be read, however often the file keeps changing (default 5000 ms). */
  readonly maxWaitMs?: number;
  /**
   * How often the path itself is also stat'ed (default 1000 ms): catches what a
   * directory watch cannot, a replaced directory and a swapped symlink.
   */
  readonly pollMs?: number;
  /**
   * The digest of the content the caller already runs (read at start): the
   * file is then not read again now, and is checked against it once, after
   * `settleMs`, so an edit made between the caller's read and this call
   * still counts. Without it the file is read now.
   */
  readonly initialDigest?: string;
}

export const DEFAULT_SETTLE_MS = 1000;
export const DEFAULT_MAX_WAIT_MS = 5000;

/**
 * Watches `file` and reports each changed content once, after it settled;
 * returns a function that stops watching. Works for a file edited in place,
 * replaced by rename, reached through symlinks (a Kubernetes ConfigMap
 * volume: `mesh.yaml` → `..data/mesh.yaml`, updated by swapping `..data`), and
 * in a directory that is itself replaced.
 */
export function watchConfigFile(
  file: string,
  handlers: ConfigWatchHandlers,
  opts: ConfigWatchOptions = {},
): () => void {
  const w = new ConfigWatch(path.resolve(file), handlers, opts);
  return () => w.stop();
}

class ConfigWatch {
  private readonly dir: string;
  private readonly settleMs: number;
  private readonly maxWaitMs: number;
  /** Only a digest is kept: no copy of a big file's text stays in memory. */
  private lastDigest: string | undefined;
  /** The path's status (symlinks followed) when last looked at. */
  private lastStat: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** When the change waiting to be read was first seen; undefined while none waits. */
  private seenAt: number | undefined;
  private stopped = false;
  private reading = Promise.resolve();
  private dirWatch: FSWatcher | undefined;
  private watchedDir: string | undefined;
  private readonly poll: NodeJS.Timeout;

  constructor(
    private readonly target: string,
    private readonly handlers: ConfigWatchHandlers,
    opts: ConfigWatchOptions,
  ) {
    this.dir = path.dirname(target);
    this.settleMs = opts.settleMs ?? DEFAULT_SETTLE_MS;
    this.maxWaitMs = Math.max(opts.maxWaitMs ?? DEFAULT_MAX_WAIT_MS, this.settleMs);
    // Read now, synchronously (an edit made right after this call must count as a change), unless the caller
    // says what it runs.
    this.lastDigest = opts.initialDigest ?? digestOrUndefined(target);
    this.lastStat = statKey(target);
    this.armDirWatch();
    this.poll = setInterval(() => {
      this.armDirWatch(); // the directory was replaced: watch the new one
      if (this.statMoved()) this.changed('poll');
    }, opts.pollMs ?? 1000);
    this.poll.unref();
    // The caller's content came from an earlier read: compare once, in case the file changed since.
    if (opts.initialDigest !== undefined) this.changed(undefined);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.poll);
    this.dirWatch?.close();
  }

  /** Whether the path now reaches another file, or the same one changed; remembers what it saw. */
  private statMoved(): boolean {
    const now = statKey(this.target);
    if (now === this.lastStat) return false;
    this.lastStat = now;
    return true;
  }

  /** A directory event: the file's own name, or whatever else left the path reaching something new. */
  private onDirEvent(name: string | Buffer | null): void {
    const own = name !== null && name.toString() === path.basename(this.target);
    const moved = this.statMoved();
    if (own) this.changed('file event');
    else if (moved) this.changed('link or rename event');
  }

  /** (Re)starts the settle delay, bounded by maxWaitMs since the change was first seen. */
  private changed(via: SeenVia | undefined): void {
    if (this.stopped) return;
    const now = Date.now();
    if (this.seenAt === undefined) {
      this.seenAt = now;
      if (via !== undefined) this.handlers.onSeen?.(via, this.maxWaitMs);
    }
    clearTimeout(this.timer);
    const delay = Math.max(0, Math.min(this.settleMs, this.seenAt + this.maxWaitMs - now));
    this.timer = setTimeout(() => {
      // One read at a time, so results arrive in the order the edits were made.
      this.reading = this.reading.then(() => this.check()).catch(rethrowLater);
    }, delay);
  }

  private async check(): Promise<void> {
    const before = statKey(this.target);
    if (this.stopped) return;
    if (before === undefined) return this.unreadable('the file is missing (removed, or mid-swap)');
    let bytes: Buffer;
    try {
      bytes = await readFile(this.target);
    } catch (err) {
      return this.unreadable((err as Error).message);
    }
    // Written to while we read: read again once it settles (the bound still holds: seenAt stays).
    if (statKey(this.target) !== before) return this.changed(undefined);
    const waitedMs = Date.now() - (this.seenAt ?? Date.now());
    const firstSeen = this.seenAt;
    this.seenAt = undefined;
    // Editors raise several events per save, and `touch` raises one without a change.
    const digest = contentDigest(bytes);
    if (this.stopped) return;
    if (digest === this.lastDigest) {
      if (firstSeen !== undefined) this.handlers.onUnchanged?.();
      return;
    }
    this.lastDigest = digest;
    this.handlers.onParsing?.(bytes.length);
    const result = await parseConfigTextAside(bytes.toString('utf8'), path.basename(this.target));
    if (this.stopped) return;
    if (result.ok) this.handlers.onValid(result.value, digest, waitedMs);
    else this.handlers.onInvalid(result.errors, waitedMs);
  }

  private unreadable(why: string): void {
    this.seenAt = undefined;
    this.handlers.onUnreadable?.(why);
  }

  private armDirWatch(): void {
    const id = statKey(this.dir, true);
    if (id === this.watchedDir) return;
    this.dirWatch?.close();
    this.dirWatch = undefined;
    this.watchedDir = id;
    if (id === undefined) return;
    try {
      this.dirWatch = watch(this.dir, (_event, name) => this.onDirEvent(name));
      this.dirWatch.on('error', (err) => this.handlers.onWatchError?.(err));
    } catch (err) {
      this.handlers.onWatchError?.(err as Error);
    }
  }
}

/** What identifies a file's current content cheaply; stat follows symlinks. */
function statKey(p: string, identityOnly = false): string | undefined {
  try {
    const s = statSync(p);
    return identityOnly ? `${s.dev}:${s.ino}` : `${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;
  } catch {
    return undefined;
  }
}

function digestOrUndefined(file: string): string | undefined {
  try {
    return contentDigest(readFileSync(file));
  } catch {
    return undefined;
  }
}

/** A throwing handler is the caller's bug: surface it as uncaught, but keep the read queue alive. */
function rethrowLater(err: unknown): void {
  setImmediate(() => {
    throw err;
  });
}
