/**
 * One-shot `canopy` commands (`canopy import …`, `canopy explain …`) run as a
 * user runs them: the real CLI in a child process, its output captured.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../../server/src/cli/canopy.js', import.meta.url));

export interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** `env` adds to (or, with undefined, removes from) this process's environment for the command. */
export function runCanopyCli(
  args: readonly string[],
  timeoutMs = 20_000,
  env: Readonly<Record<string, string | undefined>> = {},
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const options = { timeout: timeoutMs, env: { ...process.env, ...env } };
    execFile(process.execPath, [CLI, ...args], options, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : null) : 0;
      if (code === null) reject(err ?? new Error('canopy did not exit'));
      else resolve({ code, stdout, stderr });
    });
  });
}
