#!/usr/bin/env node
/**
 * `canopy serve --config FILE` runs the control plane; `canopy demo` runs the
 * embedded demo mesh on loopback. Flags override env, env overrides the file.
 */
import { parseArgs } from 'node:util';
import { formatFieldErrors } from '../domain/errors.js';
import { startCanopy } from '../main.js';
import { loadConfigFile } from '../store/config-file.js';
import { AGENT_HELP, AGENT_USAGE, AgentFlagError, parseAgentArgs, parseUninstallArgs } from '../agent/cli-agent.js';
import { FlagError, readServeSecurity, SECURITY_ENV, SECURITY_FLAGS, SECURITY_USAGE } from './serve-security.js';

// The other commands' modules (YAML printing, the policy importers, the demo's gRPC clients) are
// imported when their command runs, so that `serve` starts without loading them.
const policyCli = () => import('./import.js');
const explainCli = () => import('./explain.js');
const demoCli = () => import('../demo/cli-demo.js');

async function usage(): Promise<string> {
  const [{ IMPORT_USAGE }, { EXPLAIN_USAGE }, { DEMO_USAGE }] = await Promise.all([policyCli(), explainCli(), demoCli()]);
  return `usage:
  canopy serve --config FILE [--data-dir DIR | --store etcd://HOST:PORT[,…][/prefix/]] [--host H] [--xds-host H] [--admin-host H]
               [--xds-port N] [--admin-port N] [--debounce-ms N] [--leds on|off] [--log-level L]
${SECURITY_USAGE}
  canopy demo [--exit]      (in a terminal it stays up until Ctrl-C; --exit runs and exits)
${IMPORT_USAGE}
${EXPLAIN_USAGE}
${DEMO_USAGE}
${AGENT_USAGE}
env: CANOPY_CONFIG, CANOPY_DATA_DIR, CANOPY_STORE, CANOPY_HOST, CANOPY_XDS_HOST, CANOPY_ADMIN_HOST, CANOPY_XDS_PORT,
     CANOPY_ADMIN_PORT, CANOPY_DEBOUNCE_MS, CANOPY_LEDS, CANOPY_LOG_LEVEL,
     ${SECURITY_ENV}
--data-dir defaults to ./canopy-data (the embedded database; one canopy process per directory).`;
}

/** Where `canopy serve` keeps services when neither --data-dir nor CANOPY_DATA_DIR says. */
const DEFAULT_DATA_DIR = 'canopy-data';

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === 'demo') {
    const { values: demo } = parseArgs({ args: rest, options: { exit: { type: 'boolean' } }, strict: true });
    const { runDemo } = await import('../demo/run-demo.js');
    // In a terminal the demo stays up for the web view; scripts and CI (no TTY) or --exit get today's run-and-exit.
    const hold = process.stdout.isTTY && !demo.exit;
    await runDemo(hold ? { hold: () => untilSignal(async () => {}) } : {});
    return 0;
  }
  if (command === 'agent') return runAgent(rest);
  if (command === 'demo-app') return (await demoCli()).runDemoApp(rest).then(() => 0);
  if (command === 'demo-call') return (await demoCli()).runDemoCall(rest).then(() => 0);
  if (command === 'import') return (await policyCli()).runImport(rest, process.stdout, process.stderr);
  if (command === 'explain') return (await explainCli()).runExplain(rest, process.stdout, process.stderr);
  const help = command === 'help' || command === '--help' || command === '-h';
  if (command !== 'serve' || rest.includes('--help') || rest.includes('-h')) {
    (help || command === 'serve' ? process.stdout : process.stderr).write(`${await usage()}\n`);
    return help || command === 'serve' ? 0 : 2;
  }
  const { values } = parseArgs({
    args: rest,
    options: {
      config: { type: 'string' },
      'data-dir': { type: 'string' },
      store: { type: 'string' },
      host: { type: 'string' },
      'xds-host': { type: 'string' },
      'admin-host': { type: 'string' },
      'xds-port': { type: 'string' },
      'admin-port': { type: 'string' },
      'debounce-ms': { type: 'string' },
      leds: { type: 'string' },
      'log-level': { type: 'string' },
      ...SECURITY_FLAGS,
    },
    strict: true,
  });
  const env = process.env;
  const configPath = values.config ?? env['CANOPY_CONFIG'];
  if (!configPath) {
    process.stderr.write(`canopy: --config FILE is required\n${await usage()}\n`);
    return 2;
  }
  let security;
  try {
    security = await readServeSecurity(values, env);
  } catch (err) {
    if (!(err instanceof FlagError)) throw err;
    process.stderr.write(`canopy: ${err.message}\n`);
    return 2;
  }
  const loaded = await loadConfigFile(configPath);
  if (!loaded.ok) {
    process.stderr.write(`canopy: invalid config ${configPath}:\n`);
    for (const e of loaded.errors) process.stderr.write(`  ${e.path || '(root)'}: ${e.message}\n`);
    return 1;
  }
  for (const n of loaded.value.notes ?? []) process.stderr.write(`canopy: note: ${n.path}: ${n.message}\n`);
  const numbers: Record<string, number | undefined> = {};
  for (const [flag, envName] of [
    ['xds-port', 'CANOPY_XDS_PORT'],
    ['admin-port', 'CANOPY_ADMIN_PORT'],
    ['debounce-ms', 'CANOPY_DEBOUNCE_MS'],
  ] as const) {
    const raw = values[flag] ?? env[envName];
    if (raw === undefined) continue;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 0 || (flag !== 'debounce-ms' && n > 65535)) {
      process.stderr.write(`canopy: --${flag} (${envName}) must be an integer${flag === 'debounce-ms' ? ' >= 0' : ' in 0..65535'}, got "${raw}"\n`);
      return 2;
    }
    numbers[flag] = n;
  }
  const host = values.host ?? env['CANOPY_HOST'];
  const xdsHost = values['xds-host'] ?? env['CANOPY_XDS_HOST'];
  const adminHost = values['admin-host'] ?? env['CANOPY_ADMIN_HOST'];
  const storeUrl = values.store ?? env['CANOPY_STORE'];
  const dataDir = values['data-dir'] ?? env['CANOPY_DATA_DIR'] ?? DEFAULT_DATA_DIR;
  const logLevel = values['log-level'] ?? env['CANOPY_LOG_LEVEL'];
  const ledsRaw = values.leds ?? env['CANOPY_LEDS'];
  if (ledsRaw !== undefined && ledsRaw !== 'on' && ledsRaw !== 'off') {
    process.stderr.write(`canopy: --leds (CANOPY_LEDS) must be "on" or "off", got "${ledsRaw}"\n`);
    return 2;
  }
  const canopy = await startCanopy({
    config: loaded.value,
    configPath,
    ...(storeUrl !== undefined ? { storeUrl } : { dataDir }),
    security,
    ...(host !== undefined ? { host } : {}),
    ...(xdsHost !== undefined ? { xdsHost } : {}),
    ...(adminHost !== undefined ? { adminHost } : {}),
    ...(numbers['xds-port'] !== undefined ? { xdsPort: numbers['xds-port'] } : {}),
    ...(numbers['admin-port'] !== undefined ? { adminPort: numbers['admin-port'] } : {}),
    ...(numbers['debounce-ms'] !== undefined ? { debounceMs: numbers['debounce-ms'] } : {}),
    ...(logLevel !== undefined ? { logLevel } : {}),
    ...(ledsRaw !== undefined ? { leds: ledsRaw === 'on' } : {}),
  });
  await untilSignal(() => canopy.stop());
  return 0;
}

async function runAgent(args: string[]): Promise<number> {
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(`${AGENT_HELP}\n`);
    return 0;
  }
  let opts;
  try {
    if (args[0] === 'uninstall') {
      const { Datapath } = await import('../agent/datapath.js');
      for (const line of Datapath.uninstall(parseUninstallArgs(args.slice(1)))) process.stdout.write(`${line}\n`);
      return 0;
    }
    opts = parseAgentArgs(args);
  } catch (err) {
    if (!(err instanceof AgentFlagError) && (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') !== true) throw err;
    process.stderr.write(`canopy agent: ${(err as Error).message}\nusage:\n${AGENT_USAGE}\n`);
    return 2;
  }
  const { startAgent } = await import('../agent/agent.js');
  const agent = await startAgent(opts);
  // On a signal the datapath keeps serving from the pinned maps; a new agent resumes it.
  await untilSignal(() => agent.stop());
  return 0;
}

/** Waits for SIGINT or SIGTERM, then runs `stop` once. */
function untilSignal(stop: () => Promise<void>): Promise<void> {
  return new Promise<void>((resolve) => {
    const onSignal = (): void => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      void stop().then(resolve);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    const e = err as { code?: string; message?: string; errors?: Parameters<typeof formatFieldErrors>[0] };
    process.stderr.write(`canopy: ${e.code ? `[${e.code}] ` : ''}${e.errors ? formatFieldErrors(e.errors) : (e.message ?? String(err))}\n`);
    process.exit(1);
  },
);
