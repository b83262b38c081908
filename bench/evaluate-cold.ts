/**
 * The cache-cold rows of `evaluate/cold` (`npm run bench -- --only
 * evaluate`, bench/README.md): every recipient read from the store, through
 * the worker and then the store's bulk reads alone.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { MongoClient } from 'mongodb';
import type { PushRulesClient } from '../src/client/push-rules-client.js';
import type { EvaluationRecipient } from '../src/evaluation/evaluation-input.js';
import { MongoPushStore } from '../src/store/mongo-push-store.js';
import { BIG, type EvaluateContext } from './support/evaluate-context.js';
import {
  counterDelta,
  evaluateEvent,
  evaluateRoom,
  recipientsOf,
  scrapeEvaluateCounters,
} from './support/evaluate-load.js';
import { COLD_P99_TARGET_MS } from './support/evaluate-report.js';
import { latencyRow, logRow, type LatencyRow } from './support/latency-row.js';
import type { Child } from './support/processes.js';
import { seedRulesetDocuments } from './support/workloads.js';

/** A worker's `evaluate.maxStalenessMs` by default: entries read longer ago are read again. */
const MAX_STALENESS_MS = 1000;
export const CHUNK = 1000;
export const LOAD_CONCURRENCY = 4;

const log = (line: string) => {
  console.error(line);
};

/** Each request after a pause, its recipients all read from the store (checked on the worker's counters). */
async function coldLatencies(
  client: PushRulesClient,
  port: number,
  samples: number,
  recipientsFor: (i: number) => readonly EvaluationRecipient[],
  pauseMs: number,
): Promise<{ latencies: number[]; errors: number; excluded: number }> {
  const latencies: number[] = [];
  const counted = { errors: 0, excluded: 0 };
  for (let i = 0; i <= samples; i += 1) {
    await sleep(pauseMs);
    const recipients = recipientsFor(i);
    const before = await scrapeEvaluateCounters(port);
    const begin = performance.now();
    let failed = false;
    try {
      await client.evaluate(evaluateEvent(i), evaluateRoom(recipients.length), recipients);
    } catch {
      failed = true;
    }
    const elapsed = performance.now() - begin;
    const delta = counterDelta(before, await scrapeEvaluateCounters(port));
    // The first request warms the code paths.
    if (i === 0) continue;
    if (failed) counted.errors += 1;
    else if (delta.hits !== 0 || delta.misses !== recipients.length) counted.excluded += 1;
    else latencies.push(elapsed);
  }
  return { latencies, ...counted };
}

export async function coldRows(
  client: PushRulesClient,
  w: { child: Child; port: number; db: ReturnType<MongoClient['db']> },
  ctx: EvaluateContext,
  stop: (child: Child) => Promise<void>,
): Promise<LatencyRow[]> {
  const rows: LatencyRow[] = [];
  try {
    const stored = recipientsOf('evalstored', BIG);
    log(`evaluate/cold: seeding ${BIG.toLocaleString('en-US')} stored rulesets`);
    await seedRulesetDocuments(
      w.db,
      stored.map((r) => r.user_id),
    );
    const fresh = (i: number) => recipientsOf(`evalnew${i}`, BIG);
    const pause = MAX_STALENESS_MS + 200;
    const storedRun = await coldLatencies(client, w.port, ctx.coldSamples, () => stored, pause);
    rows.push(
      latencyRow(
        {
          id: `evaluate/cold/stored/${BIG}`,
          what: 'cache cold, stored rules',
          recipients: BIG,
          ...without(storedRun),
          targetP99Ms: COLD_P99_TARGET_MS,
        },
        storedRun.latencies,
      ),
    );
    logRow(rows[rows.length - 1]);
    const freshRun = await coldLatencies(client, w.port, ctx.coldSamples, fresh, 200);
    rows.push(
      latencyRow(
        {
          id: `evaluate/cold/no-doc/${BIG}`,
          what: 'cache cold, no stored rules',
          recipients: BIG,
          ...without(freshRun),
          targetP99Ms: COLD_P99_TARGET_MS,
        },
        freshRun.latencies,
      ),
    );
    logRow(rows[rows.length - 1]);
  } finally {
    await stop(w.child);
  }
  // The store's share, without the worker: the same bulk reads from here.
  const store = new MongoPushStore(w.db, { accountDataCollection: 'account_data', pushersCollection: 'pushers' });
  const accountData = w.db.collection<{ _id: string }>('account_data');
  const storeSamples = Math.max(3, Math.ceil(ctx.coldSamples / 2));
  const storeRow = async (
    id: string,
    what: string,
    idsFor: (i: number) => readonly string[],
    read: (chunk: string[]) => Promise<unknown>,
  ) => {
    const latencies: number[] = [];
    for (let i = 0; i <= storeSamples; i += 1) {
      const ids = idsFor(i);
      const chunks: string[][] = [];
      for (let start = 0; start < ids.length; start += CHUNK) chunks.push(ids.slice(start, start + CHUNK));
      const begin = performance.now();
      await inBatches(chunks, LOAD_CONCURRENCY, read);
      if (i > 0) latencies.push(performance.now() - begin);
    }
    const row = latencyRow({ id, what, recipients: BIG }, latencies);
    logRow(row);
    rows.push(row);
  };
  const storedIds = recipientsOf('evalstored', BIG).map((r) => r.user_id);
  await storeRow(
    `store/loadMany/stored/${BIG}`,
    'store: loadManyPushRules, stored rules',
    () => storedIds,
    async (chunk) => store.loadManyPushRules(chunk),
  );
  await storeRow(
    `store/loadMany/no-doc/${BIG}`,
    'store: loadManyPushRules, no stored rules',
    (i) => recipientsOf(`evalstorenew${i}`, BIG).map((r) => r.user_id),
    async (chunk) => store.loadManyPushRules(chunk),
  );
  await storeRow(
    `store/_id-in/stored/${BIG}`,
    'store, diagnostic: the same read without `push_rules: {$exists: true}`',
    () => storedIds,
    async (chunk) => accountData.find({ _id: { $in: chunk } }, { projection: { version: 1, push_rules: 1 } }).toArray(),
  );
  return rows;
}

const without = (run: { errors: number; excluded: number }) => ({ errors: run.errors, excluded: run.excluded });

/** Runs `work` on every item, at most `concurrency` at once (as EvaluateService loads chunks). */
async function inBatches<T>(
  items: readonly T[],
  concurrency: number,
  work: (item: T) => Promise<unknown>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) {
        const item = items[next] as T;
        next += 1;
        await work(item);
      }
    }),
  );
}
