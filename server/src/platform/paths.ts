/**
 * Files shipped beside the code (proto/, bpf/build/) are found relative to the
 * package root, whether the code runs from dist/ or is imported by a tool.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CodedError } from '../domain/errors.js';

let root: string | undefined;

/** The directory holding Canopy's package.json. */
export function packageRoot(): string {
  if (root) return root;
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(path.join(dir, 'package.json')) && existsSync(path.join(dir, 'proto'))) return (root = dir);
    const up = path.dirname(dir);
    if (up === dir)
      throw new CodedError(
        'CANOPY_INSTALL_INCOMPLETE',
        'canopy: cannot find the package root (package.json beside proto/)',
      );
    dir = up;
  }
}

export function packagePath(...parts: string[]): string {
  return path.join(packageRoot(), ...parts);
}
