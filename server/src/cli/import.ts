/**
 * `canopy import istio|kuma|k8s FILE…`: prints the Canopy config the documents mean, with what was not
 * imported (or differs from the source system) as comments on top; errors with their paths go to stderr.
 */
import { Argument, Option, type Command } from 'commander';
import { CliError } from './common.js';

const SYSTEMS = ['istio', 'kuma', 'k8s'] as const;

export function registerImport(program: Command): void {
  program
    .command('import')
    .description('print the Canopy config for Istio, Kuma or Kubernetes documents')
    .addArgument(new Argument('<system>', 'the system the documents are for').choices(SYSTEMS))
    .argument('<file...>', 'YAML files (multi-document files are read whole); - reads standard input')
    .addOption(
      new Option('-o, --output <format>', 'yaml: a mesh.yaml with notes as comments; json: the services')
        .choices(['yaml', 'json'])
        .default('yaml'),
    )
    .action(async (system: (typeof SYSTEMS)[number], files: string[], opts: { output: 'yaml' | 'json' }) => {
      const [{ readFile }, path, { dump }, { importDocuments }, { readStdin }] = await Promise.all([
        import('node:fs/promises'),
        import('node:path'),
        import('js-yaml'),
        import('../policy/import.js'),
        import('./common.js'),
      ]);
      const sources = [];
      for (const file of files) {
        try {
          const text = file === '-' ? await readStdin() : await readFile(file, 'utf8');
          sources.push({ name: file === '-' ? 'stdin' : path.basename(file), text });
        } catch (e) {
          throw new CliError(`import: cannot read ${file}: ${(e as Error).message}`);
        }
      }
      const imported = importDocuments(sources, system);
      if (!imported.result.ok) {
        const lines = imported.result.errors.map((e) => `  ${e.path || '(root)'}: ${e.message}`).join('\n');
        throw new CliError(`import ${system}: ${imported.result.errors.length} error(s):\n${lines}`);
      }
      if (opts.output === 'json') {
        const out = { services: imported.services, notes: imported.notes };
        process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
        return;
      }
      const notes = imported.notes.map((n) => `# note: ${n.path}: ${n.message}\n`).join('');
      const names = sources.map((s) => s.name).join(', ');
      process.stdout.write(`# Canopy config imported from ${system}: ${names}\n${notes}`);
      process.stdout.write(dump({ services: imported.services }, { lineWidth: 120, noRefs: true }));
    });
}
