/**
 * `canopy demo --envoy --exit` (`npm start -- --envoy --exit`) as a real process with real Envoy 1.40
 * sidecars: requests through each sidecar land in its nearest locality, and after the demo marks zone
 * us-east-1a unhealthy the us-east sidecar's requests move to us-east-1b, with no failed request.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { envoySkip } from './support/envoy-process.js';

const CLI = fileURLToPath(new URL('../server/src/cli/canopy.js', import.meta.url));
const skip = envoySkip();

describe('canopy demo --envoy', { skip, timeout: 120_000 }, () => {
  it('shows locality routing and a failover through real Envoy sidecars', () => {
    const r = spawnSync(process.execPath, [CLI, 'demo', '--envoy', '--exit'], { encoding: 'utf8', timeout: 110_000 });
    const out = `${r.stdout}${r.stderr}`;
    assert.equal(r.status, 0, out);
    const section = (title: string) => out.slice(out.indexOf(title)).split('\n\n')[0]!;
    const before = section('Through the Envoy sidecars');
    assert.match(before, /Envoy in us-east\/us-east-1a\/rack1 +-> 127\.0\.0\.11 \(us-east\/us-east-1a\/rack1\) x60$/m);
    assert.match(before, /Envoy in eu-west\/eu-west-1b\/rack7 +-> 127\.0\.0\.15 \(eu-west\/eu-west-1b\/rack1\) x60$/m);
    const after = section('After the failover, through the Envoy sidecars');
    assert.match(after, /Envoy in us-east\/us-east-1a\/rack1 +-> 127\.0\.0\.13 \(us-east\/us-east-1b\/rack1\) x60$/m);
    assert.doesNotMatch(out, /failed/);
  });
});
