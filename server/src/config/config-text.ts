/**
 * Config text → plain data, by format: JSON.parse for `.json` files (the
 * fastest parser there is), js-yaml for everything else. js-yaml replaced the
 * `yaml` package here because building `yaml`'s document model took 20–27 s
 * for a 100,000-endpoint file where js-yaml takes about 1 s; nothing here
 * needs that model (comments, round-tripping). Syntax errors name their line.
 * Big YAML files have their long lists parsed in slices (yaml-slices.ts).
 */
import { createHash } from 'node:crypto';
import { loadAll, YAMLException } from 'js-yaml';
import type { FieldError, ValidationResult } from '../domain/errors.js';
import { loadYamlSliced } from './yaml-slices.js';

export type ConfigFormat = 'yaml' | 'json';

/** `.json` files are JSON; anything else (`.yaml`, `.yml`, no extension) is YAML, a superset of JSON. */
export function configFormatOf(file: string): ConfigFormat {
  return file.toLowerCase().endsWith('.json') ? 'json' : 'yaml';
}

/**
 * What a config file's content is compared and recorded by: a digest of its bytes. Comparing digests means no
 * copy of a big file's text is kept, and a start that finds the file unchanged need not even decode it.
 */
export function contentDigest(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('base64url');
}

/** Parses config text; an empty YAML document reads as null (the validator then names what is missing). */
export function parseConfigData(text: string, format: ConfigFormat): ValidationResult<unknown> {
  return format === 'json' ? parseJson(text) : parseYaml(text);
}

function parseYaml(text: string): ValidationResult<unknown> {
  // A big file's long lists in slices (a fraction of the parser's memory); anything unusual, or an error, as one.
  const sliced = loadYamlSliced(text);
  if (sliced) return { ok: true, value: sliced.value ?? null };
  let docs: unknown[];
  try {
    docs = loadAll(text);
  } catch (err) {
    return { ok: false, errors: [yamlError(err)] };
  }
  if (docs.length > 1) {
    return { ok: false, errors: [{ path: '', message: `YAML error: expected one document, found ${docs.length}` }] };
  }
  return { ok: true, value: docs[0] ?? null };
}

function yamlError(err: unknown): FieldError {
  if (err instanceof YAMLException) {
    const at = err.mark ? ` at line ${err.mark.line + 1}, column ${err.mark.column + 1}` : '';
    return { path: '', message: `YAML syntax error${at}: ${err.reason}` };
  }
  return { path: '', message: `YAML error: ${(err as Error).message}` };
}

function parseJson(text: string): ValidationResult<unknown> {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (err) {
    const message = (err as Error).message;
    // V8 names the offset ("... in JSON at position 42"); a line and column are what an editor needs.
    const pos = /at position (\d+)/.exec(message)?.[1];
    const at = pos === undefined ? '' : ` at ${lineColumn(text, Number(pos))}`;
    const what = message.replace(/ in JSON at position \d+.*$/s, '');
    return { ok: false, errors: [{ path: '', message: `JSON syntax error${at}: ${what}` }] };
  }
}

function lineColumn(text: string, offset: number): string {
  let line = 1;
  let start = 0;
  for (let i = text.indexOf('\n'); i !== -1 && i < offset; i = text.indexOf('\n', i + 1)) {
    line++;
    start = i + 1;
  }
  return `line ${line}, column ${offset - start + 1}`;
}
