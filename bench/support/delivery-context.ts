/** What the delivery part of the bench (bench/delivery.ts and its parts) reads of the run: its context and the parts selected. */
import type { WorkerPartContext } from './part-context.js';

export interface DeliveryContext extends WorkerPartContext {
  readonly warmupMs: number;
  readonly measureMs: number;
  /** Measured rounds per fan-out scenario, after one unmeasured. */
  readonly rounds: number;
  /** How long the gateway is down in the outage scenario. */
  readonly outageSeconds: number;
  /** Devices each notification of the outage scenario goes to. */
  readonly outageRoom: number;
  /** Whether a part (`delivery/bare`, `/raw`, `/fanout`, `/slow`, `/batched`, `/outage`, `/isolation`, `/roles`) runs. */
  readonly selected: (part: string) => boolean;
}
