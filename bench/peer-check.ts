/**
 * The peer benchmark's check that both sides served the same thing: the assignments each side's CLAs
 * decode to (the Go driver's check files), compared locality by locality. A mismatch fails the run.
 */
import { readFileSync } from 'node:fs';

/** Both servers' CLAs decode to different assignments: the comparison is void, and the run fails. */
export class AssignmentMismatch extends Error {
  readonly code = 'PEER_ASSIGNMENT_MISMATCH';
}

/** The assignments both sides' CLAs decode to, locality by locality: equal, or the run fails. */
export function compareAssignments(canopyFile: string, goFile: string, pass: number | string): number {
  type A = Record<string, { digest: string; endpoints: number; priorities: string[] }>;
  const c = JSON.parse(readFileSync(canopyFile, 'utf8')) as A;
  const g = JSON.parse(readFileSync(goFile, 'utf8')) as A;
  const keys = Object.keys(c);
  if (keys.length === 0 || keys.length !== Object.keys(g).length) {
    throw new AssignmentMismatch(`pass ${pass}: assignments for ${keys.length} vs ${Object.keys(g).length} localities`);
  }
  for (const k of keys) {
    const a = c[k]!;
    const b = g[k];
    if (!b || a.digest !== b.digest || a.endpoints === 0) {
      throw new AssignmentMismatch(
        `pass ${pass}: locality ${k}: Canopy's CLA decodes to ${a.endpoints} endpoints (priorities ${a.priorities.join(', ')}), go-control-plane's to ${b?.endpoints} (${b?.priorities.join(', ')}): not the same assignment`,
      );
    }
  }
  return keys.length;
}
