/**
 * The load-aware plans kept in the store (Store.putState, under `load-plan`), so that a restarted
 * replica serves the weights it served before its stop or crash instead of the plain failover CLA
 * (domain/load/load-plan-record.ts). Read once at start, validated, and taken up by the controller
 * before any client connects; written after each interval whose plans changed, one write at a time
 * (a newer plan waits for the write in flight, then replaces it).
 */
import type { Logger } from 'pino';
import { formatFieldErrors } from '../domain/errors.js';
import { parsePlanRecord, type PlanRecord } from '../domain/load/load-plan-record.js';
import type { LoadController } from '../sessions/load-controller.js';
import type { Store } from '../store/store.js';

export const LOAD_PLAN_KEY = 'load-plan';

/** Serves the kept plans of the services the mesh holds; a record that fails validation is logged and not used. */
export async function restoreLoadPlans(store: Store, controller: LoadController, logger: Logger): Promise<void> {
  let text: string | undefined;
  try {
    text = await store.getState(LOAD_PLAN_KEY);
  } catch (err) {
    logger.warn({ err }, 'could not read the kept load-aware plans: planning starts from the plain weights');
    return;
  }
  if (text === undefined) return;
  const parsed = parsePlanRecord(text);
  if (!parsed.ok) {
    logger.warn(
      { store: store.description, errors: parsed.errors.slice(0, 10) },
      `the kept load-aware plans are not valid, not used: ${formatFieldErrors(parsed.errors.slice(0, 3))}`,
    );
    return;
  }
  const services = controller.restore(parsed.value);
  if (services.length > 0)
    logger.info(
      { services: services.slice(0, 20), count: services.length, at: parsed.value.at },
      'load-aware plans restored',
    );
}

export class LoadPlanKeeper {
  private written = '';
  private writing: Promise<void> | undefined;
  private again = false;
  private failing = false;

  constructor(
    private readonly store: Store,
    private readonly planRecord: () => PlanRecord,
    private readonly logger: Logger,
  ) {}

  /** After an interval's plan: writes the plans if they changed. */
  planned(): void {
    if (this.writing) {
      this.again = true;
      return;
    }
    const record = this.planRecord();
    const key = JSON.stringify(record.services);
    if (key === this.written) return;
    this.writing = this.store
      .putState(LOAD_PLAN_KEY, JSON.stringify(record))
      .then(
        () => {
          this.written = key;
          if (this.failing) this.logger.info({}, 'the load-aware plans are kept in the store again');
          this.failing = false;
        },
        (err: unknown) => {
          // Logged once per outage, not once per interval.
          if (!this.failing) this.logger.warn({ err }, 'could not keep the load-aware plans in the store');
          this.failing = true;
        },
      )
      .finally(() => {
        this.writing = undefined;
        if (this.again) {
          this.again = false;
          this.planned();
        }
      });
  }

  /** Waits for the write in flight (before the store closes). */
  async settled(): Promise<void> {
    this.again = false;
    while (this.writing) await this.writing;
  }
}
