/**
 * The YAML config file: loaded and validated at startup, then watched. The
 * directory is watched rather than the file, because editors and config
 * management replace files (write a temp file, rename it over) instead of
 * writing them in place, and a watch on the old inode would go quiet; the
 * path is polled as well, for what no directory watch sees.
 */
import { readFileSync, statSync, watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { FieldError, ValidationResult } from '../domain/errors.js';
import { parseConfig, type CanopyConfig } from '../domain/spec.js';
import { mayHoldPolicyDocuments } from '../policy/sniff.js';
import { configFormatOf, contentDigest, parseConfigData } from './config-text.js';

export async function loadConfigFile(file: string): Promise<ValidationResult<CanopyConfig>> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    return { ok: false, errors: [{ path: '', message: `cannot read ${file}: ${(err as Error).message}` }] };
  }
  return await parseConfigText(text, path.basename(file));
}

/**
 * Config text → a validated config; syntax errors name their line. `name` is
 * the file's name: `.json` is read as JSON, anything else as YAML.
 */
export async function parseConfigText(text: string, name = 'config'): Promise<ValidationResult<CanopyConfig>> {
  // Istio, Kuma and Kubernetes documents (alone, or beside a Canopy config) go through their importers,
  // loaded only for such text: `serve` of a plain config never loads them.
  if (mayHoldPolicyDocuments(text)) {
    const policy = await import('../policy/import.js');
    if (policy.holdsPolicyDocuments(text)) return policy.importDocuments([{ name, text }]).result;
  }
  const data = parseConfigData(text, configFormatOf(name));
  return data.ok ? parseConfig(data.value) : data;
}

/** Above this size a reload is parsed on a worker thread (below it, a thread costs more than the parse). */
export const OFF_THREAD_BYTES = 1024 * 1024;

/**
 * `parseConfigText` on a worker thread, so that a big file (tens of MB take
 * seconds to parse and validate) does not stall the event loop: xDS streams
 * and the admin API keep answering meanwhile. The result arrives as one
 * structured clone, which costs the main thread a fraction of the parse.
 */
export function parseConfigTextOffThread(text: string, name = 'config'): Promise<ValidationResult<CanopyConfig>> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL('./config-parse-worker.js', import.meta.url), { workerData: { text, name } });
    let done = false;
    worker.once('message', (result: ValidationResult<CanopyConfig>) => {
      done = true;
      resolve(result);
      void worker.terminate();
    });
    worker.once('error', (err) => {
      done = true;
      reject(err);
    });
    worker.once('exit', (code) => {
      if (!done) reject(new Error(`the config parser thread exited (code ${code}) without a result`));
    });
  });
}

/**
 * A parse beside a running server (a reload): on a worker thread for big
 * text, inline for the usual small file. A thread that fails (out of memory,
 * say) rejects the edit as an invalid one would: the running config stays.
 */
export function parseConfigTextAside(text: string, name: string): Promise<ValidationResult<CanopyConfig>> {
  if (text.length < OFF_THREAD_BYTES) return parseConfigText(text, name);
  return parseConfigTextOffThread(text, name).catch((err: unknown): ValidationResult<CanopyConfig> => ({
    ok: false,
    errors: [{ path: '', message: `the config parser thread failed: ${(err as Error).message}` }],
  }));
}

export interface ConfigWatchHandlers {
  /** `digest` is that of the bytes parsed (config-text.ts contentDigest; the data directory's record, config-record.ts). */
  onValid(config: CanopyConfig, digest: string): void;
  /** The running config stays; the edit is never passed to onValid. */
  onInvalid(errors: readonly FieldError[]): void;
  /** The directory watch failed (e.g. the directory was removed); polling the path goes on. */
  onWatchError?(err: Error): void;
  /** A changed content was read and is being parsed (`bytes` long): onValid or onInvalid follows. */
  onParsing?(bytes: number): void;
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
  const target = path.resolve(file);
  const dir = path.dirname(target);
  const settleMs = opts.settleMs ?? 1000;
  // Read now, synchronously (an edit made right after this call must count as a change), unless the caller
  // says what it runs. Only a digest is kept: no copy of a big file's text stays in memory.
  let lastDigest = opts.initialDigest ?? digestOrUndefined(target);
  let lastPolled = statKey(target);
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let reading = Promise.resolve();

  const changed = (): void => {
    if (stopped) return;
    clearTimeout(timer);
    timer = setTimeout(() => {
      // One read at a time, so results arrive in the order the edits were made.
      reading = reading.then(check).catch(rethrowLater);
    }, settleMs);
  };

  const check = async (): Promise<void> => {
    const before = statKey(target);
    if (stopped || before === undefined) return; // Removed, or mid-swap: keep the running config.
    let bytes: Buffer;
    try {
      bytes = await readFile(target);
    } catch {
      return;
    }
    // Written to while we read: wait for it to settle again.
    if (statKey(target) !== before) return changed();
    // Editors raise several events per save, and `touch` raises one without a change.
    const digest = contentDigest(bytes);
    if (stopped || digest === lastDigest) return;
    lastDigest = digest;
    handlers.onParsing?.(bytes.length);
    const result = await parseConfigTextAside(bytes.toString('utf8'), path.basename(target));
    if (stopped) return;
    if (result.ok) handlers.onValid(result.value, digest);
    else handlers.onInvalid(result.errors);
  };

  // Any name in the directory counts: a ConfigMap update renames `..data`, never `mesh.yaml`.
  let dirWatch: FSWatcher | undefined;
  let watchedDir: string | undefined;
  const armDirWatch = (): void => {
    const id = statKey(dir, true);
    if (id === watchedDir) return;
    dirWatch?.close();
    dirWatch = undefined;
    watchedDir = id;
    if (id === undefined) return;
    try {
      dirWatch = watch(dir, changed);
      dirWatch.on('error', (err) => handlers.onWatchError?.(err));
    } catch (err) {
      handlers.onWatchError?.(err as Error);
    }
  };
  armDirWatch();

  const poll = setInterval(() => {
    armDirWatch(); // the directory was replaced: watch the new one
    const now = statKey(target);
    if (now !== lastPolled) {
      lastPolled = now;
      changed();
    }
  }, opts.pollMs ?? 1000);
  poll.unref();
  // The caller's content came from an earlier read: compare once, in case the file changed since.
  if (opts.initialDigest !== undefined) changed();

  return () => {
    stopped = true;
    clearTimeout(timer);
    clearInterval(poll);
    dirWatch?.close();
  };
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
