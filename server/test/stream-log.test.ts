/**
 * Streams coming and going (sessions/stream-log.ts): each at debug, and one info summary per period in
 * which any did, with the counts and how many are open; nothing at info for a quiet period.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { StreamLog } from '../src/sessions/stream-log.js';

function recorder() {
  const lines: { level: string; obj: object; msg: string }[] = [];
  const at = (level: string) => (obj: object, msg: string) => lines.push({ level, obj, msg });
  return { lines, log: { info: at('info'), warn: at('warn'), debug: at('debug') } };
}

describe('stream log', () => {
  it('logs each stream at debug and a burst as one info summary', async () => {
    const { lines, log } = recorder();
    let open = 0;
    const streams = new StreamLog(log, () => open, 20);
    for (let i = 0; i < 2000; i++, open++) streams.streamOpened({ stream: i });
    for (let i = 0; i < 500; i++, open--) streams.streamClosed({ stream: i });
    assert.equal(lines.filter((l) => l.level === 'debug').length, 2500);
    assert.equal(lines.filter((l) => l.level === 'info').length, 0, 'no line per stream at info');
    while (!lines.some((l) => l.level === 'info')) await new Promise((r) => setTimeout(r, 5));
    const info = lines.filter((l) => l.level === 'info');
    assert.deepEqual(
      info.map((l) => [l.msg, l.obj]),
      [['xds streams', { opened: 2000, closed: 500, open: 1500 }]],
    );
  });

  it('writes a pending summary at once on summarise, and nothing when nothing happened', () => {
    const { lines, log } = recorder();
    const streams = new StreamLog(log, () => 0, 60_000);
    streams.summarise();
    assert.equal(lines.length, 0);
    streams.streamClosed({ stream: 1 });
    streams.summarise();
    streams.summarise();
    const info = lines.filter((l) => l.level === 'info');
    assert.deepEqual(info[0]?.obj, { opened: 0, closed: 1, open: 0 });
    assert.equal(info.length, 1);
  });
});
