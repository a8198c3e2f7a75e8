/**
 * Policy documents as their users write them (Istio, Kuma, Kubernetes YAML),
 * read into plain values with the place each came from, and the findings an
 * importer makes about them: errors stop the import, notes explain what was
 * not imported or behaves differently. Every finding carries a field path.
 */
import { loadAll, YAMLException } from 'js-yaml';
import type { FieldError } from '../domain/errors.js';

export type Obj = Record<string, unknown>;

export interface SourceText {
  /** A file name, shown at the start of every path. */
  readonly name: string;
  readonly text: string;
}

export interface PolicyDocument {
  /** `file.yaml[2]`: the third document of file.yaml. */
  readonly at: string;
  readonly value: unknown;
}

export class Findings {
  readonly errors: FieldError[] = [];
  readonly notes: FieldError[] = [];

  error(path: string, message: string): undefined {
    this.errors.push({ path, message });
    return undefined;
  }

  note(path: string, message: string): void {
    this.notes.push({ path, message });
  }

  /**
   * Checks an object's keys: `used` are read by the importer, `unsupported`
   * are known fields Canopy does not import (a note each), anything else is an
   * unknown field (an error: a typo must not silently mean nothing).
   */
  keys(o: Obj, path: string, used: readonly string[], unsupported: Readonly<Record<string, string>> = {}): void {
    for (const k of Object.keys(o)) {
      if (used.includes(k)) continue;
      const why = unsupported[k];
      if (why !== undefined) this.note(join(path, k), `not imported: ${why}`);
      else
        this.error(
          join(path, k),
          `unknown field (expected one of: ${[...used, ...Object.keys(unsupported)].join(', ')})`,
        );
    }
  }
}

export function readDocuments(sources: readonly SourceText[], findings: Findings): PolicyDocument[] {
  const out: PolicyDocument[] = [];
  for (const s of sources) {
    let docs: unknown[];
    try {
      docs = loadAll(s.text);
    } catch (err) {
      const e = err as YAMLException;
      // The document the error is in: the separators before its line.
      const line = e.mark?.line ?? 0;
      const index = s.text
        .split('\n')
        .slice(0, line)
        .filter((l) => /^---(\s|$)/.test(l)).length;
      const at = e.mark ? ` at line ${line + 1}, column ${e.mark.column + 1}` : '';
      const why = err instanceof YAMLException ? `YAML syntax error${at}: ${e.reason}` : `YAML error: ${e.message}`;
      findings.error(`${s.name}[${index}]`, why);
      continue;
    }
    docs.forEach((value, i) => {
      // A trailing `---` leaves an empty document: nothing to import.
      if (value !== null && value !== undefined) out.push({ at: `${s.name}[${i}]`, value });
    });
  }
  return out;
}

export function isObject(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function join(path: string, key: string | number): string {
  return typeof key === 'number' ? `${path}[${key}]` : path ? `${path}.${key}` : key;
}

export function describe(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
  if (typeof v === 'object') return 'an object';
  return `${typeof v} ${String(v)}`;
}

/** Typed reads that report a wrong type at its path and return undefined. */
export function obj(f: Findings, v: unknown, path: string): Obj | undefined {
  return isObject(v) ? v : f.error(path, `must be an object, got ${describe(v)}`);
}

export function list(f: Findings, v: unknown, path: string): unknown[] | undefined {
  return Array.isArray(v) ? v : f.error(path, `must be a list, got ${describe(v)}`);
}

export function str(f: Findings, v: unknown, path: string): string | undefined {
  return typeof v === 'string' ? v : f.error(path, `must be a string, got ${describe(v)}`);
}

export function strings(f: Findings, v: unknown, path: string): string[] | undefined {
  const l = list(f, v, path);
  if (!l) return undefined;
  const out: string[] = [];
  l.forEach((x, i) => {
    const s = str(f, x, join(path, i));
    if (s !== undefined) out.push(s);
  });
  return out;
}

export function labelsOf(f: Findings, v: unknown, path: string): Record<string, string> {
  if (v === undefined) return {};
  const o = obj(f, v, path);
  if (!o) return {};
  const entries: [string, string][] = [];
  for (const [k, x] of Object.entries(o)) {
    const s = str(f, x, join(path, k));
    if (s !== undefined) entries.push([k, s]);
  }
  return Object.fromEntries(entries);
}

/** The Kubernetes-style `metadata.name` (or Kuma universal `name`). */
export function nameOf(doc: Obj): string | undefined {
  const md = doc['metadata'];
  if (isObject(md) && typeof md['name'] === 'string') return md['name'];
  return typeof doc['name'] === 'string' ? doc['name'] : undefined;
}

/** Metadata the API server sets: it says nothing about load balancing. */
const SERVER_SET_METADATA = [
  'uid',
  'resourceVersion',
  'generation',
  'creationTimestamp',
  'deletionTimestamp',
  'deletionGracePeriodSeconds',
  'managedFields',
  'ownerReferences',
  'finalizers',
  'generateName',
  'selfLink',
];

/**
 * A Kubernetes-style document's `metadata`: name, namespace and labels
 * identify it; every annotation is either one `read` names (returned) or a
 * note, so an annotation that changes behaviour in its system is never
 * dropped silently.
 */
export function readMetadata(f: Findings, doc: Obj, at: string, read: readonly string[] = []): Record<string, string> {
  if (doc['metadata'] === undefined) return {};
  const path = join(at, 'metadata');
  const md = obj(f, doc['metadata'], path);
  if (!md) return {};
  f.keys(md, path, ['name', 'namespace', 'labels', 'annotations', ...SERVER_SET_METADATA]);
  const annotations = labelsOf(f, md['annotations'], join(path, 'annotations'));
  const out: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const [k, v] of Object.entries(annotations)) {
    if (read.includes(k)) out[k] = v;
    else f.note(`${join(path, 'annotations')}["${k}"]`, 'annotation not imported: Canopy does not read it');
  }
  return out;
}
