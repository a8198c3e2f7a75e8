/**
 * A workload process for the kernel tests: it is moved into a cgroup by the
 * test, then connects where it is told, over real TCP on loopback, and
 * reports which backend answered. Commands arrive as JSON lines on stdin;
 * results leave as JSON lines on stdout.
 *
 *   {"op":"connect","host":"127.100.0.1","port":80,"n":20}
 *     -> {"ids":["b1","b2",...],"errors":{"EPERM":0,...}}
 *   {"op":"loop","host":...,"port":...}   connect back to back until "stop"
 *   {"op":"stop"} -> {"samples":[[t_ms, "b1" | "!ECONNREFUSED"], ...]}
 */
import net from 'node:net';
import readline from 'node:readline';

interface Cmd {
  op: 'connect' | 'loop' | 'stop' | 'exit';
  host?: string;
  port?: number;
  n?: number;
}

/** One connect: the backend's id (it writes it and closes), or "!CODE". */
function once(host: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    let data = '';
    const s = net.connect({ host, port });
    s.setTimeout(2000, () => s.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })));
    s.on('data', (d) => (data += d.toString()));
    s.on('end', () => resolve(data.trim() || '!EMPTY'));
    s.on('error', (e: NodeJS.ErrnoException) => resolve(`!${e.code ?? 'ERR'}`));
  });
}

let looping = false;
let samples: [number, string][] = [];
let loopDone: Promise<void> = Promise.resolve();

function write(obj: unknown): void {
  process.stdout.write(`${JSON.stringify(obj)}\n`);
}

const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const cmd = JSON.parse(line) as Cmd;
  void (async () => {
    switch (cmd.op) {
      case 'connect': {
        const ids: string[] = [];
        const errors: Record<string, number> = {};
        for (let i = 0; i < (cmd.n ?? 1); i++) {
          const r = await once(cmd.host!, cmd.port!);
          if (r.startsWith('!')) errors[r.slice(1)] = (errors[r.slice(1)] ?? 0) + 1;
          else ids.push(r);
        }
        write({ ids, errors });
        break;
      }
      case 'loop':
        looping = true;
        samples = [];
        loopDone = (async () => {
          while (looping) samples.push([Date.now(), await once(cmd.host!, cmd.port!)]);
        })();
        write({ looping: true });
        break;
      case 'stop':
        looping = false;
        await loopDone;
        write({ samples });
        break;
      case 'exit':
        process.exit(0);
    }
  })();
});
write({ ready: true, pid: process.pid });
