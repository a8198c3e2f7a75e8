/**
 * Edits of the config file while the server runs: seen (config-watch.ts),
 * parsed, and applied to the store under the ownership rule
 * (file-source.ts), or refused with the running config kept. Each step is
 * logged, so an operator can tell an edit that is waiting from one that was
 * refused, and why.
 */
import type { Logger } from 'pino';
import { formatFieldErrors } from '../domain/errors.js';
import type { CanopyConfig } from '../domain/spec.js';
import { configKey } from './config-record.js';
import { recordConfig } from './config-start.js';
import { configFormatOf } from './config-text.js';
import { DEFAULT_SETTLE_MS, watchConfigFile, type ConfigWatchOptions } from './config-watch.js';
import { describeMarks, fileHealthOf, type FileHealth } from './file-health.js';
import { applyFileServices, type FileApplyResult } from './file-source.js';
import type { Store } from '../store/store.js';

export type ReloadOutcome = 'success' | 'invalid' | 'store_error';

export interface ConfigReloadDeps {
  readonly file: string;
  readonly store: Store;
  readonly logger: Logger;
  /** The data directory that records the applied file (config-record.ts), if any. */
  readonly recordDir?: string;
  /** The digest of the content the start applied: the file is not read again now. */
  readonly initialDigest?: string;
  /** Told every reload's outcome (canopy_config_reloads_total). */
  readonly loads: { loaded(outcome: ReloadOutcome): void };
  /**
   * Asked before a parsed edit is applied: a reason to refuse it (the running config is then kept), or
   * undefined to apply it. `canopy serve` on etcd refuses a file other live replicas do not apply
   * (replica-files.ts).
   */
  readonly refuse?: (digest: string) => Promise<string | undefined>;
  /** Told the digest of each file content applied. */
  readonly applied?: (digest: string) => Promise<void>;
  readonly watch?: ConfigWatchOptions;
  /** The health marks of the file's entries as the start applied them, when it parsed the file. */
  readonly fileHealth?: FileHealth;
}

/** Watches `deps.file` and applies each valid edit; returns a function that stops watching. */
export function reloadConfigOnEdit(deps: ConfigReloadDeps): () => void {
  const { file, logger } = deps;
  const last: { health?: FileHealth } = deps.fileHealth ? { health: deps.fileHealth } : {};
  const log = logger.child({ file });
  return watchConfigFile(
    file,
    {
      onSeen: (via, waitMs) =>
        log.info(
          { via, settleMs: deps.watch?.settleMs ?? DEFAULT_SETTLE_MS, readWithinMs: waitMs },
          'config file change seen: reading it once it is quiet',
        ),
      onParsing: (bytes) => log.info({ bytes }, 'config file changed: parsing'),
      onUnchanged: () => log.info({}, 'config file read: content unchanged, nothing to apply'),
      onUnreadable: (why) => log.warn({ why }, `config file unreadable, running config kept: ${why}`),
      onWatchError: (err) => log.warn({ err }, 'config directory watch failed: edits are seen by polling only'),
      onInvalid: (errors, waitedMs) => {
        deps.loads.loaded('invalid');
        log.error({ errors, waitedMs }, `config edit rejected, running config kept: ${formatFieldErrors(errors)}`);
      },
      onValid: (config, digest, waitedMs) => {
        log.info({ services: config.services.length, waitedMs }, 'config file parsed: applying');
        void apply(deps, config, digest, waitedMs, last);
      },
    },
    { ...deps.watch, ...(deps.initialDigest !== undefined ? { initialDigest: deps.initialDigest } : {}) },
  );
}

async function apply(
  deps: ConfigReloadDeps,
  config: CanopyConfig,
  digest: string,
  waitedMs: number,
  last: { health?: FileHealth },
): Promise<void> {
  const log = deps.logger.child({ file: deps.file });
  try {
    const why = await deps.refuse?.(digest);
    if (why !== undefined) {
      deps.loads.loaded('invalid');
      log.error({ digest, waitedMs }, `config edit refused, running config kept: ${why}`);
      return;
    }
    const applied = await applyFileServices(deps.store, config.services, last.health);
    last.health = fileHealthOf(config.services);
    logHealthMarks(log, applied);
    if (deps.recordDir !== undefined) {
      const key = configKey(digest, configFormatOf(deps.file));
      await recordConfig(deps.store, deps.recordDir, key, config);
    }
    await deps.applied?.(digest);
    deps.loads.loaded('success');
    log.info(
      {
        replaced: applied.replaced.length,
        deleted: applied.deleted.length,
        unchanged: applied.unchanged,
        waitedMs,
      },
      'config reloaded',
    );
  } catch (err) {
    deps.loads.loaded('store_error');
    log.error({ err }, 'config reload failed to write the store');
  }
}

/** Health set through the API that a load kept over the file, or replaced with the file's: at warn level, named. */
export function logHealthMarks(log: Logger, applied: FileApplyResult): void {
  const { kept = [], reset = [] } = applied.health ?? {};
  if (kept.length > 0)
    log.warn(
      { endpoints: kept.length },
      `config file edit: kept the health set through the API on ${kept.length} endpoint(s) the file lists as ` +
        `before: ${describeMarks(kept)}; \`canopy health SERVICE ENDPOINT healthy\` clears a mark`,
    );
  if (reset.length > 0)
    log.warn(
      { endpoints: reset.length },
      `config file applied: the file's health replaced what the store held on ${reset.length} endpoint(s), ` +
        `set through the API or by an earlier version of the file: ${describeMarks(reset)}`,
    );
}
