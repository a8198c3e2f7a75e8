/**
 * /metrics of a real `canopy serve`, scraped as Prometheus would, with real ADS clients: the series an
 * operator alerts on exist from the start (at zero before their first event), with bounded labels.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { RawAdsStream, RawDeltaStream } from './support/raw-ads.js';

const CDS = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';

/** Prometheus text → series (name{labels}) → value. */
function parse(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

describe('metrics to alert on', () => {
  let server: CanopyProcess;
  const scrape = async () => parse((await fetch(`${server.adminUrl}/metrics`).then((r) => r.text())) as string);
  const mesh = { services: [{ name: 'echo', port: 8080, endpoints: [{ address: '10.0.0.1', port: 80 }] }] };
  before(async () => {
    server = await startCanopyProcess(mesh);
  });
  after(() => server.stop());

  it('canopy_build_info, config load, store health and write latency from the start', async () => {
    const m = await scrape();
    const build = [...m.keys()].find((k) => k.startsWith('canopy_build_info{'));
    assert.ok(build, 'canopy_build_info');
    assert.match(build, /version="\d+\.\d+\.\d+"/);
    assert.match(build, /node_version="v\d+/);
    assert.equal(m.get('canopy_config_reloads_total{result="success"}'), 1);
    assert.equal(m.get('canopy_config_reloads_total{result="invalid"}'), 0);
    assert.equal(m.get('canopy_config_reloads_total{result="store_error"}'), 0);
    const last = m.get('canopy_config_last_reload_success_timestamp_seconds')!;
    assert.ok(Math.abs(last - Date.now() / 1000) < 120, `last success ${last}`);
    assert.equal(m.get('canopy_store_up'), 1);
    assert.ok(m.get('canopy_store_write_duration_seconds_count{op="putMany"}')! >= 1, 'the file was written');
    assert.equal(m.get('canopy_store_write_failures_total{op="put"}'), 0);
  });

  it('xDS counters exist at zero for every type before their first event', async () => {
    const m = await scrape();
    for (const type of ['LDS', 'RDS', 'CDS', 'EDS', 'LEDS', 'TREE'])
      for (const name of ['canopy_xds_nacks_total', 'canopy_xds_acks_total', 'canopy_xds_stale_nonces_total'])
        assert.equal(m.get(`${name}{type="${type}"}`), 0, `${name}{type="${type}"}`);
    assert.equal(m.get('canopy_xds_refused_requests_total{reason="over_limit"}'), 0);
  });

  it('connected clients by kind and protocol; a NACK counts; no per-client label', async () => {
    const grpc = new RawAdsStream(server.xdsUri);
    const envoy = new RawDeltaStream(server.xdsUri);
    try {
      grpc.send({ node: { id: 'metrics-grpc-client' }, type_url: CDS, resource_names: ['echo'] });
      const r = await grpc.next(5000);
      grpc.send({
        type_url: CDS,
        resource_names: ['echo'],
        response_nonce: r.nonce,
        error_detail: { code: 3, message: 'no' },
      });
      envoy.send({ node: { id: 'metrics-envoy-client', user_agent_name: 'envoy' }, type_url: CDS });
      await envoy.next(5000);
      await new Promise((res) => setTimeout(res, 300));
      const m = await scrape();
      assert.equal(m.get('canopy_xds_clients{kind="grpc",protocol="sotw"}'), 1);
      assert.equal(m.get('canopy_xds_clients{kind="envoy",protocol="delta"}'), 1);
      assert.equal(m.get('canopy_xds_clients{kind="agent",protocol="delta"}'), 0);
      assert.equal(m.get('canopy_xds_nacks_total{type="CDS"}'), 1);
      const text = [...m.keys()].join('\n');
      assert.ok(
        !text.includes('metrics-grpc-client') && !text.includes('metrics-envoy-client'),
        'no node ids in labels',
      );
    } finally {
      grpc.close();
      envoy.close();
    }
  });

  it('admin requests by method, route pattern and status class (bounded: unknown URLs are one series)', async () => {
    await server.admin('GET', '/api/v1/services/echo');
    await server.admin('GET', '/api/v1/services/nope');
    await server.admin('GET', '/no/such/path/1');
    await server.admin('GET', '/no/such/path/2');
    const m = await scrape();
    assert.ok(m.get('canopy_admin_requests_total{method="GET",route="/api/v1/services/:name",status="2xx"}')! >= 1);
    assert.ok(m.get('canopy_admin_requests_total{method="GET",route="/api/v1/services/:name",status="4xx"}')! >= 1);
    assert.equal(m.get('canopy_admin_requests_total{method="GET",route="unmatched",status="4xx"}'), 2);
    assert.ok(m.get('canopy_admin_request_duration_seconds_count{method="GET",route="/api/v1/services/:name"}')! >= 2);
  });

  it('an invalid config edit counts as invalid and keeps the last success time', async () => {
    const before = (await scrape()).get('canopy_config_last_reload_success_timestamp_seconds');
    writeFileSync(
      server.configPath,
      'services:\n  - name: echo\n    endpoints: [{ address: not_an_address, port: 80 }]\n',
    );
    const deadline = Date.now() + 10_000;
    let m = await scrape();
    while (m.get('canopy_config_reloads_total{result="invalid"}') === 0 && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 200));
      m = await scrape();
    }
    assert.equal(m.get('canopy_config_reloads_total{result="invalid"}'), 1);
    assert.equal(m.get('canopy_config_last_reload_success_timestamp_seconds'), before);
  });
});
