/**
 * The locality vectors the way users run them: every vector's documents (a
 * DestinationRule and ServiceEntry, a MeshLoadBalancingStrategy and
 * Dataplanes in Kuma's universal form, a Service and EndpointSlice, Canopy
 * config for ztunnel/Kmesh scopes) in one file given to `canopy serve
 * --config`, and the same documents through `canopy import SYSTEM FILE`, whose
 * output is served in turn. A raw ADS peer per vector, with the vector's
 * client locality and labels in its node, reads the CLA over a real socket
 * and decodes it with Envoy's protos.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { load as parse } from 'js-yaml';
import type { Placement } from '../server/src/domain/locality.js';
import { envoyType } from '../server/test/support/envoy-protos.js';
import {
  assertVector,
  documentsText,
  extra,
  outcomeOf,
  serviceName,
  shared,
  SYSTEMS,
  type Vector,
} from '../server/test/support/vector-documents.js';
import { runCanopyCli } from './support/canopy-cli.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { RawAdsStream } from './support/raw-ads.js';

const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const ALL = [...shared, ...extra];

interface DecodedCla {
  endpoints?: {
    priority?: number;
    load_balancing_weight?: { value?: number };
    lb_endpoints?: { endpoint?: { address?: { socket_address?: { address?: string; port_value?: number } } } }[];
  }[];
  policy?: { overprovisioning_factor?: { value?: number } };
}

/** The vector's client as an xDS node: locality in node.locality, the rest in metadata. */
function nodeOf(id: string, p: Placement): object {
  const s = (v: string) => ({ stringValue: v });
  const labels = Object.fromEntries(Object.entries(p.labels).map(([k, v]) => [k, s(v)]));
  return {
    id,
    locality: { region: p.locality.region, zone: p.locality.zone, sub_zone: p.locality.subzone },
    metadata: {
      fields: {
        network: s(p.network),
        node: s(p.node),
        cluster: s(p.cluster),
        labels: { structValue: { fields: labels } },
      },
    },
  };
}

async function claFor(canopy: CanopyProcess, v: Vector, streams: RawAdsStream[]) {
  const ads = new RawAdsStream(canopy.xdsUri);
  streams.push(ads);
  const how = SYSTEMS[v.policy.system]!;
  ads.send({ node: nodeOf(`client-${v.id}`, how.client(v.client)), type_url: EDS, resource_names: [serviceName(v)] });
  const r = await ads.next(10_000);
  assert.equal(r.resources.length, 1, `${v.id}: one CLA`);
  const type = envoyType('envoy.config.endpoint.v3.ClusterLoadAssignment');
  const cla = type.toObject(type.decode(r.resources[0]!.value), { defaults: true }) as DecodedCla;
  ads.send({ type_url: EDS, resource_names: [serviceName(v)], version_info: r.version_info, response_nonce: r.nonce });
  const groups = (cla.endpoints ?? []).map((g) => ({
    priority: g.priority ?? 0,
    weight: g.load_balancing_weight?.value ?? 0,
    endpoints: (g.lb_endpoints ?? []).map((e) => ({
      address: e.endpoint?.address?.socket_address?.address ?? '',
      port: e.endpoint?.address?.socket_address?.port_value ?? 0,
    })),
  }));
  return outcomeOf(v, groups, cla.policy?.overprovisioning_factor?.value);
}

describe('locality vectors through the CLI and a raw ADS peer', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-vectors-'));
  const streams: RawAdsStream[] = [];
  let served: CanopyProcess;
  let imported: CanopyProcess;
  /** A file of Kuma universal-form documents only (kuma-01 as reported: no apiVersion, no kind). */
  let universal: CanopyProcess;
  const kuma01 = shared.find((v) => v.id === 'kuma-01')!;

  before(async () => {
    // `canopy serve --config` on the documents as written, every system in one file.
    const text = ALL.map(documentsText).join('---\n');
    const serving = startCanopyProcess(`server: { debounceMs: 10 }\nservices: []\n---\n${text}`);
    // `canopy import SYSTEM FILE` per system; its output is a Canopy config.
    const services: unknown[] = [];
    for (const system of ['istio', 'kuma', 'k8s'] as const) {
      const file = path.join(dir, `${system}.yaml`);
      writeFileSync(
        file,
        ALL.filter((v) => v.policy.system === system)
          .map(documentsText)
          .join('---\n'),
      );
      const r = await runCanopyCli(['import', system, file]);
      assert.equal(r.code, 0, r.stderr);
      services.push(...(parse(r.stdout) as { services: unknown[] }).services);
    }
    for (const v of ALL.filter((x) => !SYSTEMS[x.policy.system]!.system)) {
      services.push(...(parse(documentsText(v)) as { services: unknown[] }).services);
    }
    const universalText = documentsText(kuma01);
    assert.doesNotMatch(universalText, /apiVersion|kind/);
    // Every process is kept before any failure is thrown, so `after` stops them all.
    const started = await Promise.allSettled([
      serving,
      startCanopyProcess({ services }),
      startCanopyProcess(universalText),
    ]);
    const ok = (i: number) => (started[i]?.status === 'fulfilled' ? started[i].value : undefined);
    [served, imported, universal] = [ok(0)!, ok(1)!, ok(2)!];
    for (const s of started) if (s.status === 'rejected') throw s.reason;
  });
  after(async () => {
    for (const s of streams) s.close();
    await Promise.all([served?.stop(), imported?.stop(), universal?.stop()]);
    rmSync(dir, { recursive: true, force: true });
  });

  it('the shared vectors are all here (15 or more, every system)', () => {
    assert.ok(shared.length >= 15, `${shared.length} shared vectors`);
  });
  it('kuma-01 alone: serve --config takes a file of universal-form Dataplanes', async () => {
    assertVector(kuma01, await claFor(universal, kuma01, streams));
  });
  for (const v of ALL) {
    it(`${v.id} (${v.policy.system}): serve --config FILE, and canopy import → serve`, async () => {
      assertVector(v, await claFor(served, v, streams));
      assertVector(v, await claFor(imported, v, streams));
    });
  }
});
