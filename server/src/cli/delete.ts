/**
 * `canopy delete service NAME...` (svc, services): removes services from a running server through its
 * admin API (DELETE /api/v1/services/NAME), one request each, printing `service/NAME deleted` as
 * kubectl does. A name the server does not hold is named and the command exits 1, after the others.
 */
import { Argument, type Command } from 'commander';
import { adminJson } from './admin-client.js';
import { adminOptions, serverError, type AdminTarget } from './common.js';
import { KINDS } from './get.js';

export function registerDelete(program: Command): void {
  const cmd = program
    .command('delete')
    .description('remove services from a running server: canopy delete service NAME...')
    .addArgument(new Argument('<what>', 'what to delete').choices(KINDS.services))
    .addArgument(new Argument('<name...>', 'the services'));
  for (const o of adminOptions()) cmd.addOption(o);
  cmd.action(async (_what: string, names: string[], opts: AdminTarget) => {
    for (const name of names) {
      const path = `/api/v1/services/${encodeURIComponent(name)}`;
      const { status, body } = await adminJson(opts, path, { method: 'DELETE' });
      if (status === 204 || status === 200) process.stdout.write(`service/${name} deleted\n`);
      else {
        process.stderr.write(`canopy: service/${name} not deleted: ${status} ${serverError(body)}\n`);
        process.exitCode = 1;
      }
    }
  });
}
