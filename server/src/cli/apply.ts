/**
 * `canopy apply -f FILE [--dry-run]`: makes a running server hold the file's services (PUT each one
 * that differs; the server validates and answers with every bad field's path) and prints the diff.
 * Services the file does not list are left alone. With --dry-run the server validates each changed service
 * (`PUT ...?dryRun=true`) and writes nothing; the diff is printed.
 */
import { Option, type Command } from 'commander';
import { serviceSpecToJson } from '../domain/spec.js';
import { adminJson, adminOptions, CliError, serverError, type AdminTarget } from './common.js';

type Obj = Record<string, unknown>;

export function registerApply(program: Command): void {
  const cmd = program
    .command('apply')
    .description("make a running server hold a file's services, printing what changes")
    .addOption(new Option('-f, --file <file>', 'a mesh config (YAML or .json)').makeOptionMandatory())
    .addOption(new Option('--dry-run', 'print the diff; change nothing').default(false));
  for (const o of adminOptions()) cmd.addOption(o);
  cmd.action(async (opts: AdminTarget & { file: string; dryRun: boolean }) => {
    const { loadConfigFile } = await import('../config/config-file.js');
    const loaded = await loadConfigFile(opts.file);
    if (!loaded.ok) {
      const lines = loaded.errors.map((e) => `  ${e.path || '(root)'}: ${e.message}`).join('\n');
      throw new CliError(`invalid config ${opts.file}:\n${lines}`);
    }
    const { status, body } = await adminJson<{ services: Obj[] }>(opts, '/api/v1/services');
    if (status !== 200) throw new CliError(`GET /api/v1/services: ${status} ${serverError(body)}`);
    const current = new Map(body.services.map((s) => [s['name'] as string, s]));
    let failed = 0;
    for (const spec of loaded.value.services) {
      const wanted = serviceSpecToJson(spec);
      const diff = serviceDiff(current.get(spec.name), wanted);
      const verb = !current.has(spec.name) ? 'created' : diff.length > 0 ? 'configured' : 'unchanged';
      if (verb !== 'unchanged') {
        // With --dry-run the server validates (field paths, listener conflicts) and writes nothing.
        const query = opts.dryRun ? '?dryRun=true' : '';
        const put = await adminJson(opts, `/api/v1/services/${encodeURIComponent(spec.name)}${query}`, {
          method: 'PUT',
          body: JSON.stringify(wanted),
          headers: { 'content-type': 'application/json' },
        });
        if (put.status !== 200 && put.status !== 201) {
          failed++;
          process.stderr.write(`service/${spec.name} rejected (${put.status}): ${serverError(put.body)}\n`);
          continue;
        }
      }
      process.stdout.write(`service/${spec.name} ${verb}${opts.dryRun && verb !== 'unchanged' ? ' (dry run)' : ''}\n`);
      for (const line of diff) process.stdout.write(`  ${line}\n`);
    }
    if (failed > 0) process.exitCode = 1;
  });
}

/** Lines a reader can check: `+`/`-` endpoints by address:port, `~` changed fields with old → new. */
export function serviceDiff(before: Obj | undefined, after: Obj): string[] {
  const lines: string[] = [];
  const b = before ?? {};
  for (const key of new Set([...Object.keys(b), ...Object.keys(after)])) {
    if (key === 'endpoints' || key === 'name') continue;
    if (JSON.stringify(b[key]) !== JSON.stringify(after[key]))
      lines.push(`~ ${key}: ${JSON.stringify(b[key]) ?? '(none)'} → ${JSON.stringify(after[key]) ?? '(none)'}`);
  }
  const key = (e: Obj) =>
    `${String(e['address']).includes(':') ? `[${String(e['address'])}]` : String(e['address'])}:${String(e['port'])}`;
  const old = new Map(((b['endpoints'] as Obj[] | undefined) ?? []).map((e) => [key(e), e]));
  const neu = new Map(((after['endpoints'] as Obj[] | undefined) ?? []).map((e) => [key(e), e]));
  for (const [k, e] of neu) {
    const was = old.get(k);
    if (!was) lines.push(`+ ${k} ${JSON.stringify(e)}`);
    else
      for (const f of new Set([...Object.keys(was), ...Object.keys(e)]))
        if (JSON.stringify(was[f]) !== JSON.stringify(e[f]))
          lines.push(`~ ${k} ${f}: ${JSON.stringify(was[f]) ?? '(none)'} → ${JSON.stringify(e[f]) ?? '(none)'}`);
  }
  for (const k of old.keys()) if (!neu.has(k)) lines.push(`- ${k}`);
  return lines;
}
