/** `canopy validate FILE…`: checks mesh configs offline with the server's own validator. */
import type { Command } from 'commander';

export function registerValidate(program: Command): void {
  program
    .command('validate')
    .description("check mesh config files with the server's validator (every error with its field path)")
    .argument('<file...>', 'mesh.yaml or .json files')
    .action(async (files: string[]) => {
      const { loadConfigFile } = await import('../config/config-file.js');
      let failed = 0;
      for (const file of files) {
        const loaded = await loadConfigFile(file);
        if (!loaded.ok) {
          failed++;
          process.stderr.write(`${file}: ${loaded.errors.length} error(s)\n`);
          for (const e of loaded.errors) process.stderr.write(`  ${e.path || '(root)'}: ${e.message}\n`);
          continue;
        }
        const services = loaded.value.services;
        const endpoints = services.reduce((n, s) => n + s.endpoints.length, 0);
        process.stdout.write(`${file}: valid (${services.length} service(s), ${endpoints} endpoint(s))\n`);
        for (const n of loaded.value.notes ?? []) process.stdout.write(`  note: ${n.path}: ${n.message}\n`);
      }
      if (failed > 0) process.exitCode = 1;
    });
}
