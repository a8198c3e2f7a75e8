/**
 * Replicas on etcd share the load their clients report: each replica writes
 * its per-period aggregate (domain/load/load-aggregate.ts) under
 *   <prefix>load/<replica>
 * with a lease, and watches the others'. A replica that dies stops renewing
 * its lease and its key expires with it (its last record also stops counting
 * once it is two periods old); one that stops cleanly revokes it at once.
 * The store's own watch ignores these keys (etcd-layout.ts parses only s/ and b/).
 * A separate etcd client, so the store's write queue never waits on it.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import { Etcd3, type IWatchResponse, type Lease, type Watcher } from 'etcd3';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type { LoadShare, ReplicaLoad } from '../../domain/load/load-aggregate.js';
import { CodedError } from '../../domain/errors.js';

export interface EtcdLoadShareOptions {
  readonly endpoints: readonly string[];
  /** The store's key prefix ("/canopy/"): the records live under <prefix>load/. */
  readonly prefix: string;
  /** The report interval: the lease lives three of them (at least 2 s). */
  readonly intervalMs: number;
  /** This replica's name in etcd (default: host name, process id and a random suffix). */
  readonly replica?: string;
}

const DEADLINE_MS = 1000;

export class EtcdLoadShare implements LoadShare {
  private readonly records = new Map<string, ReplicaLoad>();
  private lease: Lease | undefined;
  private watcher: Watcher | undefined;
  private closed = false;
  private readonly dir: string;

  private constructor(
    private readonly client: Etcd3,
    prefix: string,
    readonly replica: string,
    private readonly ttlSeconds: number,
  ) {
    this.dir = `${prefix}load/`;
  }

  static async open(opts: EtcdLoadShareOptions): Promise<EtcdLoadShare> {
    const client = new Etcd3({
      hosts: opts.endpoints.map((h) => (h.includes('://') ? h : `http://${h}`)),
      dialTimeout: 5000,
    });
    const replica = opts.replica ?? defaultReplicaName();
    const share = new EtcdLoadShare(client, opts.prefix, replica, Math.max(2, Math.ceil((3 * opts.intervalMs) / 1000)));
    try {
      await share.follow();
    } catch (err) {
      client.close();
      throw new CodedError('CANOPY_PEER_FAILED', `cannot watch the replicas' load in etcd: ${(err as Error).message}`);
    }
    return share;
  }

  get key(): string {
    return this.dir + this.replica;
  }

  async publish(load: ReplicaLoad): Promise<void> {
    if (this.closed) return;
    this.records.set(this.replica, load);
    if (!this.lease || this.lease.revoked()) {
      const lease = this.client.lease(this.ttlSeconds);
      // A lost lease (etcd unreachable past the TTL) is granted anew on the next publish.
      lease.on('lost', () => {
        if (this.lease === lease) this.lease = undefined;
      });
      this.lease = lease;
    }
    await this.lease
      .put(this.key)
      .value(JSON.stringify(load))
      .options({ deadline: Date.now() + DEADLINE_MS })
      .exec();
  }

  others(): readonly ReplicaLoad[] {
    return [...this.records.values()].filter((r) => r.replica !== this.replica);
  }

  async close(): Promise<void> {
    this.closed = true;
    // Bounded: an unreachable etcd must not hold up shutdown (the lease then expires by itself).
    const bounded = (p: Promise<unknown> | undefined) =>
      Promise.race([p?.catch(() => {}), new Promise((r) => setTimeout(r, DEADLINE_MS).unref())]);
    await bounded(this.watcher?.cancel());
    // Revoking deletes the key now: the others stop counting this replica's clients at once.
    await bounded(this.lease?.revoke({ deadline: Date.now() + DEADLINE_MS }));
    this.client.close();
  }

  /** Reads every record, then watches from that revision; starts over after a cancelled watch. */
  private async follow(): Promise<void> {
    const res = await this.client.getAll().prefix(this.dir).exec();
    this.records.clear();
    for (const kv of res.kvs) this.accept(kv.key.toString(), kv.value.toString());
    this.watcher = await this.client
      .watch()
      .prefix(this.dir)
      .startRevision(String(Number(res.header.revision) + 1))
      .create();
    this.watcher.on('data', (r: IWatchResponse) => {
      for (const e of r.events) {
        const key = e.kv.key.toString();
        if (e.type === 'Delete') this.records.delete(key.slice(this.dir.length));
        else this.accept(key, e.kv.value.toString());
      }
    });
    // A cancelled watch (history compacted after a long partition) never resumes by itself.
    this.watcher.on('error', () => this.resync());
  }

  private resync(): void {
    setTimeout(() => {
      if (!this.closed) this.follow().catch(() => this.resync());
    }, 1000).unref();
  }

  private accept(key: string, value: string): void {
    const name = key.slice(this.dir.length);
    let parsed: unknown;
    try {
      parsed = JSON.parse(value);
    } catch {
      return;
    }
    // A record another version wrote in a shape this one does not read is left out, not trusted.
    if (validRecord()(parsed) && parsed.replica === name) this.records.set(name, parsed);
  }
}

function defaultReplicaName(): string {
  const host = os.hostname().replace(/[^A-Za-z0-9.-]/g, '_');
  return `${host}-${process.pid}-${randomBytes(3).toString('hex')}`;
}

const path = { type: 'array', items: { type: 'string' } } as const;
const rps = { type: 'number', minimum: 0 } as const;
let validate: ValidateFunction<ReplicaLoad> | undefined;
function validRecord(): ValidateFunction<ReplicaLoad> {
  validate ??= new Ajv({ allErrors: false }).compile<ReplicaLoad>({
    type: 'object',
    required: ['replica', 'period', 'at', 'intervalMs', 'since', 'services'],
    properties: {
      replica: { type: 'string' },
      period: { type: 'integer' },
      at: { type: 'number' },
      intervalMs: { type: 'number' },
      since: { type: 'integer' },
      services: {
        type: 'array',
        items: {
          type: 'object',
          required: ['service', 'scopes', 'offered', 'landed'],
          properties: {
            service: { type: 'string' },
            scopes: path,
            offered: {
              type: 'array',
              items: { type: 'object', required: ['path', 'rps'], properties: { path, rps } },
            },
            landed: { type: 'object', additionalProperties: rps },
            plan: {
              type: 'object',
              required: ['nodes', 'drained'],
              properties: {
                drained: path,
                nodes: {
                  type: 'array',
                  items: {
                    type: 'object',
                    required: ['node', 'shares'],
                    properties: {
                      node: path,
                      shares: {
                        type: 'array',
                        items: {
                          type: 'object',
                          required: ['leaf', 'share'],
                          properties: { leaf: path, share: { type: 'number', minimum: 0, maximum: 1 } },
                        },
                      },
                    },
                  },
                },
              },
            },
          },
        },
      },
    },
  });
  return validate;
}
