/**
 * The embedded store's compact form of a bucket of endpoints (format 2).
 *
 * A bucket was a JSON list of whole endpoint objects: ~170 bytes an endpoint,
 * most of them field names and defaults, and a restart spent more time
 * reading and parsing 17 MB of it (100k endpoints) than building the mesh.
 * Format 2 writes each endpoint as a short row and each distinct locality
 * once per bucket:
 *
 *   {"v":2,"l":[["r1","z1","s1"],…],"e":[["10.0.0.1",8080,0],…]}
 *
 * A row is `[address, port, locality, weight, health, network, node, cluster,
 * labels]` with trailing defaults left out (weight 1, healthy, "" and no
 * labels); `locality` indexes `l`. A decoded endpoint has the fields, in the
 * order, that the config reader builds (domain/endpoint-list.ts), and the
 * endpoints of one locality share its object. Format 1 (a plain list)
 * is still read.
 */
import type { Endpoint, Health } from '../../domain/service.js';
import { jsonString } from '../../domain/spec-json.js';
import { NO_LABELS, type Locality } from '../../domain/locality.js';
import { CodedError } from '../../domain/errors.js';

/** Encodes endpoints as one format-2 bucket value. */
export function encodeBucket(endpoints: Iterable<Endpoint>): string {
  const localities = new Map<Locality, number>();
  const byValue = new Map<string, number>();
  let table = '';
  let rows = '';
  for (const ep of endpoints) {
    let loc = localities.get(ep.locality);
    if (loc === undefined) {
      const l = ep.locality;
      const text = `[${jsonString(l.region)},${jsonString(l.zone)},${jsonString(l.subzone)}]`;
      loc = byValue.get(text);
      if (loc === undefined) {
        loc = byValue.size;
        table += loc === 0 ? text : `,${text}`;
        byValue.set(text, loc);
      }
      localities.set(ep.locality, loc);
    }
    rows += rows === '' ? row(ep, loc) : `,${row(ep, loc)}`;
  }
  return `{"v":2,"l":[${table}],"e":[${rows}]}`;
}

/** One endpoint's row: the fields after the locality only up to the last one that is not its default. */
function row(ep: Endpoint, loc: number): string {
  const labels = hasLabels(ep.labels);
  const last = labels
    ? 8
    : ep.cluster !== ''
      ? 7
      : ep.node !== ''
        ? 6
        : ep.network !== ''
          ? 5
          : ep.health !== 'healthy'
            ? 4
            : ep.weight !== 1
              ? 3
              : 2;
  let out = `[${jsonString(ep.address)},${ep.port},${loc}`;
  if (last >= 3) out += `,${ep.weight}`;
  if (last >= 4) out += `,${jsonString(ep.health)}`;
  if (last >= 5) out += `,${jsonString(ep.network)}`;
  if (last >= 6) out += `,${jsonString(ep.node)}`;
  if (last >= 7) out += `,${jsonString(ep.cluster)}`;
  if (last >= 8) out += `,${JSON.stringify(ep.labels)}`;
  return `${out}]`;
}

function hasLabels(labels: Readonly<Record<string, string>>): boolean {
  for (const _ in labels) return true;
  return false;
}

type Row = [string, number, number, number?, Health?, string?, string?, string?, Record<string, string>?];

/**
 * The endpoints of a stored bucket value (either format), appended to `into`;
 * `intern` gives the endpoints of one locality one object across buckets.
 */
export function decodeBucket(
  value: string,
  into: Endpoint[],
  intern: (l: { region: string; zone: string; subzone: string }) => Locality = (l) => l,
): void {
  const parsed = JSON.parse(value) as Endpoint[] | { v: 2; l: [string, string, string][]; e: Row[] };
  if (Array.isArray(parsed)) {
    for (const ep of parsed) into.push(ep);
    return;
  }
  if (parsed.v !== 2)
    throw new CodedError(
      'CANOPY_STORE_FORMAT',
      `a stored bucket has format ${String(parsed.v)}, which this version cannot read`,
    );
  const localities = parsed.l.map(([region, zone, subzone]) => intern({ region, zone, subzone }));
  for (const r of parsed.e) {
    const address = r[0];
    const port = r[1];
    const ep: Endpoint = {
      address,
      port,
      locality: localities[r[2]]!,
      network: r[5] ?? '',
      node: r[6] ?? '',
      cluster: r[7] ?? '',
      labels: r[8] ?? NO_LABELS,
      health: r[4] ?? 'healthy',
      weight: r[3] ?? 1,
    };
    into.push(ep);
  }
}
