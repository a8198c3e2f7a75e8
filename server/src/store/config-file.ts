/**
 * The YAML config file: loaded and validated at startup, then watched. The
 * directory is watched rather than the file, because editors and config
 * management replace files instead of writing them in place.
 */
import { watch } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseDocument } from 'yaml';
import type { FieldError, ValidationResult } from '../domain/errors.js';
import { parseConfig, type CanopyConfig } from '../domain/spec.js';

export async function loadConfigFile(file: string): Promise<ValidationResult<CanopyConfig>> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    return { ok: false, errors: [{ path: '', message: `cannot read ${file}: ${(err as Error).message}` }] };
  }
  return parseConfigText(text);
}

export function parseConfigText(text: string): ValidationResult<CanopyConfig> {
  const doc = parseDocument(text);
  if (doc.errors.length > 0) {
    const errors: FieldError[] = doc.errors.map((e) => ({
      path: '',
      message: `YAML syntax error${e.linePos?.[0] ? ` at line ${e.linePos[0].line}, column ${e.linePos[0].col}` : ''}: ${e.message.split('\n')[0]}`,
    }));
    return { ok: false, errors };
  }
  return parseConfig(doc.toJS());
}

export interface ConfigWatchHandlers {
  onValid(config: CanopyConfig): void;
  onInvalid(errors: readonly FieldError[]): void;
}

/** Watches `file`; returns a function that stops watching. */
export function watchConfigFile(file: string, handlers: ConfigWatchHandlers, opts: { debounceMs?: number } = {}): () => void {
  const dir = path.dirname(path.resolve(file));
  const base = path.basename(file);
  let timer: NodeJS.Timeout | undefined;
  let lastText: string | undefined;
  let stopped = false;
  const check = async (): Promise<void> => {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch {
      return; // mid-replace, or removed: keep the running config
    }
    if (stopped || text === lastText) return;
    lastText = text;
    const result = parseConfigText(text);
    if (result.ok) handlers.onValid(result.value);
    else handlers.onInvalid(result.errors);
  };
  void readFile(file, 'utf8').then(
    (t) => {
      lastText ??= t;
    },
    () => {},
  );
  const watcher = watch(dir, (_event, name) => {
    if (name !== null && name !== base) return;
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => void check(), opts.debounceMs ?? 100);
  });
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
    watcher.close();
  };
}
