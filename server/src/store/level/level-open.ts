/**
 * Opening the embedded store's LevelDB database, and its errors as sentences
 * an operator can act on (level-journal.ts): which directory, what is wrong
 * with it, and a full disk as its own error code.
 */
import { mkdirSync } from 'node:fs';
import { ClassicLevel } from 'classic-level';
import { CanopyError, CodedError } from '../../domain/errors.js';

/** Opens (creating) the database in `dir`, or fails naming the directory and what is wrong with it. */
export async function openDatabase(dir: string): Promise<ClassicLevel<string, string>> {
  try {
    mkdirSync(dir, { recursive: true });
  } catch (err) {
    throw new CodedError('CANOPY_STORE_UNAVAILABLE', `cannot use the data directory ${dir}: ${describeFsError(err)}`);
  }
  // JSON is encoded here rather than by valueEncoding 'json', which was ~3× slower for large batches.
  const db = new ClassicLevel<string, string>(dir, { valueEncoding: 'utf8' });
  try {
    await db.open();
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    if ((err as { code?: string }).code === 'LEVEL_LOCKED' || cause?.code === 'LEVEL_LOCKED') {
      throw new CodedError('CANOPY_STORE_UNAVAILABLE', `the data directory ${dir} is in use by another canopy process`);
    }
    throw new CodedError(
      'CANOPY_STORE_UNAVAILABLE',
      `cannot open the store in the data directory ${dir}: ${describeFsError(cause ?? err)}`,
    );
  }
  return db;
}

/** A file-system or LevelDB error as a sentence with a hint at the fix. */
function describeFsError(err: unknown): string {
  const e = err as { code?: string; message?: string };
  const message = e.message ?? String(err);
  const text = `${e.code ?? ''} ${message}`;
  const hint = /ENOTDIR|EEXIST|Not a directory|File exists/i.test(text)
    ? 'a path in it is a file, not a directory'
    : /EACCES|EPERM|Permission denied/i.test(text)
      ? 'the user canopy runs as may not write there'
      : /EROFS|Read-only file system/i.test(text)
        ? 'it is on a read-only file system'
        : /ENOSPC|No space left/i.test(text)
          ? 'its disk is full'
          : /Corruption/i.test(text)
            ? 'the database files are damaged'
            : undefined;
  return hint ? `${message} (${hint})` : message;
}

/** A failed write as the error a client is answered with: a full disk has its own code (507). */
export function storeError(dir: string, err: unknown): Error {
  const e = err as { message?: string; cause?: { message?: string } };
  if (/No space left|ENOSPC|EDQUOT|quota/i.test(`${e.message ?? ''} ${e.cause?.message ?? ''}`)) {
    return new CanopyError(
      'CANOPY_STORE_FULL',
      `the store's disk is full (data directory ${dir}); the write was not stored. ` +
        'Writes resume, without a restart, once there is space again',
    );
  }
  return err instanceof Error ? err : new CodedError('CANOPY_STORE_UNAVAILABLE', String(err));
}
