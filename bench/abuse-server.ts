/**
 * A Canopy server for bench/xds-abuse.ts, in its own process started with
 * --expose-gc: the bench asks it over IPC for its memory after a full GC, so
 * what is reported is what the server retains, not garbage not yet collected.
 */
import { pino } from 'pino';
import { parseConfig } from '../server/src/domain/spec.js';
import { startCanopy } from '../server/src/main.js';

// The config comes as the first IPC message (too big for argv).
const config = await new Promise<unknown>((resolve) => process.once('message', resolve));
const parsed = parseConfig(config);
if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
const canopy = await startCanopy({
  config: parsed.value,
  host: '127.0.0.1',
  xdsPort: 0,
  adminPort: 0,
  logger: pino({ level: 'silent' }),
});
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with --expose-gc');
process.send?.({ xds: canopy.xdsAddress, admin: canopy.adminAddress });
process.on('message', (m) => {
  if (m === 'measure') {
    gc();
    gc();
    const { rss, heapUsed, external } = process.memoryUsage();
    process.send?.({ rss, heapUsed, external });
  } else if (m === 'stop') void canopy.stop().then(() => process.exit(0));
});
