/**
 * Where a request is too small to be worth an evaluation thread (issue 35):
 * one `evaluate` body at a time (c = 1), warm caches, recipients on the
 * server-default rules, timed from the raw body to the reply's bytes as the
 * worker publishes them, two ways:
 *
 * - on the event loop: `evaluateInProcess` (parse, cache, evaluate), then
 *   the reply encoded;
 * - through the pool: `EvaluatePool.run` with one real thread (the body
 *   copied and posted, the thread's own parse, cache, evaluation and
 *   encoding, the bytes posted back).
 *
 * Each with the CPU time of the event loop's thread per request
 * (`process.threadCpuUsage`): what it costs the reads and writes served
 * beside it. The hand-off is the difference of the medians; a request is
 * worth the thread once evaluating it on the event loop costs more than the
 * hand-off. The figures go to docs/configuration.md's
 * `evaluate.inlineMaxRecipients` and docs/architecture.md.
 *
 *   node --import tsx bench/evaluate-handoff.ts [--samples N] [--sizes 1,2,5,...] [--pad CHARS]
 *
 * Needs the MongoDB stand-in (MONGODB_URL, else 127.0.0.1:27017): the
 * recipients are read once from an empty database of its own, then cached.
 */
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { MongoClient } from 'mongodb';
import { evaluateInProcess, evaluateLimits, type EvaluateRunner } from '../src/consumer/evaluate-queue.js';
import { encodeReplyBytes } from '../src/contract/reply.js';
import type { CompiledRuleset } from '../src/evaluation/compiled-ruleset.js';
import { EvaluatePool } from '../src/evaluate-threads/evaluate-pool.js';
import { createLogger } from '../src/logging/logger.js';
import { EvaluateService } from '../src/service/evaluate-service.js';
import { RulesetCache } from '../src/service/ruleset-cache.js';
import { MongoPushStore } from '../src/store/mongo-push-store.js';
import { DEFAULT_CONFIG } from '../test/support/default-config.js';
import { evaluateEvent, evaluateRoom, recipientsOf } from './support/evaluate-load.js';

const { values } = parseArgs({
  options: {
    samples: { type: 'string', default: '400' },
    sizes: { type: 'string', default: '1,2,5,10,20,30,50,100,200,500' },
    /** Characters added to the event's body: the parse's share of the cost, apart from the recipients'. */
    pad: { type: 'string', default: '0' },
  },
});
const samples = Number(values.samples);
const sizes = values.sizes.split(',').map(Number);
const pad = 'x'.repeat(Number(values.pad));
const ROUNDS = 5;

const mongoUrl = process.env['MONGODB_URL'] ?? 'mongodb://127.0.0.1:27017';
const database = `bench_handoff_${process.pid}`;
// Never stale during the run: every sample after the first is served from the cache.
const evaluate = { ...DEFAULT_CONFIG.evaluate, maxStalenessMs: 3_600_000 };
const mongodb = { ...DEFAULT_CONFIG.mongodb, url: mongoUrl, database };

function body(recipients: number, i: number): Uint8Array {
  const event = evaluateEvent(i);
  const request = {
    op: 'evaluate',
    event: { ...event, content: { ...event.content, body: `${event.content['body'] as string}${pad}` } },
    room: evaluateRoom(recipients),
    recipients: recipientsOf('m', recipients),
    compact: true,
  };
  return Buffer.from(JSON.stringify(request));
}

/** Each request's time in µs, and the CPU time of this (the event loop's) thread for all of them, in µs. */
async function timed(run: EvaluateRunner, bodies: readonly Uint8Array[], times: number[]): Promise<number> {
  const cpu = process.threadCpuUsage();
  for (const one of bodies) {
    const started = performance.now();
    const outcome = await run(one, { deadline: undefined });
    encodeReplyBytes(outcome.reply);
    times.push((performance.now() - started) * 1000);
    if (!outcome.reply.ok) throw new Error(`evaluate failed: ${JSON.stringify(outcome.reply)}`);
  }
  const used = process.threadCpuUsage(cpu);
  return used.user + used.system;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

const mongo = await new MongoClient(mongoUrl).connect();
const store = new MongoPushStore(mongo.db(database), {
  accountDataCollection: mongodb.accountDataCollection,
  pushersCollection: mongodb.pushersCollection,
});
const cache = new RulesetCache<CompiledRuleset>({
  maxEntries: evaluate.cacheMaxEntries,
  maxBytes: evaluate.cacheMaxBytes,
  maxStalenessMs: evaluate.maxStalenessMs,
});
const inline = evaluateInProcess(
  new EvaluateService(store, { cache, loadChunkSize: evaluate.loadChunkSize, sliceMs: evaluate.sliceMs }),
  evaluateLimits(evaluate, DEFAULT_CONFIG.limits.maxJsonDepth),
);
const pool = new EvaluatePool({
  threads: 1,
  data: {
    evaluate,
    mongodb,
    maxJsonDepth: DEFAULT_CONFIG.limits.maxJsonDepth,
    cacheMaxEntries: evaluate.cacheMaxEntries,
    cacheMaxBytes: evaluate.cacheMaxBytes,
  },
  logger: createLogger('silent'),
});

try {
  console.log(
    `evaluate hand-off, c = 1, ${ROUNDS} × ${samples} requests per size, default rules, warm caches (median µs per request)`,
  );
  console.log(
    'recipients | body bytes | on the event loop: median, its CPU | via a thread: median, event loop CPU | hand-off',
  );
  for (const recipients of sizes) {
    const count = Math.max(20, Math.min(samples, Math.ceil((samples * 20) / recipients)));
    const bodies = Array.from({ length: count }, (_, i) => body(recipients, i));
    // Unmeasured first: the store reads, and the compiler's warm-up.
    await timed(inline, bodies, []);
    await timed(pool.run, bodies, []);
    // Rounds alternated, so that a machine that slows down mid-run slows both.
    const inlineTimes: number[] = [];
    const poolTimes: number[] = [];
    let inlineCpu = 0;
    let poolCpu = 0;
    for (let round = 0; round < ROUNDS; round += 1) {
      inlineCpu += await timed(inline, bodies, inlineTimes);
      poolCpu += await timed(pool.run, bodies, poolTimes);
    }
    const requests = count * ROUNDS;
    const onLoop = median(inlineTimes);
    const viaPool = median(poolTimes);
    console.log(
      [
        String(recipients).padStart(10),
        String(bodies[0]?.byteLength ?? 0).padStart(10),
        `${onLoop.toFixed(1).padStart(6)}, ${(inlineCpu / requests).toFixed(1).padStart(6)}`.padStart(34),
        `${viaPool.toFixed(1).padStart(6)}, ${(poolCpu / requests).toFixed(1).padStart(6)}`.padStart(36),
        (viaPool - onLoop).toFixed(1).padStart(8),
      ].join(' | '),
    );
  }
} finally {
  await pool.close();
  await mongo.db(database).dropDatabase();
  await mongo.close();
}
