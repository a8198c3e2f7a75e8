/**
 * Encoded responses shared by every stream that needs the same bytes, on the
 * initial path as well as on pushes: a response is materialized once and the
 * same Buffer handed to each stream's transport. Entries are held weakly, so
 * the cache holds a response only while some stream's write still holds it
 * (or until the collector runs): memory follows what is in flight, not the
 * number of distinct CLAs ever sent.
 */
import type { SharedResponses } from './session.js';

export class WeakResponses implements SharedResponses {
  private readonly byKey = new Map<string, WeakRef<Buffer>>();
  private readonly gone = new FinalizationRegistry<string>((key) => {
    // Only if the entry was not replaced by a newer Buffer under the same key.
    if (this.byKey.get(key)?.deref() === undefined) this.byKey.delete(key);
  });

  get(key: string): Buffer | undefined {
    return this.byKey.get(key)?.deref();
  }

  set(key: string, bytes: Buffer): void {
    this.byKey.set(key, new WeakRef(bytes));
    this.gone.register(bytes, key);
  }

  /** Keys whose Buffer may still be alive (tests, debug). */
  get size(): number {
    return this.byKey.size;
  }
}
