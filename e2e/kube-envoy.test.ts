/**
 * Runs e2e/kube-envoy-scenario.ts (real Envoys in front of a Kubernetes
 * Service) in a network namespace of its own (e2e/support/kube-netns.ts).
 */
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { envoySkip } from './support/envoy-process.js';
import { kubeSkip } from './support/kube-apiserver.js';
import { netnsSkip, runInNetns } from './support/kube-netns.js';

const SCENARIO = fileURLToPath(new URL('./kube-envoy-scenario.js', import.meta.url));

describe('Kubernetes source, real API server, real Envoys (own network namespace)', () => {
  it('passes every scenario test', { skip: kubeSkip() || envoySkip() || netnsSkip(), timeout: 180_000 }, () =>
    runInNetns(SCENARIO, 5),
  );
});
