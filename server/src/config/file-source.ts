/**
 * The config file as a writer of the store, under the ownership rule
 * (docs/operations.md, "Storage and ownership"): the file owns the services it lists, the API owns
 * the ones it creates.
 *
 * - A listed service whose entry is unchanged since it was last applied is
 *   left alone, with any API PATCH (health, weight) or PUT made since.
 * - A listed service whose entry changed (or that is missing, or was created
 *   by the API) is replaced by the entry and becomes file-owned; a file-owned
 *   one keeps the health the API set on endpoints the entry still lists
 *   (file-health.ts).
 * - A file-owned service the file no longer lists is deleted; API-owned ones
 *   are never touched.
 */
import { createHash } from 'node:crypto';
import type { ServiceSpec } from '../domain/service.js';
import { endpointJson, serviceSpecToJson } from '../domain/spec.js';
import { StoreConflict, type PutEntry, type Store } from '../store/store.js';
import { CodedError } from '../domain/errors.js';
import { carryHealth, type FileHealth, type HealthCarry } from './file-health.js';

export interface FileApplyResult {
  readonly replaced: readonly string[];
  readonly deleted: readonly string[];
  readonly unchanged: number;
  /** Health set through the API kept over changed entries, and the marks the file replaced. */
  readonly health?: HealthCarry;
}

/** How often a write that lost to a concurrent writer is retried against the new state. */
const ATTEMPTS = 5;

/** `before`: the health marks of the file's entries as last applied, when this process knows them. */
export async function applyFileServices(
  store: Store,
  specs: readonly ServiceSpec[],
  before?: FileHealth,
): Promise<FileApplyResult> {
  const replaced: string[] = [];
  const deleted: string[] = [];
  let unchanged = 0;
  const listed = new Set<string>();
  const changed: PutEntry[] = [];
  const health: HealthCarry = { kept: [], reset: [] };
  for (const file of specs) {
    listed.add(file.name);
    const digest = fileEntryDigest(file);
    const current = await store.get(file.name);
    if (current?.fileDigest === digest) unchanged++;
    else {
      const spec = current?.owner === 'file' ? carryHealth(file, current.spec, before?.get(file.name), health) : file;
      changed.push({ spec, opts: { owner: 'file', fileDigest: digest, ifRevision: current?.revision ?? 0 } });
    }
  }
  // All changed entries in one write (one disk sync for a file of a thousand services) ...
  const together = await store.putMany(changed).then(
    () => true,
    (err: unknown) => {
      if (err instanceof StoreConflict) return false;
      throw err;
    },
  );
  if (together) replaced.push(...changed.map((c) => c.spec.name));
  else {
    // ... unless another writer got in between: then one at a time against what it wrote, as any writer.
    for (const { spec, opts } of changed) {
      const wrote = await retryOnConflict(async () => {
        const current = await store.get(spec.name);
        if (current?.fileDigest === opts.fileDigest) return false;
        await store.put(spec, { ...opts, ifRevision: current?.revision ?? 0 });
        return true;
      });
      if (wrote) replaced.push(spec.name);
      else unchanged++;
    }
  }
  const { services } = await store.list();
  for (const s of services) {
    if (s.owner !== 'file' || listed.has(s.spec.name)) continue;
    const gone = await retryOnConflict(async () => {
      const current = await store.get(s.spec.name);
      if (current?.owner !== 'file') return false; // taken over by the API meanwhile
      return (await store.delete(s.spec.name, { ifRevision: current.revision })) !== undefined;
    });
    if (gone) deleted.push(s.spec.name);
  }
  const marks = health.kept.length + health.reset.length > 0 ? { health } : {};
  return { replaced, deleted, unchanged, ...marks };
}

/**
 * The same entry always digests the same, whatever its key order or defaults
 * in the YAML: the SHA-256 of its canonical JSON (`serviceSpecToJson`). The
 * endpoints' part is written straight into the hash in pieces (endpointJson
 * gives the bytes JSON.stringify would), not built as 100k objects and one
 * string first.
 */
export function fileEntryDigest(spec: ServiceSpec): string {
  const text = JSON.stringify(serviceSpecToJson({ ...spec, endpoints: [] }));
  const at = text.indexOf(EMPTY_ENDPOINTS);
  const hash = createHash('sha256');
  if (at < 0) throw new CodedError('CANOPY_BROKEN_INVARIANT', 'a canonical service entry without its endpoints field');
  hash.update(text.slice(0, at + EMPTY_ENDPOINTS.length - 1));
  let piece = '';
  spec.endpoints.forEach((ep, i) => {
    piece += i === 0 ? endpointJson(ep) : `,${endpointJson(ep)}`;
    if (piece.length >= 1 << 16) {
      hash.update(piece);
      piece = '';
    }
  });
  return hash
    .update(piece)
    .update(text.slice(at + EMPTY_ENDPOINTS.length - 1))
    .digest('base64url');
}

/** Where the endpoints go: the key order of serviceSpecToJson puts nothing named so before them. */
const EMPTY_ENDPOINTS = '"endpoints":[]';

async function retryOnConflict<T>(attempt: () => Promise<T>): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await attempt();
    } catch (err) {
      if (!(err instanceof StoreConflict) || i >= ATTEMPTS) throw err;
    }
  }
}
