/**
 * `canopy schema [-O FILE]`: the mesh config's JSON Schema, to keep next to a config wherever it lives
 * (editors resolve `# yaml-language-server: $schema=mesh.schema.json` relative to the config file).
 */
import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { packagePath } from '../platform/paths.js';
import { writeOutput } from './common.js';

export function registerSchema(program: Command): void {
  program
    .command('schema')
    .description("print the mesh config's JSON Schema (for editors: canopy schema -O mesh.schema.json)")
    .option('-O, --out <file>', 'write to this file (default: standard output)')
    .action(async (opts: { out?: string }) => {
      const text = await readFile(packagePath('server', 'schema', 'mesh.schema.json'), 'utf8');
      if (opts.out === undefined) return void process.stdout.write(text);
      await writeOutput(opts.out, text, '-O');
      process.stderr.write(`wrote ${opts.out}\n`);
    });
}
