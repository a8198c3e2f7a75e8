/**
 * Runs e2e/kube-source-scenario.ts in a network namespace of its own
 * (e2e/support/kube-netns.ts): its backends listen on 10.244.x.y, which the
 * API server accepts in EndpointSlices.
 */
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { kubeSkip } from './support/kube-apiserver.js';
import { netnsSkip, runInNetns } from './support/kube-netns.js';

const SCENARIO = fileURLToPath(new URL('./kube-source-scenario.js', import.meta.url));

describe('Kubernetes source, real API server, real gRPC clients (own network namespace)', () => {
  it('passes every scenario test', { skip: kubeSkip() || netnsSkip(), timeout: 240_000 }, () =>
    runInNetns(SCENARIO, 7),
  );
});
