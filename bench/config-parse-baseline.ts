/**
 * The config-load bench's fair baseline for a first start (config-load.ts):
 * a bare process that reads the file and does the same parse and the same
 * validation as `canopy serve` (`JSON.parse`, or one js-yaml load, then the
 * server's `parseConfig`), and nothing else. Prints its time and peak RSS
 * added, from before the read to after the validation.
 */
import { readFileSync } from 'node:fs';
import { load } from 'js-yaml';
import { parseConfig } from '../server/src/domain/spec.js';

const file = process.argv[2]!;
const rss0 = process.memoryUsage().rss;
const t0 = performance.now();
const text = readFileSync(file, 'utf8');
const data: unknown = file.endsWith('.json') ? JSON.parse(text) : load(text);
const config = parseConfig(data);
const ms = performance.now() - t0;
if (!config.ok) throw new Error(`invalid config ${file}`);
// maxRSS is in KB: the peak of the whole process, less what it held before the read.
process.stdout.write(JSON.stringify({ ms, peakMB: (process.resourceUsage().maxRSS * 1024 - rss0) / 2 ** 20 }));
