/**
 * Big YAML files read in slices, to bound the parser's memory.
 *
 * js-yaml parses a document into a flat array of events (one object per
 * scalar, mapping and end) before it builds any value: for a 100,000-endpoint
 * file that is about 1.5 million objects, 200+ MB alive at once, several times
 * what the values themselves take. A config's bulk is its long block
 * sequences (`endpoints:` lists), whose entries are independent of each
 * other; so each long run of entries is cut out of the text and parsed on its
 * own in slices of a few thousand entries, and the rest of the document (its
 * skeleton, with one placeholder entry where each run was) is parsed as
 * usual; the slices' values are then put back in place of the placeholders.
 *
 * Cutting is done only where it is certain to be right: a run's entries
 * start at one indentation, every line of the run is deeper, blank or a
 * comment, and no line of it leaves a quote or a bracket open (so no entry
 * can continue a multi-line scalar or flow collection into the next). Any
 * doubt, and any error in a slice or the skeleton, gives `undefined`: the
 * caller then parses the whole text as one, which also gives the error with
 * its line (the same values either way: js-yaml reads each entry alone just
 * as it reads it in place).
 */
import { loadAll } from 'js-yaml';

/** A run is cut out when it has this many entries and lines: slicing pays off only for long ones. */
const MIN_ENTRIES = 256;
const MIN_LINES = 4096;
/** Lines per slice (whole entries): the parser's events for this many lines are a few MB. */
const SLICE_LINES = 16384;

interface Run {
  /** First and last line (exclusive) of the run. */
  readonly from: number;
  readonly to: number;
  readonly indent: number;
  /** Line index of each entry's `- `. */
  readonly entries: number[];
}

/** The document's value, or undefined when the text is not cut (see above). */
export function loadYamlSliced(text: string): { value: unknown } | undefined {
  if (text.length < 1 << 20) return undefined; // small files: one parse is cheapest
  const lines = text.split('\n');
  const runs = findRuns(lines);
  if (runs.length === 0) return undefined;
  let marker = 'canopy-slice-';
  while (text.includes(marker)) marker += 'x';
  const skeleton: string[] = [];
  let at = 0;
  for (const [i, run] of runs.entries()) {
    for (; at < run.from; at++) skeleton.push(lines[at]!);
    skeleton.push(`${' '.repeat(run.indent)}- ${marker}${i}`);
    at = run.to;
  }
  for (; at < lines.length; at++) skeleton.push(lines[at]!);
  try {
    const docs = loadAll(skeleton.join('\n'));
    if (docs.length !== 1) return undefined;
    const values = runs.map((run) => loadRun(lines, run));
    if (values.some((v) => v === undefined)) return undefined;
    let placed = 0;
    const value = place(docs[0], (s) => {
      const i = s.startsWith(marker) ? Number(s.slice(marker.length)) : NaN;
      const v = values[i];
      if (v === undefined) return undefined;
      placed++;
      return v;
    });
    return placed === runs.length ? { value } : undefined;
  } catch {
    return undefined;
  }
}

/** A run's entries, slice by slice; undefined if a slice is not a plain sequence. */
function loadRun(lines: readonly string[], run: Run): unknown[] | undefined {
  const out: unknown[] = [];
  for (let k = 0; k < run.entries.length;) {
    const start = run.entries[k]!;
    let next = k + 1;
    while (next < run.entries.length && run.entries[next]! - start < SLICE_LINES) next++;
    const end = run.entries[next] ?? run.to;
    const docs = loadAll(lines.slice(start, end).join('\n'));
    const seq = docs[0];
    if (docs.length !== 1 || !Array.isArray(seq) || seq.length !== next - k) return undefined;
    for (const v of seq) out.push(v);
    k = next;
  }
  return out;
}

/** Replaces each one-element array holding a marker string by the run's values. */
function place(v: unknown, runOf: (marker: string) => unknown[] | undefined): unknown {
  if (Array.isArray(v)) {
    const only: unknown = v.length === 1 ? v[0] : undefined;
    if (typeof only === 'string') {
      const run = runOf(only);
      if (run) return run;
    }
    for (let i = 0; i < v.length; i++) v[i] = place(v[i], runOf);
    return v;
  }
  if (v !== null && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    for (const k of Object.keys(o)) o[k] = place(o[k], runOf);
  }
  return v;
}

const ENTRY = /^( *)- /;
const KEY_LINE = /^ *[^\s#-][^#]*:\s*(#.*)?$/;

/** Long runs of block-sequence entries that can be cut safely (see the file comment). */
function findRuns(lines: readonly string[]): Run[] {
  const runs: Run[] = [];
  let i = 0;
  while (i < lines.length) {
    const m = ENTRY.exec(lines[i]!);
    // A run opens right after a `key:` line (nothing else on it): the sequence is that key's value.
    if (!m || i === 0 || !KEY_LINE.test(lines[i - 1]!)) {
      i++;
      continue;
    }
    const indent = m[1]!.length;
    const entries: number[] = [];
    let j = i;
    let closed = true;
    for (; j < lines.length; j++) {
      const line = lines[j]!;
      const lead = line.length - line.trimStart().length;
      const blank = line.trim() === '' || line.trimStart().startsWith('#');
      if (!blank && lead < indent) break;
      if (!blank && lead === indent) {
        if (!line.startsWith('- ', indent)) break;
        entries.push(j);
      }
      if (line.includes('\t') || !selfContained(line)) closed = false;
    }
    // Trailing blank and comment lines belong after the run.
    while (j > i && isBlankOrComment(lines[j - 1]!)) j--;
    if (closed && entries.length >= MIN_ENTRIES && j - i >= MIN_LINES) {
      runs.push({ from: i, to: j, indent, entries });
      i = j; // runs inside this one are read with it
    } else i++; // a short run (or one with doubt) may hold long ones: look inside
  }
  return runs;
}

function isBlankOrComment(line: string): boolean {
  const t = line.trim();
  return t === '' || t.startsWith('#');
}

/** No quote or bracket left open by this line (conservative: an apostrophe in a plain word also says no). */
function selfContained(line: string): boolean {
  let double = 0;
  let single = 0;
  let depth = 0;
  for (let k = 0; k < line.length; k++) {
    const c = line.charCodeAt(k);
    if (c === 0x22 && line.charCodeAt(k - 1) !== 0x5c) double++;
    else if (c === 0x27) single++;
    else if (c === 0x7b || c === 0x5b) depth++;
    else if (c === 0x7d || c === 0x5d) depth--;
    else if (c === 0x7c || c === 0x3e) {
      // `|` or `>` at the end of a line opens a block scalar, whose text may be anything.
      if (/^[|>][-+0-9]*\s*(#.*)?$/.test(line.slice(k))) return false;
    }
  }
  return double % 2 === 0 && single % 2 === 0 && depth === 0;
}
