/**
 * A full garbage collection for the push pipeline to run once a big burst of
 * writes is over (sessions/idle-collector.ts says why): grpc-js frames every
 * response into a new buffer, and V8 leaves those copies uncollected once
 * nothing allocates. Node exposes the collector only behind --expose-gc;
 * the flag is set here for a fresh context, which is where `gc` is read
 * from, so the process's own global scope is left as it was.
 */
import v8 from 'node:v8';
import vm from 'node:vm';

export function fullCollection(): () => void {
  const own = (globalThis as { gc?: () => void }).gc;
  if (own) return own;
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}
