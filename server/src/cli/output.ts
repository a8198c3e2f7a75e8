/**
 * `-o` for the read commands, as kubectl takes it: table (the default), wide, name, json, yaml and
 * jsonpath=EXPR (kubectl's `{.services[*].name}` template, or a bare JSONPath), and `-o=json` as well as
 * `-o json` and `--output=json`; `--no-headers` drops a table's header line.
 */
import { InvalidArgumentError, Option } from 'commander';
import { dump } from 'js-yaml';
import { JSONPath } from 'jsonpath-plus';
import { CliError, EXIT_USAGE, table } from './common.js';

export type OutputFormat = 'table' | 'wide' | 'name' | 'json' | 'yaml' | `jsonpath=${string}`;

const LIST_FORMATS = ['table', 'wide', 'name', 'json', 'yaml'] as const;
const DOCUMENT_FORMATS = ['table', 'json', 'yaml'] as const;

/** `list`: commands that list objects (get); `document`: commands that print one answer (explain, proxy-status). */
export function outputOption(kind: 'list' | 'document' = 'document'): Option {
  const formats: readonly string[] = kind === 'list' ? LIST_FORMATS : DOCUMENT_FORMATS;
  const help = [...formats, 'jsonpath=EXPR'].join('|');
  // The choices are for help and completion; the parser also takes jsonpath=EXPR and `-o=json`.
  return new Option('-o, --output <format>', `output format: ${help}`)
    .choices(formats)
    .argParser((raw: string) => parseOutput(raw, formats))
    .default('table');
}

function parseOutput(raw: string, formats: readonly string[]): OutputFormat {
  // `-o=json`: commander hands a short flag's attached value over with its "=".
  const value = raw.startsWith('=') ? raw.slice(1) : raw;
  if (formats.includes(value)) return value as OutputFormat;
  const m = /^jsonpath=(.+)$/s.exec(value);
  if (m) {
    try {
      jsonpathText(m[1]!, {}); // a template that does not parse is a usage error now, not after the request
    } catch (err) {
      throw new InvalidArgumentError((err as Error).message);
    }
    return value as OutputFormat;
  }
  throw new InvalidArgumentError(`must be one of ${[...formats, 'jsonpath=EXPR'].join(', ')}.`);
}

/** What `-o` prints for a list: rows for table and wide (wide adds columns), names for `-o name`. */
export interface ListView {
  readonly headers: readonly string[];
  readonly rows: readonly (readonly string[])[];
  readonly wideHeaders?: readonly string[];
  readonly wideRows?: readonly (readonly string[])[];
  readonly names: readonly string[];
}

export interface PrintOptions {
  readonly output: OutputFormat;
  /** false with --no-headers. */
  readonly headers?: boolean;
}

export function printList(opts: PrintOptions, data: unknown, view: () => ListView): void {
  print(opts.output, data, () => {
    const v = view();
    if (opts.output === 'name') return v.names.map((n) => `${n}\n`).join('');
    const wide = opts.output === 'wide';
    const headers = wide ? [...v.headers, ...(v.wideHeaders ?? [])] : v.headers;
    const rows = wide ? v.rows.map((r, i) => [...r, ...(v.wideRows?.[i] ?? [])]) : v.rows;
    return table(headers, rows, opts.headers !== false);
  });
}

/** JSON, YAML and JSONPath print the data; table (wide, name) prints what the caller made from it. */
export function print(format: OutputFormat, data: unknown, asTable: () => string): void {
  if (format === 'json') process.stdout.write(`${JSON.stringify(data, null, 2)}\n`);
  else if (format === 'yaml') process.stdout.write(dump(data, { noRefs: true, lineWidth: 120 }));
  else if (format.startsWith('jsonpath=')) {
    const text = jsonpathText(format.slice('jsonpath='.length), data);
    process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
  } else process.stdout.write(asTable());
}

/**
 * kubectl's JSONPath template: text with `{EXPR}` parts, each replaced by what EXPR selects (several
 * values joined by spaces; `{"\n"}` a literal); without braces the whole text is one expression.
 * EXPR is read by jsonpath-plus, `.a.b` meaning `$.a.b`.
 */
export function jsonpathText(template: string, data: unknown): string {
  if (!template.includes('{')) return select(template, data);
  return template.replace(/\{([^{}]*)\}/g, (_, expr: string) => {
    const literal = /^\s*("(?:[^"\\]|\\.)*")\s*$/.exec(expr);
    return literal ? (JSON.parse(literal[1]!) as string) : select(expr, data);
  });
}

function select(expr: string, data: unknown): string {
  const trimmed = expr.trim();
  const path = trimmed.startsWith('$') ? trimmed : `$${/^[.[]/.test(trimmed) ? '' : '.'}${trimmed}`;
  let found: unknown[];
  try {
    found = JSONPath({ path, json: data as object, wrap: true, eval: 'safe' }) as unknown[];
  } catch (err) {
    throw new CliError(`-o jsonpath: ${expr}: ${(err as Error).message}`, EXIT_USAGE);
  }
  return found.map((v) => (typeof v === 'string' ? v : JSON.stringify(v))).join(' ');
}
