/**
 * What the embedded store keeps beside LevelDB to notice lost writes.
 *
 * LevelDB recovers a truncated log silently (a cut record at the end reads
 * as a crash mid-write) and, without paranoid checks (which classic-level
 * does not expose), skips a damaged record with a line in its LOG file. A
 * store that starts with part of what it acknowledged must say so, so:
 *
 * - after every durable commit the revision and the service count are
 *   written to `CANOPY-CHECK` in the data directory (one small write in
 *   place, no sync of its own: it trails the data, so after a power cut it
 *   may be behind, never ahead);
 * - at open, a database behind that record, or a LevelDB LOG reporting
 *   dropped bytes or corruption, is a loss: the start is refused naming the
 *   directory and what is missing, unless the operator accepts the
 *   recovered state (`canopy serve --accept-store-loss`), which is logged.
 */
import { closeSync, existsSync, openSync, readFileSync, writeFileSync, writeSync } from 'node:fs';
import path from 'node:path';

export interface CheckRecord {
  readonly revision: number;
  readonly services: number;
}

/** Fixed size, so each record overwrites the last in one write. */
const RECORD_BYTES = 96;
export const CHECK_FILE = 'CANOPY-CHECK';

export class CheckFile {
  private constructor(
    private readonly fd: number,
    /** What the last run recorded; undefined for a new directory or one from before the check file. */
    readonly expected: CheckRecord | undefined,
  ) {}

  static open(dir: string): CheckFile {
    const file = path.join(dir, CHECK_FILE);
    let expected: CheckRecord | undefined;
    if (existsSync(file)) {
      try {
        const parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<CheckRecord>;
        if (typeof parsed.revision === 'number' && typeof parsed.services === 'number') {
          expected = { revision: parsed.revision, services: parsed.services };
        }
      } catch {
        // A torn record (a crash while writing it): nothing to compare against, the next commit writes it again.
      }
    }
    if (!existsSync(file)) writeFileSync(file, '');
    // Not 'a': in append mode Linux ignores the position, and each record must overwrite the last.
    return new CheckFile(openSync(file, 'r+'), expected);
  }

  /** Best effort: a failure only weakens the next start's check. */
  record(r: CheckRecord): void {
    const text = JSON.stringify({ revision: r.revision, services: r.services });
    try {
      writeSync(this.fd, text.padEnd(RECORD_BYTES, ' ') + '\n', 0);
    } catch {
      // ignored, see above
    }
  }

  close(): void {
    closeSync(this.fd);
  }
}

/**
 * Why the opened database is not everything that was acknowledged, or
 * undefined when nothing says it lost anything.
 */
export function lossReport(dir: string, expected: CheckRecord | undefined, found: CheckRecord): string | undefined {
  const problems: string[] = [];
  if (expected && expected.revision > found.revision) {
    problems.push(
      `it holds revision ${found.revision} with ${found.services} services, but revision ${expected.revision} ` +
        `with ${expected.services} services was acknowledged (${expected.revision - found.revision} writes missing)`,
    );
  } else if (expected && expected.revision === found.revision && expected.services !== found.services) {
    problems.push(`it holds ${found.services} services where ${expected.services} were acknowledged`);
  }
  const dropped = droppedByLevelDb(dir);
  if (dropped.length > 0) problems.push(`LevelDB skipped damaged data while opening it: ${dropped.join('; ')}`);
  if (problems.length === 0) return undefined;
  return `the store in the data directory ${dir} lost acknowledged writes (its log was truncated or damaged): ${problems.join('; ')}`;
}

/** LevelDB's own report (its LOG file, rewritten at each open) of records it skipped while recovering. */
function droppedByLevelDb(dir: string): string[] {
  try {
    return readFileSync(path.join(dir, 'LOG'), 'utf8')
      .split('\n')
      .filter((l) => /dropping \d+ bytes|Corruption/i.test(l))
      .map((l) => l.replace(/^\S+ \S+ \S+\s*/, '').trim())
      .slice(0, 5);
  } catch {
    return [];
  }
}
