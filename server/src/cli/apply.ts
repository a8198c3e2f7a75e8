/**
 * `canopy apply -f FILE [--dry-run]`: makes a running server hold the file's services, all or nothing: the
 * set goes to the server in one request (POST /api/v1/apply), which validates it whole against what it holds
 * (every bad field's path, listener conflicts with the running services) and writes every changed service in
 * one store transaction, or nothing. Services the file does not list are left alone. With --dry-run the server
 * runs the same checks and says what it would do, writing nothing; the diff is printed either way.
 */
import { Option, type Command } from 'commander';
import { serviceSpecToJson } from '../domain/spec.js';
import { adminJson, RequestFailed } from './admin-client.js';
import { adminOptions, CliError, readStdin, serverError, type AdminTarget } from './common.js';

type Obj = Record<string, unknown>;

export function registerApply(program: Command): void {
  const cmd = program
    .command('apply')
    .description("make a running server hold a file's services, printing what changes")
    .addOption(
      new Option('-f, --file <file>', 'a mesh config (YAML or .json; - reads standard input)').makeOptionMandatory(),
    )
    .addOption(
      new Option('--dry-run', 'print what the real run would do, checked by the server; change nothing').default(false),
    );
  for (const o of adminOptions()) cmd.addOption(o);
  cmd.action(async (opts: AdminTarget & { file: string; dryRun: boolean }) => {
    const { loadConfigFile, parseConfigText } = await import('../config/config-file.js');
    // `-f -`: the config on standard input, read as YAML (JSON is YAML too).
    const loaded =
      opts.file === '-' ? await parseConfigText(await readStdin(), 'stdin') : await loadConfigFile(opts.file);
    if (!loaded.ok) {
      const lines = loaded.errors.map((e) => `  ${e.path || '(root)'}: ${e.message}`).join('\n');
      // Refused before anything reached the server: say so, as a refusal by the server does.
      throw new CliError(
        `invalid config ${opts.file}:\n${lines}\nnothing applied: the file is applied whole or not at all`,
      );
    }
    const { status, body } = await adminJson<{ services: Obj[] }>(opts, '/api/v1/services').catch(nothingApplied);
    if (status !== 200) throw new CliError(`GET /api/v1/services: ${status} ${serverError(body)}`);
    const current = new Map(body.services.map((s) => [s['name'] as string, s]));
    const wanted = loaded.value.services.map((spec) => serviceSpecToJson(spec));
    const res = await adminJson<ApplyAnswer>(opts, `/api/v1/apply${opts.dryRun ? '?dryRun=true' : ''}`, {
      method: 'POST',
      body: JSON.stringify({ services: wanted }),
      headers: { 'content-type': 'application/json' },
    }).catch((err: unknown) => {
      // The server writes the whole set in one transaction or none of it: a request that reached it may
      // have been applied whole; one that never reached it was not applied at all.
      if (!opts.dryRun && err instanceof RequestFailed && err.sent)
        throw new CliError(
          `${err.message}; the file is applied whole or not at all, so the server may hold all of it or none of it: check with \`canopy get services\``,
        );
      return nothingApplied(err);
    });
    if (res.status !== 200) {
      reportRefusal(res.status, res.body, wanted);
      process.exitCode = 1;
      return;
    }
    const dry = opts.dryRun ? ' (dry run)' : '';
    for (const [i, { name, action }] of res.body.services.entries()) {
      process.stdout.write(`service/${name} ${action}${action !== 'unchanged' ? dry : ''}\n`);
      if (action === 'unchanged') continue;
      for (const line of serviceDiff(current.get(name), wanted[i]!)) process.stdout.write(`  ${line}\n`);
    }
  });
}

function nothingApplied(err: unknown): never {
  if (err instanceof CliError) throw new CliError(`${err.message}; nothing was applied`, err.exitCode);
  throw err;
}

interface ApplyAnswer {
  services: { name: string; action: 'created' | 'configured' | 'unchanged' }[];
}

/** Each refused field under the service it belongs to; the set was not written. */
function reportRefusal(status: number, body: unknown, wanted: readonly Obj[]): void {
  const fields = (body as { error?: { fields?: { path: string; message: string }[] } }).error?.fields;
  if (!fields) {
    process.stderr.write(`apply refused (${status}): ${serverError(body)}\n`);
  } else {
    for (const f of fields) {
      const m = /^services\[(\d+)\]\.?(.*)$/.exec(f.path);
      const name = m ? String(wanted[Number(m[1])]?.['name']) : undefined;
      const where = m?.[2] ? `${m[2]}: ` : name === undefined && f.path ? `${f.path}: ` : '';
      process.stderr.write(`${name ? `service/${name}` : 'apply'} rejected (${status}): ${where}${f.message}\n`);
    }
  }
  process.stderr.write('nothing applied: the file is applied whole or not at all\n');
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
