/**
 * The config file at start: read once, keyed by its content, and either
 * found already held by the store (config-record.ts: no parse, no
 * validation, no digests, no write) or parsed and applied under the
 * ownership rule (file-source.ts), after which the record is made anew.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { ValidationResult } from '../domain/errors.js';
import { formatFieldErrors } from '../domain/errors.js';
import type { CanopyConfig } from '../domain/spec.js';
import { parseConfigText } from './config-file.js';
import { configKey, configRecord, readConfigRecord, storeHoldsRecord, writeConfigRecord } from './config-record.js';
import type { ConfigRecord } from './config-record.js';
import { configFormatOf, contentDigest } from './config-text.js';
import { applyFileServices, type FileApplyResult } from './file-source.js';
import type { Store } from './store.js';

/** The config file as `canopy serve` starts with it. */
export interface StartConfig {
  readonly file: string;
  /** The digest of the bytes read (config-text.ts contentDigest): its record's key and the watcher's start. */
  readonly digest: string;
  /**
   * The parsed file; for a file whose key the data directory recorded, only
   * its `server` section and notes (from the record) and no services.
   */
  readonly config: CanopyConfig;
  /** Set when the data directory holds a record with this key: the parse was skipped. */
  readonly recorded?: ConfigRecord;
}

/**
 * Reads `file` and, unless `dataDir` records its key, parses and validates
 * it. Invalid or unreadable files give their errors, as loadConfigFile.
 */
export async function readStartConfig(file: string, dataDir?: string): Promise<ValidationResult<StartConfig>> {
  let bytes: Buffer;
  try {
    // At start nothing else runs yet: read at once rather than in the thread pool's chunks.
    bytes = readFileSync(file);
  } catch (err) {
    return { ok: false, errors: [{ path: '', message: `cannot read ${file}: ${(err as Error).message}` }] };
  }
  // Keyed by its bytes: a file the store already holds is never decoded.
  const digest = contentDigest(bytes);
  const key = configKey(digest, configFormatOf(file));
  const recorded = dataDir === undefined ? undefined : readConfigRecord(dataDir, key);
  if (recorded) {
    const config = { services: [], server: recorded.server, ...(recorded.notes ? { notes: recorded.notes } : {}) };
    return { ok: true, value: { file, digest, config, recorded } };
  }
  const parsed = await parseConfigText(bytes.toString('utf8'), path.basename(file));
  return parsed.ok ? { ok: true, value: { file, digest, config: parsed.value } } : parsed;
}

export interface StartApplied extends FileApplyResult {
  /** The store already held the unchanged file: nothing was parsed or written. */
  readonly unchangedFile: boolean;
  /** Listed services an API write changed since the file was applied (kept, by the ownership rule). */
  readonly keptApiChanges: readonly string[];
  /** The digest of the file content now applied (config-text.ts contentDigest), where a file was read. */
  readonly digest?: string;
}

/**
 * Brings the store up to the file: nothing to do when it already holds the
 * recorded file; otherwise the file's services are applied (parsed now if
 * the record was all that was read) and, with a data directory, recorded.
 */
export async function applyStartConfig(store: Store, start: StartConfig, dataDir?: string): Promise<StartApplied> {
  if (start.recorded) {
    const kept = await storeHoldsRecord(store, start.recorded);
    if (kept) {
      const unchanged = Object.keys(start.recorded.services).length;
      return { replaced: [], deleted: [], unchanged, unchangedFile: true, keptApiChanges: kept, digest: start.digest };
    }
  }
  let config = start.config;
  let digest = start.digest;
  if (start.recorded) {
    // The file is the recorded one, but the store moved away from it (a listed service deleted through the
    // API, a reload cut short): its services are needed after all. Read again: it may have been edited since.
    const again = await readStartConfig(start.file);
    if (!again.ok) throw new Error(`invalid config ${start.file}: ${formatFieldErrors(again.errors)}`);
    ({ config, digest } = again.value);
  }
  const applied = await applyFileServices(store, config.services);
  if (dataDir !== undefined) await recordConfig(store, dataDir, configKey(digest, configFormatOf(start.file)), config);
  return { ...applied, unchangedFile: false, keptApiChanges: [], digest };
}

/** Best effort: without a record the next start parses the file, as before records existed. */
export async function recordConfig(store: Store, dataDir: string, key: string, config: CanopyConfig): Promise<void> {
  try {
    const { revision } = await store.list();
    writeConfigRecord(dataDir, await configRecord(store, key, config, revision));
  } catch {
    // a read-only or full data directory already failed the store's writes louder than this would
  }
}
