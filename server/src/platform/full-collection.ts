/**
 * A full garbage collection for the push pipeline to run once a big burst of
 * writes is over (sessions/idle-collector.ts says why): grpc-js frames every
 * response into a new buffer, and V8 leaves those copies uncollected once
 * nothing allocates. Node exposes the collector only behind --expose-gc;
 * the flag is set here for a fresh context, which is where `gc` is read
 * from, so the process's own global scope is left as it was. What the
 * collection frees goes back to the system a moment later (freed-pages.ts).
 */
import v8 from 'node:v8';
import vm from 'node:vm';
import { releaseFreedPagesSoon } from './freed-pages.js';

export function fullCollection(): () => void {
  const gc = ownGc() ?? exposedGc();
  return () => {
    gc();
    releaseFreedPagesSoon();
  };
}

function ownGc(): (() => void) | undefined {
  return (globalThis as { gc?: () => void }).gc;
}

function exposedGc(): () => void {
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}
