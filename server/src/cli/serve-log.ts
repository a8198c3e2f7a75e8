/** `canopy serve`'s logger: for a person in a terminal, for a machine otherwise (--log-format). */
import type { Logger } from 'pino';

/**
 * The server's one logger: pino's JSON lines, or in a terminal (or with --log-format pretty) the same
 * records as pino-pretty's human-readable lines, written synchronously so none is lost at exit.
 */
export async function serveLogger(level: string, asked: 'pretty' | 'json' | undefined): Promise<Logger> {
  const { pino } = await import('pino');
  const options = { level, name: 'canopy' };
  const format = asked ?? (process.stdout.isTTY ? 'pretty' : 'json');
  if (format === 'json') return pino(options);
  const { PinoPretty } = await import('pino-pretty');
  const colorize = process.stdout.isTTY === true;
  const stream = PinoPretty({
    colorize,
    sync: true,
    singleLine: true,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,name',
  });
  return pino(options, stream);
}
