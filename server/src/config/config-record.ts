/**
 * What the embedded store remembers about the config file it last applied,
 * so that a restart with the same file need not parse, validate and digest
 * it again ("the store already holds it").
 *
 * `CANOPY-CONFIG` in the data directory holds the file's content key (a
 * hash of its text, its format and the Canopy version that read it), its
 * `server` section and notes, and the digest of each service entry it lists.
 * The record is a hint, never the truth: a start whose file has the same key
 * checks the store itself, and skips the parse only when applying the file
 * would change nothing (every listed service is in the store with the
 * recorded entry digest, and no file-owned service is unlisted). Anything
 * else (an API DELETE of a listed service, a reload interrupted by a crash,
 * a record torn or from another version) falls back to the full load. So the
 * record needs no ordering against the store's writes.
 */
import { createHash } from 'node:crypto';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { FieldError } from '../domain/errors.js';
import type { CanopyConfig, ServerSettings } from '../domain/spec.js';
import { packagePath } from '../platform/paths.js';
import type { ConfigFormat } from './config-text.js';
import { fileEntryDigest } from './file-source.js';
import type { Store } from '../store/store.js';

export const CONFIG_RECORD_FILE = 'CANOPY-CONFIG';
/** Bumped when what a record means changes: older records are then ignored. */
const RECORD_FORMAT = 2;

export interface ConfigRecord {
  readonly key: string;
  readonly server: ServerSettings;
  readonly notes?: readonly FieldError[];
  /** Service name → the digest of its entry in the file. */
  readonly services: Readonly<Record<string, string>>;
  /** The store's revision when the file had been applied: later writes to a listed service came from the API. */
  readonly revision: number;
  /** The file's status and content digest when it was read, if it had settled by then (config-start.ts). */
  readonly file?: FileStamp;
}

/**
 * A config file's status (as `stat` gives it, in nanoseconds) and the digest of the content read after it.
 * The change time moves on any write, rename over or status change and cannot be set back by tools, so a
 * file with every field equal holds the recorded content (the rule git's index relies on).
 */
export interface FileStamp {
  readonly dev: string;
  readonly ino: string;
  readonly size: string;
  readonly mtimeNs: string;
  readonly ctimeNs: string;
  readonly digest: string;
}

function isStamp(x: unknown): x is FileStamp {
  if (typeof x !== 'object' || x === null) return false;
  const o = x as Record<string, unknown>;
  return ['dev', 'ino', 'size', 'mtimeNs', 'ctimeNs', 'digest'].every((k) => typeof o[k] === 'string');
}

let version: string | undefined;
function canopyVersion(): string {
  try {
    version ??= String((JSON.parse(readFileSync(packagePath('package.json'), 'utf8')) as { version: unknown }).version);
  } catch {
    version = 'unknown';
  }
  return version;
}

/**
 * The file's content key, from the digest of its bytes (config-text.ts
 * contentDigest): the same text read as the same format by the same
 * Canopy version gives the same config (a new version may read it with other
 * defaults, and a new record is then made).
 */
export function configKey(digest: string, format: ConfigFormat): string {
  return createHash('sha256')
    .update(`canopy-config/${RECORD_FORMAT}/${canopyVersion()}/${format}\0${digest}`)
    .digest('base64url');
}

/** The record in `dataDir`, if there is a whole one (the caller compares its key). */
export function readConfigRecord(dataDir: string): ConfigRecord | undefined {
  let parsed: Partial<ConfigRecord>;
  try {
    parsed = JSON.parse(readFileSync(path.join(dataDir, CONFIG_RECORD_FILE), 'utf8')) as Partial<ConfigRecord>;
  } catch {
    return undefined; // none yet, or torn: the full load makes a new one
  }
  if (typeof parsed.key !== 'string') return undefined;
  if (typeof parsed.server !== 'object' || typeof parsed.services !== 'object') return undefined;
  if (typeof parsed.revision !== 'number' || parsed.server === null || parsed.services === null) return undefined;
  if (parsed.file !== undefined && !isStamp(parsed.file)) return undefined;
  return parsed as ConfigRecord;
}

/**
 * The record for `config` read from a file with `key`, once `store` holds it
 * (applied up to store `revision`): the entry digests are the ones the store
 * keeps (the file source wrote them; no digest is computed twice).
 */
export async function configRecord(
  store: Store,
  key: string,
  config: CanopyConfig,
  revision: number,
  file?: FileStamp,
): Promise<ConfigRecord> {
  const services: Record<string, string> = {};
  for (const spec of config.services) {
    const held = await store.get(spec.name);
    services[spec.name] = held?.fileDigest ?? fileEntryDigest(spec);
  }
  return {
    key,
    server: config.server,
    ...(config.notes ? { notes: config.notes } : {}),
    services,
    revision,
    ...(file ? { file } : {}),
  };
}

/** Written aside and renamed over: a crash leaves the old record or the new one, never half of one. */
export function writeConfigRecord(dataDir: string, record: ConfigRecord): void {
  const file = path.join(dataDir, CONFIG_RECORD_FILE);
  writeFileSync(`${file}.tmp`, JSON.stringify(record));
  renameSync(`${file}.tmp`, file);
}

/**
 * Whether applying the recorded file to `store` would change nothing: then
 * the file need not be read again. Returns the listed services an API write
 * changed since the file was applied (kept, as the ownership rule says), or
 * undefined when the file must be applied.
 */
export async function storeHoldsRecord(store: Store, record: ConfigRecord): Promise<string[] | undefined> {
  const changedByApi: string[] = [];
  for (const [name, digest] of Object.entries(record.services)) {
    const held = await store.get(name);
    if (held?.fileDigest !== digest) return undefined;
    if (held.revision > record.revision) changedByApi.push(name);
  }
  const { services } = await store.list();
  for (const s of services) if (s.owner === 'file' && !Object.hasOwn(record.services, s.spec.name)) return undefined;
  return changedByApi;
}
