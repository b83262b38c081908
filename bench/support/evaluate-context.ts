/** What the scenarios of the evaluate part (bench/evaluate-scenarios.ts and its parts) share: their context, queues and sizes. */
import type { WorkerPartContext } from './part-context.js';

export interface EvaluateContext extends WorkerPartContext {
  readonly warmupMs: number;
  readonly measureMs: number;
  /** Minimum repetitions per row, ours and Synapse's. */
  readonly reps: number;
  readonly synapseRows?: readonly string[];
  readonly coldSamples: number;
  /** Take heap snapshots even when the memory target is met. */
  readonly heapProfile: boolean;
  /** Whether a part (`evaluate/kernel`, `evaluate/latency`, `evaluate/isolation`, `evaluate/cold`, `evaluate/mentions`, `evaluate/coalesced`, `evaluate/memory`) runs. */
  readonly selected: (part: string) => boolean;
}

export const BIG = 10_000;
export const TIMEOUT_MS = 60_000;

export const queueOf = (ctx: EvaluateContext) => `bench.push.rpc.${ctx.id}.e`;
export const evaluateQueueOf = (ctx: EvaluateContext) => `${queueOf(ctx)}.evaluate`;
