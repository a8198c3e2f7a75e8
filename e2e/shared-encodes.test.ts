/**
 * A push encodes each distinct response once, however many streams get it (issue 24): a real
 * `canopy serve`, SotW ADS streams from clients in two regions, counted by the server's own
 * `canopy_xds_shared_encodes_total` and checked against the bytes the streams received.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { echoMesh } from './support/echo-mesh.js';
import { RawAdsStream, type RawResponse } from './support/raw-ads.js';

const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const PER_REGION = 3;

async function counter(server: CanopyProcess, series: string): Promise<number> {
  const text = await fetch(`${server.adminUrl}/metrics`).then((r) => r.text());
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  assert.ok(line, `${series} is in /metrics`);
  return Number(line.slice(series.length + 1));
}

describe('shared encodes', () => {
  let server: CanopyProcess;
  const mesh = echoMesh();

  before(async () => {
    server = await startCanopyProcess(mesh);
  });
  after(() => server.stop());

  it('a push to six streams in two localities encodes two responses, on connect and on a change', async () => {
    const encodes0 = await counter(server, 'canopy_xds_shared_encodes_total');
    const sent0 = await counter(server, 'canopy_xds_responses_total{type="EDS"}');
    const streams = ['east', 'west'].flatMap((region) =>
      Array.from({ length: PER_REGION }, (_, i) => ({ region, ads: new RawAdsStream(server.xdsUri), i })),
    );
    try {
      const ack = (s: (typeof streams)[number], r: RawResponse) =>
        s.ads.send({ type_url: EDS, resource_names: ['echo'], version_info: r.version_info, response_nonce: r.nonce });
      for (const s of streams)
        s.ads.send({
          node: { id: `${s.region}-${s.i}`, locality: { region: s.region, zone: `${s.region[0]}1` } },
          type_url: EDS,
          resource_names: ['echo'],
        });
      const first = await Promise.all(streams.map((s) => s.ads.next(10_000)));
      streams.forEach((s, k) => ack(s, first[k]!));
      const bodies = (rs: RawResponse[]) => rs.map((r) => r.resources[0]!.value.toString('base64'));
      const initial = bodies(first);
      assert.equal(new Set(initial).size, 2, 'two distinct CLAs: one per region');
      assert.equal((await counter(server, 'canopy_xds_shared_encodes_total')) - encodes0, 2);
      assert.equal((await counter(server, 'canopy_xds_responses_total{type="EDS"}')) - sent0, 6);

      const patched = await server.admin(
        'PATCH',
        `/api/v1/services/echo/endpoints/${encodeURIComponent('10.0.1.2:80')}`,
        {
          health: 'unhealthy',
        },
      );
      assert.equal(patched.status, 200);
      const pushed = await Promise.all(streams.map((s) => s.ads.next(10_000)));
      streams.forEach((s, k) => ack(s, pushed[k]!));
      const now = bodies(pushed);
      assert.equal(new Set(now).size, 2);
      assert.ok(
        now.every((b, k) => b !== initial[k]),
        'every stream got the change',
      );
      // Let anything late land before counting: still one encode per distinct response.
      await new Promise((r) => setTimeout(r, 300));
      assert.equal((await counter(server, 'canopy_xds_shared_encodes_total')) - encodes0, 4);
      assert.equal((await counter(server, 'canopy_xds_responses_total{type="EDS"}')) - sent0, 12);
    } finally {
      for (const s of streams) s.ads.close();
    }
  });
});
