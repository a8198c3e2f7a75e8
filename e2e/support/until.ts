/**
 * Waits for a condition, not a moment: calls `f` every 100 ms until it gives
 * a value (a throw counts as not yet), and fails after `ms` naming what it
 * waited for and the last error.
 */
export const until = async <T>(what: string, f: () => Promise<T | undefined>, ms = 30_000): Promise<T> => {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await f();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
};
