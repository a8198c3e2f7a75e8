/**
 * A load-aware service's weights survive a `kill -9` of `canopy serve`: the plan is kept in the store
 * (serve/load-keep.ts), so the restarted process serves the weights it served before, not the plain
 * failover CLA. A real Envoy 1.40 sidecar (bootstrapped by `canopy bootstrap envoy`) in zone A offers twice
 * zone A's capacity and reports it every second; once the spill to zone B is in place, its locality weights
 * are read from Envoy's /config_dump, Canopy is killed with SIGKILL and started again on the same data
 * directory and xDS port, the Envoy reconnects and re-syncs, and its priority-0 weights are read again:
 * zone B is still there with about the share it had, over the next intervals too. Before, zone A's weight
 * went from ~500 to the plain CLA (zone A alone in priority 0).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startBackend, type Backend } from '../server/src/demo/backend.js';
import { parseLocality } from '../server/src/domain/locality.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { EnvoyProcess, envoySkip, explainFailure } from './support/envoy-process.js';
import { freePort } from './support/etcd-process.js';
import { DirectEchoClient, pacedLoad, type PacedLoad } from './support/paced-echo.js';
import { CDS, EDS, LDS, untilSynced } from './support/resync.js';
import { priorityZeroWeights, shareOf, waterfallEcho } from './support/load-aware.js';

const skip = envoySkip();
const INTERVAL_MS = 1000;
const CAPACITY = 30;
const CAPACITY_A = 2 * CAPACITY;
const PORT = 20097;
const BACKENDS: [id: string, host: string, locality: string][] = [
  ['a1', '127.0.97.1', 'r1/za/s'],
  ['a2', '127.0.97.2', 'r1/za/s'],
  ['b1', '127.0.97.3', 'r1/zb/s'],
  ['b2', '127.0.97.4', 'r1/zb/s'],
  ['b3', '127.0.97.5', 'r1/zb/s'],
  ['c1', '127.0.97.6', 'r2/zc/s'],
  ['c2', '127.0.97.7', 'r2/zc/s'],
];
const LOCALITIES = BACKENDS.map((b) => b[2]);
const OUTBOUND = '127.0.98.1';

describe('load-aware weights survive a kill -9 of canopy serve (real Envoy)', { skip, timeout: 150_000 }, () => {
  const backends: Backend[] = [];
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'canopy-load-restart-'));
  let xdsPort = 0;
  let canopy: CanopyProcess | undefined;
  let envoy: EnvoyProcess | undefined;
  let client: DirectEchoClient | undefined;
  let load: PacedLoad | undefined;

  const config = () => ({
    server: { debounceMs: 20, loadReportingIntervalMs: INTERVAL_MS },
    services: [waterfallEcho(backends, LOCALITIES, CAPACITY, PORT)],
  });
  const serve = () => startCanopyProcess(config(), ['--xds-port', String(xdsPort), '--data-dir', dataDir]);
  const weights = async () => priorityZeroWeights(await envoy!.configDump({ includeEds: true }), 'echo');

  before(async () => {
    for (const [id, host, locality] of BACKENDS)
      backends.push(await startBackend({ id, host, locality: parseLocality(locality) }));
    xdsPort = await freePort();
    canopy = await serve();
    envoy = await EnvoyProcess.start({
      xds: `127.0.0.1:${xdsPort}`,
      nodeId: 'envoy-restart-za',
      locality: parseLocality('r1/za/s'),
      outboundAddress: OUTBOUND,
    });
    client = new DirectEchoClient(`${OUTBOUND}:${PORT}`);
  });
  after(async () => {
    await load?.stop();
    client?.close();
    await envoy?.stop();
    await canopy?.stop();
    await Promise.all(backends.map((b) => b.stop()));
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('after kill -9 and a restart, Envoy keeps the spill weights instead of the plain CLA', () =>
    explainFailure(
      () => (envoy ? [envoy] : []),
      async () => {
        await client!.who(30_000);
        load = pacedLoad(client!, 2 * CAPACITY_A, 120_000);
        // The spill in place in Envoy: zone B takes part of zone A's load in priority 0.
        await envoy!.until(async () => shareOf(await weights(), 'r1/zb/s') >= 0.25, 60_000, 'the spill to zone B');
        const before = await weights();
        console.log(`# before the kill, Envoy's priority 0: ${JSON.stringify(before)}`);
        assert.ok(!('r2/zc/s' in before), `nothing in zone C while zone B has room: ${JSON.stringify(before)}`);

        await canopy!.kill();
        // Envoy notices the control plane is gone (and keeps routing with what it holds meanwhile).
        await envoy!.until(
          async () => (await envoy!.stat('control_plane.connected_state')) === 0,
          30_000,
          'disconnect',
        );
        canopy = await serve();
        const restored = canopy.logs().find((l) => l.includes('load-aware plans restored'));
        assert.ok(restored, `the restarted canopy restored the kept plan:\n${canopy.logs().join('\n')}`);
        await envoy!.until(async () => (await envoy!.stat('control_plane.connected_state')) === 1, 30_000, 'reconnect');
        const resync = await untilSynced(() => canopy!.adminUrl, 'envoy-restart-za', [CDS, LDS, EDS], 30_000);
        const after = await weights();
        console.log(`# after the restart (re-synced in ${resync} ms), Envoy's priority 0: ${JSON.stringify(after)}`);
        const was = shareOf(before, 'r1/zb/s');
        assert.ok(
          Math.abs(shareOf(after, 'r1/zb/s') - was) <= 0.15,
          `zone B's share ${was} → ${JSON.stringify(after)}`,
        );

        // Over the next intervals (the kept plan's hold, then plans from fresh reports), zone B's share never
        // drops to the plain CLA's 0: each read of Envoy's weights keeps zone B in priority 0.
        const watchUntil = Date.now() + 6 * INTERVAL_MS;
        let lowest = 1;
        while (Date.now() < watchUntil) {
          lowest = Math.min(lowest, shareOf(await weights(), 'r1/zb/s'));
          await sleep(INTERVAL_MS / 4);
        }
        console.log(
          `# zone B's lowest share over 6 intervals after the restart: ${lowest.toFixed(3)} (was ${was.toFixed(3)})`,
        );
        assert.ok(lowest >= was - 0.2, `zone B's share fell to ${lowest} after the restart (was ${was})`);
        assert.deepEqual([...(await envoy!.rejected())], [], 'no rejected update');
      },
    ));
});
