/**
 * The config parser's thread: text in (workerData), the validated config (or
 * its errors) out as one message. Parsing and validating a 50 MB file takes
 * seconds; here it takes them off the server's event loop.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { parseConfigText } from './config-file.js';

const { text, name } = workerData as { text: string; name: string };
parentPort?.postMessage(await parseConfigText(text, name));
