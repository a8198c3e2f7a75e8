/**
 * The node agent's Prometheus metrics: what it applied and NACKed, and what
 * the kernel program and the BPF maps hold, mirrored at scrape time.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Datapath } from './datapath.js';
import type { SpillTable } from './spill-table.js';

export interface AgentMetrics {
  readonly registry: Registry;
  readonly applied: Counter;
  readonly nacked: Counter;
  readonly applySeconds: Histogram;
  readonly decodedTotal: Counter;
  readonly reusedTotal: Counter;
  readonly connected: Gauge;
}

export function agentMetrics(datapath: Datapath, spill: SpillTable | undefined): AgentMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const metrics: AgentMetrics = {
    registry,
    applied: new Counter({
      name: 'canopy_agent_tree_versions_applied_total',
      help: 'Tree versions loaded into the maps and ACKed',
      registers,
    }),
    nacked: new Counter({
      name: 'canopy_agent_tree_nacks_total',
      help: 'Tree versions that could not be loaded (NACKed)',
      registers,
    }),
    applySeconds: new Histogram({
      name: 'canopy_agent_apply_seconds',
      help: 'Time to load one tree version into the maps',
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    }),
    decodedTotal: new Counter({
      name: 'canopy_agent_tree_resources_decoded_total',
      help: 'Tree resources decoded (new or changed bytes)',
      registers,
    }),
    reusedTotal: new Counter({
      name: 'canopy_agent_tree_resources_reused_total',
      help: "Tree resources whose bytes equal the last version's: not decoded again",
      registers,
    }),
    connected: new Gauge({ name: 'canopy_agent_connected', help: '1 while the ADS stream is up', registers }),
  };
  kernelMetrics(registers, datapath, spill);
  return metrics;
}

/** Read from the maps at scrape time. */
function kernelMetrics(registers: Registry[], datapath: Datapath, spill: SpillTable | undefined): void {
  new Gauge({
    name: 'canopy_agent_map_entries',
    help: 'Entries the agent holds in each BPF map',
    labelNames: ['map'],
    registers,
    collect() {
      const e = datapath.entries();
      for (const [map, n] of Object.entries(e)) this.set({ map }, n);
    },
  });
  // Monotonic counts kept by the kernel program: counters (rate()/increase() work), mirrored at scrape time.
  new Counter({
    name: 'canopy_agent_kernel_connects_total',
    help: 'connect() calls to a service VIP seen by the kernel program, by outcome (since the maps were created)',
    labelNames: ['outcome'],
    registers,
    collect() {
      const s = datapath.stats();
      this.reset();
      this.inc({ outcome: 'rewritten' }, Number(s.rewritten));
      this.inc({ outcome: 'refused' }, Number(s.refused));
    },
  });
  new Counter({
    name: 'canopy_agent_kernel_map_lookups_total',
    help: 'BPF map lookups made by the kernel program for VIP connects (since the maps were created)',
    registers,
    collect() {
      this.reset();
      this.inc(Number(datapath.stats().lookups));
    },
  });
  // Load-aware services: connects counted by the kernel per target locality (what the LRS reports carry).
  new Counter({
    name: 'canopy_agent_load_connects_total',
    help: 'connect() calls to load-aware services counted by the kernel, by service and the locality picked (since each counter was created)',
    labelNames: ['service', 'locality'],
    registers,
    collect() {
      this.reset();
      for (const c of spill?.counts() ?? []) {
        if (!c.service || !c.locality) continue;
        const l = c.locality;
        this.inc({ service: c.service, locality: [l.region, l.zone, l.subzone].join('/') }, Number(c.connects));
      }
    },
  });
}
