/**
 * `canopy import istio|kuma|k8s FILE…`: prints the Canopy config the
 * documents mean, with what was not imported (or differs from the source
 * system) as comments on top; errors with their paths go to stderr.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { dump } from 'js-yaml';
import { importDocuments, POLICY_SYSTEMS, type PolicySystem } from '../policy/import.js';

export const IMPORT_USAGE = `  canopy import istio|kuma|k8s FILE…   print the Canopy config for Istio, Kuma or Kubernetes documents`;

export async function runImport(
  args: readonly string[],
  out: NodeJS.WritableStream,
  err: NodeJS.WritableStream,
): Promise<number> {
  const [system, ...files] = args;
  if (!POLICY_SYSTEMS.includes(system as PolicySystem) || files.length === 0) {
    err.write(
      `canopy import: give the system (${POLICY_SYSTEMS.join(', ')}) and at least one file\nusage:\n${IMPORT_USAGE}\n`,
    );
    return 2;
  }
  const sources = [];
  for (const file of files) {
    try {
      sources.push({ name: path.basename(file), text: await readFile(file, 'utf8') });
    } catch (e) {
      err.write(`canopy import: cannot read ${file}: ${(e as Error).message}\n`);
      return 1;
    }
  }
  const imported = importDocuments(sources, system as PolicySystem);
  if (!imported.result.ok) {
    err.write(`canopy import ${system}: ${imported.result.errors.length} error(s):\n`);
    for (const e of imported.result.errors) err.write(`  ${e.path || '(root)'}: ${e.message}\n`);
    return 1;
  }
  const notes = imported.notes.map((n) => `# note: ${n.path}: ${n.message}\n`).join('');
  out.write(`# Canopy config imported from ${system}: ${files.map((f) => path.basename(f)).join(', ')}\n${notes}`);
  out.write(dump({ services: imported.services }, { lineWidth: 120, noRefs: true }));
  return 0;
}
