/**
 * Store.getState/putState on etcd: small values kept for Canopy itself (the load-aware plan,
 * serve/load-keep.ts), one row each under `<prefix>x/<key>`. They sit beside the services' layout
 * (etcd-layout.ts), not in it: no service revision guards them, last write wins, and the watch passes
 * them over (EtcdLayout.parseKey knows only `s/` and `b/`).
 */
import type { Etcd3 } from 'etcd3';

export class EtcdStateRows {
  constructor(
    private readonly client: Etcd3,
    private readonly prefix: string,
    /** How long one read or write may wait for etcd to answer. */
    private readonly attemptMs: number,
  ) {}

  key(key: string): string {
    return `${this.prefix}x/${key}`;
  }

  async get(key: string): Promise<string | undefined> {
    const value = await this.client
      .get(this.key(key))
      .options({ deadline: Date.now() + this.attemptMs })
      .string();
    return value ?? undefined;
  }

  async put(key: string, value: string): Promise<void> {
    await this.client
      .put(this.key(key))
      .value(value)
      .options({ deadline: Date.now() + this.attemptMs })
      .exec();
  }
}
