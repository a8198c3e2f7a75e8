/**
 * `canopy serve --config FILE`: runs the control plane. Flags override env, env overrides the file,
 * the file overrides the defaults. Both ports are checked free before the store is opened, so a busy
 * port fails with its flag named and nothing written.
 */
import net from 'node:net';
import type { Command } from 'commander';
import type { Canopy, KubeOptions } from '../main.js';
import type { ServeSecurity } from './serve-security.js';
import { CliError, EXIT_USAGE } from './common.js';
import { setHeapGrowth } from '../platform/heap-growth.js';
import { kubeOptions } from './serve-kube.js';
import { addServeOptions, DEFAULT_ADMIN_PORT, DEFAULT_XDS_PORT, type ServeValues } from './serve-options.js';
import { serveLogger } from './serve-log.js';
import { FlagError, readServeSecurity, SECURITY_FLAGS, type SecurityValues } from './serve-security.js';
import { untilSignal } from '../platform/signals.js';

export function registerServe(program: Command): void {
  const serve = program
    .command('serve')
    .description('run the control plane: xDS (ADS) for Envoy, gRPC and node agents, and the admin API');
  addServeOptions(serve);
  serve.addHelpText('after', '\nFlags override env, env overrides the config file. Reference: docs/configuration.md');
  serve.action(async (_opts: unknown, cmd: Command) => {
    const { canopy, note } = await runServe(cmd);
    const stopped = untilSignal(() => canopy.stop());
    // "ready" only once /readyz would answer 200 (a Kubernetes source's first sync written).
    const waiting = canopy.notReady();
    if (waiting !== undefined) process.stderr.write(`canopy: serving, not ready yet: ${waiting}\n`);
    if ((await Promise.race([canopy.whenReady().then(() => true), stopped.then(() => false)])) === false) return;
    process.stderr.write(`canopy: ready; the web view is at ${canopy.webView}\n`);
    // After ready, with signals handled: the note may read the file (config/config-source.ts, overrides).
    await note().catch(() => {});
    await stopped;
  });
}

async function runServe(cmd: Command): Promise<{ canopy: Canopy; note: () => Promise<void> }> {
  // Loaded here, not at the top: every other subcommand (and --help) starts without the server's modules.
  const { startCanopy } = await import('../main.js');
  const { readStartConfig } = await import('../config/config-start.js');
  const values = cmd.opts<ServeValues>();
  const kube = kubeOptions(values);
  if (!values.config && !kube)
    throw new CliError(
      'serve: --config FILE (or CANOPY_CONFIG) is required, unless --kubeconfig FILE or --kube-in-cluster is given',
      EXIT_USAGE,
    );
  // Before the config load: a big file's parse is the first burst of garbage (heap-growth.ts).
  setHeapGrowth(values.heapGrowth);
  let security;
  try {
    security = await readServeSecurity(securityValues(cmd), process.env);
  } catch (err) {
    if (!(err instanceof FlagError)) throw err;
    throw new CliError(err.message, EXIT_USAGE);
  }
  // A data directory that already holds this very file spares its parse (config/config-record.ts).
  const loaded = values.config
    ? await readStartConfig(values.config, values.store === undefined ? values.dataDir : undefined)
    : undefined;
  if (!loaded) return serveKubeOnly(values, kube!, security);
  if (!loaded.ok) {
    const lines = loaded.errors.map((e) => `  ${e.path || '(root)'}: ${e.message}`).join('\n');
    throw new CliError(`invalid config ${values.config}:\n${lines}`);
  }
  const startConfig = loaded.value;
  const file = values.config!;
  const config = startConfig.config;
  for (const n of config.notes ?? []) process.stderr.write(`canopy: note: ${n.path}: ${n.message}\n`);
  const host = values.host ?? config.server.host ?? '127.0.0.1';
  const xdsHost = values.xdsHost ?? host;
  const adminHost = values.adminHost ?? host;
  await assertPortFree(
    'xDS',
    xdsHost,
    values.xdsPort ?? config.server.xdsPort ?? DEFAULT_XDS_PORT,
    '--xds-port, CANOPY_XDS_PORT',
  );
  await assertPortFree(
    'admin',
    adminHost,
    values.adminPort ?? config.server.adminPort ?? DEFAULT_ADMIN_PORT,
    '--admin-port, CANOPY_ADMIN_PORT',
  );
  const canopy = await startCanopy({
    config,
    configPath: file,
    startConfig,
    ...(values.takeOver ? { takeOver: true } : {}),
    security,
    ...(values.host !== undefined ? { host: values.host } : {}),
    ...(await flagOptions(values)),
    ...(kube ? { kube } : {}),
  });
  const note = (): Promise<void> => reportStoreOverrides(canopy, values.store ?? values.dataDir);
  return { canopy, note };
}

/** What `canopy serve`'s flags set alike with a config file and with Kubernetes alone: the store, listeners, logs. */
async function flagOptions(values: ServeValues) {
  return {
    ...(values.store !== undefined ? { storeUrl: values.store } : { dataDir: values.dataDir }),
    ...(values.acceptStoreLoss ? { acceptStoreLoss: true } : {}),
    ...(values.xdsHost !== undefined ? { xdsHost: values.xdsHost } : {}),
    ...(values.adminHost !== undefined ? { adminHost: values.adminHost } : {}),
    ...(values.xdsPort !== undefined ? { xdsPort: values.xdsPort } : {}),
    ...(values.adminPort !== undefined ? { adminPort: values.adminPort } : {}),
    ...(values.debounceMs !== undefined ? { debounceMs: values.debounceMs } : {}),
    ...(values.xdsWorkers !== undefined ? { xdsWorkers: values.xdsWorkers } : {}),
    logLevel: values.logLevel,
    logger: await serveLogger(values.logLevel, values.logFormat),
    heapGrowth: values.heapGrowth,
    ...(values.leds !== undefined ? { leds: values.leds === 'on' } : {}),
  };
}

/** Kubernetes the only source: no config file, the server's settings from flags and env. */
async function serveKubeOnly(
  values: ServeValues,
  kube: KubeOptions,
  security: Partial<ServeSecurity>,
): Promise<{ canopy: Canopy; note: () => Promise<void> }> {
  const { startCanopy } = await import('../main.js');
  const host = values.host ?? '127.0.0.1';
  await assertPortFree(
    'xDS',
    values.xdsHost ?? host,
    values.xdsPort ?? DEFAULT_XDS_PORT,
    '--xds-port, CANOPY_XDS_PORT',
  );
  await assertPortFree(
    'admin',
    values.adminHost ?? host,
    values.adminPort ?? DEFAULT_ADMIN_PORT,
    '--admin-port, CANOPY_ADMIN_PORT',
  );
  const canopy = await startCanopy({
    config: { services: [], server: {} },
    security,
    host,
    ...(await flagOptions(values)),
    kube,
  });
  return { canopy, note: async () => {} };
}

/** Commander's camelCase values back under the flag names serve-security.ts reads. */
function securityValues(cmd: Command): SecurityValues {
  const out: Record<string, unknown> = {};
  for (const option of cmd.options) {
    const flag = option.long?.slice(2);
    if (flag === undefined || !(flag in SECURITY_FLAGS)) continue;
    const v = cmd.getOptionValue(option.attributeName()) as unknown;
    if (v !== undefined) out[flag] = v;
  }
  return out as SecurityValues;
}

/**
 * A listener bound and released at once: a port in use (or a host this machine lacks) fails here with
 * the flag that chose it, before the store is opened, instead of as grpc-js' "No address added".
 */
async function assertPortFree(what: string, host: string, port: number, flags: string): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', (err: NodeJS.ErrnoException) => {
      const why =
        err.code === 'EADDRINUSE'
          ? 'is in use'
          : err.code === 'EACCES'
            ? 'needs privileges to bind'
            : err.code === 'EADDRNOTAVAIL'
              ? `cannot be bound: ${host} is not an address of this machine`
              : `cannot be bound (${err.code ?? err.message})`;
      reject(new CliError(`${what} port ${port} on ${host} ${why} (${flags})`));
    });
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve()));
  });
}

/**
 * Health or weight set through the API survives a restart while the file's entry is unchanged (the
 * ownership rule). Say so, so that a file that looks authoritative does not surprise the operator. What
 * the store keeps is the config source's to tell (config/config-overrides.ts); this only words it.
 */
async function reportStoreOverrides(canopy: Canopy, where: string): Promise<void> {
  const kept = await canopy.configSource.overrides();
  if (!kept) return;
  process.stderr.write(
    `canopy: note: the store (${where}) keeps API changes over the unchanged config file: ` +
      `${kept.endpoints} endpoint(s) in ${kept.services.length} service(s): ${kept.services.join(', ')}. ` +
      'Edit the file entry or PUT the service to replace them.\n',
  );
}
