/**
 * The config file at start: read once, keyed by its content, and either
 * found already held by the store (config-record.ts: no parse, no
 * validation, no digests, no write) or parsed and applied under the
 * ownership rule (file-source.ts), after which the record is made anew.
 * A file whose status is the one recorded is not even read (FileStamp).
 */
import { readFileSync, statSync, type BigIntStats } from 'node:fs';
import path from 'node:path';
import type { ValidationResult } from '../domain/errors.js';
import { CodedError, formatFieldErrors } from '../domain/errors.js';
import type { CanopyConfig } from '../domain/spec.js';
import { parseConfigText } from './config-file.js';
import { configKey, configRecord, readConfigRecord, storeHoldsRecord, writeConfigRecord } from './config-record.js';
import type { ConfigRecord, FileStamp } from './config-record.js';
import { configFormatOf, contentDigest } from './config-text.js';
import { applyFileServices, type FileApplyResult } from './file-source.js';
import type { Store } from '../store/store.js';

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
  /** The file's status and digest, when it had settled before it was read: recorded with the file. */
  readonly stamp?: FileStamp;
  /** The file's status was the recorded one: it was not read at all. */
  readonly unread?: boolean;
}

/**
 * A file changed less than this long before it is looked at gets no stamp: a later write inside the
 * file system's timestamp granularity could leave its status as it was (git's "racy" case).
 */
export const STAMP_SETTLE_MS = 2000;

function stampOf(st: BigIntStats, digest: string): FileStamp {
  const s = (n: bigint) => n.toString();
  return { dev: s(st.dev), ino: s(st.ino), size: s(st.size), mtimeNs: s(st.mtimeNs), ctimeNs: s(st.ctimeNs), digest };
}

function sameStatus(recorded: FileStamp, st: BigIntStats): boolean {
  const now = stampOf(st, recorded.digest);
  return (['dev', 'ino', 'size', 'mtimeNs', 'ctimeNs'] as const).every((k) => recorded[k] === now[k]);
}

/**
 * Reads `file` and, unless `dataDir` records its key, parses and validates
 * it. Invalid or unreadable files give their errors, as loadConfigFile.
 */
export async function readStartConfig(file: string, dataDir?: string): Promise<ValidationResult<StartConfig>> {
  const format = configFormatOf(file);
  let bytes: Buffer;
  let st: BigIntStats;
  let prior: ConfigRecord | undefined;
  try {
    // Before the read: a write after it moves the change time past the one recorded.
    st = statSync(file, { bigint: true });
    prior = dataDir === undefined ? undefined : readConfigRecord(dataDir);
    if (
      settled(st) &&
      prior?.file &&
      sameStatus(prior.file, st) &&
      prior.key === configKey(prior.file.digest, format)
    ) {
      return { ok: true, value: { ...recordedStart(file, prior.file.digest, prior), stamp: prior.file, unread: true } };
    }
    // At start nothing else runs yet: read at once rather than in the thread pool's chunks.
    bytes = readFileSync(file);
  } catch (err) {
    return { ok: false, errors: [{ path: '', message: `cannot read ${file}: ${(err as Error).message}` }] };
  }
  // Keyed by its bytes: a file the store already holds is never decoded.
  const digest = contentDigest(bytes);
  const stamp = settled(st) ? { stamp: stampOf(st, digest) } : {};
  // The record read once: it holds this content when its key is this content's.
  const recorded = prior?.key === configKey(digest, format) ? prior : undefined;
  if (recorded) return { ok: true, value: { ...recordedStart(file, digest, recorded), ...stamp } };
  const parsed = await parseConfigText(bytes.toString('utf8'), path.basename(file));
  return parsed.ok ? { ok: true, value: { file, digest, config: parsed.value, ...stamp } } : parsed;
}

/** Last changed (its content or its status) more than STAMP_SETTLE_MS ago. */
function settled(st: BigIntStats): boolean {
  const changed = st.ctimeNs > st.mtimeNs ? st.ctimeNs : st.mtimeNs;
  return Number(changed / 1_000_000n) < Date.now() - STAMP_SETTLE_MS;
}

function recordedStart(file: string, digest: string, recorded: ConfigRecord): StartConfig {
  const config = { services: [], server: recorded.server, ...(recorded.notes ? { notes: recorded.notes } : {}) };
  return { file, digest, config, recorded };
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
      // A record made before the file settled (or by a reload) gains its stamp: the next start need not read it.
      if (dataDir !== undefined && start.stamp && !start.recorded.file)
        writeRecordQuietly(dataDir, { ...start.recorded, file: start.stamp });
      const unchanged = Object.keys(start.recorded.services).length;
      return { replaced: [], deleted: [], unchanged, unchangedFile: true, keptApiChanges: kept, digest: start.digest };
    }
  }
  let config = start.config;
  let digest = start.digest;
  let stamp = start.stamp;
  if (start.recorded) {
    // The file is the recorded one, but the store moved away from it (a listed service deleted through the
    // API, a reload cut short): its services are needed after all. Read again: it may have been edited since.
    const again = await readStartConfig(start.file);
    if (!again.ok)
      throw new CodedError(
        'CANOPY_INVALID_CONFIG',
        `invalid config ${start.file}: ${formatFieldErrors(again.errors)}`,
        again.errors,
      );
    ({ config, digest, stamp } = again.value);
  }
  const applied = await applyFileServices(store, config.services);
  if (dataDir !== undefined)
    await recordConfig(store, dataDir, configKey(digest, configFormatOf(start.file)), config, stamp);
  return { ...applied, unchangedFile: false, keptApiChanges: [], digest };
}

/** Best effort: without a record the next start parses the file, as before records existed. */
export async function recordConfig(
  store: Store,
  dataDir: string,
  key: string,
  config: CanopyConfig,
  stamp?: FileStamp,
): Promise<void> {
  try {
    const { revision } = await store.list();
    writeRecordQuietly(dataDir, await configRecord(store, key, config, revision, stamp));
  } catch {
    // as below
  }
}

function writeRecordQuietly(dataDir: string, record: ConfigRecord): void {
  try {
    writeConfigRecord(dataDir, record);
  } catch {
    // a read-only or full data directory already failed the store's writes louder than this would
  }
}
