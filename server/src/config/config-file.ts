/**
 * The YAML config file: loaded and validated at startup, and parsed again on
 * each edit (config-watch.ts watches it).
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { CodedError, type ValidationResult } from '../domain/errors.js';
import { parseConfig, type CanopyConfig } from '../domain/spec.js';
import { mayHoldPolicyDocuments } from '../policy/sniff.js';
import { configFormatOf, parseConfigData } from './config-text.js';

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
      if (!done)
        reject(new CodedError('CANOPY_PEER_FAILED', `the config parser thread exited (code ${code}) without a result`));
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
