/** `canopy validate FILE…`: checks mesh configs offline with the server's own validator. */
import { Option, type Command } from 'commander';
import { intIn } from './common.js';

const DEFAULT_MAX_ERRORS = 20;

export function registerValidate(program: Command): void {
  program
    .command('validate')
    .description("check mesh config files with the server's validator (every error with its field path)")
    .argument('<file...>', 'mesh.yaml or .json files')
    .addOption(
      new Option('--max-errors <n>', 'errors listed per file; the rest are counted (0 = list all)')
        .argParser(intIn(0, 1_000_000))
        .default(DEFAULT_MAX_ERRORS),
    )
    .action(async (files: string[], opts: { maxErrors: number }) => {
      const { loadConfigFile } = await import('../config/config-file.js');
      let failed = 0;
      for (const file of files) {
        const loaded = await loadConfigFile(file);
        if (!loaded.ok) {
          failed++;
          const { errors } = loaded;
          const shown = opts.maxErrors === 0 ? errors : errors.slice(0, opts.maxErrors);
          process.stderr.write(`${file}: ${errors.length} error(s)\n`);
          for (const e of shown) process.stderr.write(`  ${e.path || '(root)'}: ${e.message}\n`);
          if (shown.length < errors.length)
            process.stderr.write(`  … and ${errors.length - shown.length} more (--max-errors 0 lists them all)\n`);
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
