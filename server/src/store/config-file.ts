/**
 * The YAML config file: loaded and validated at startup, then watched. The
 * directory is watched rather than the file, because editors and config
 * management replace files (write a temp file, rename it over) instead of
 * writing them in place, and a watch on the old inode would go quiet.
 */
import { readFileSync, watch } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { FieldError, ValidationResult } from '../domain/errors.js';
import { parseConfig, type CanopyConfig } from '../domain/spec.js';
import { configFormatOf, parseConfigData, type ConfigFormat } from './config-text.js';

export async function loadConfigFile(file: string): Promise<ValidationResult<CanopyConfig>> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    return { ok: false, errors: [{ path: '', message: `cannot read ${file}: ${(err as Error).message}` }] };
  }
  return parseConfigText(text, configFormatOf(file));
}

/** Config text (YAML unless `format` says JSON) → a validated config; syntax errors name their line. */
export function parseConfigText(text: string, format: ConfigFormat = 'yaml'): ValidationResult<CanopyConfig> {
  const data = parseConfigData(text, format);
  return data.ok ? parseConfig(data.value) : data;
}

export interface ConfigWatchHandlers {
  onValid(config: CanopyConfig): void;
  /** The running config stays; the edit is never passed to onValid. */
  onInvalid(errors: readonly FieldError[]): void;
  /** The watch itself failed (e.g. the directory was removed); no further events come. */
  onWatchError?(err: Error): void;
}

export interface ConfigWatchOptions {
  /** Quiet time after the last file event before reading (default 100 ms). */
  readonly debounceMs?: number;
}

/** Watches `file` and reports each changed content once; returns a function that stops watching. */
export function watchConfigFile(
  file: string,
  handlers: ConfigWatchHandlers,
  opts: ConfigWatchOptions = {},
): () => void {
  const base = path.basename(file);
  // Read now, synchronously: an edit made right after this call must count as a change.
  let lastText = readOrUndefined(file);
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let reading = Promise.resolve();

  const check = async (): Promise<void> => {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch {
      return; // Removed, or between unlink and rename: keep the running config.
    }
    // Editors raise several events per save, and `touch` raises one without a change.
    if (stopped || text === lastText) return;
    lastText = text;
    const result = parseConfigText(text, configFormatOf(file));
    if (result.ok) handlers.onValid(result.value);
    else handlers.onInvalid(result.errors);
  };

  const watcher = watch(path.dirname(path.resolve(file)), (_event, name) => {
    if (name !== null && name !== base) return;
    clearTimeout(timer);
    timer = setTimeout(() => {
      // One read at a time, so results arrive in the order the edits were made.
      reading = reading.then(check).catch(rethrowLater);
    }, opts.debounceMs ?? 100);
  });
  watcher.on('error', (err) => {
    clearTimeout(timer);
    handlers.onWatchError?.(err);
  });

  return () => {
    stopped = true;
    clearTimeout(timer);
    watcher.close();
  };
}

function readOrUndefined(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
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
