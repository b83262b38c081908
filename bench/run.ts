/**
 * `npm run bench`: the worker against the limits of the broker and the store
 * on this machine, every figure next to a baseline measured in the same run.
 * See bench/README.md for the scenarios and how to read the table.
 *
 *   --seconds N   measured seconds per scenario (3; `--long`: 10)
 *   --warmup N    unmeasured seconds before each (1; `--long`: 2)
 *   --only RE     run only scenarios whose id matches (the broker and store
 *                 baselines run with any other scenario); `--only evaluate`
 *                 runs only the evaluate part (issue 14), whose parts are
 *                 evaluate/kernel, evaluate/latency, evaluate/isolation,
 *                 evaluate/cold, evaluate/mentions, evaluate/coalesced and evaluate/memory
 *                 (issue 23's table: `--only 'evaluate/(latency|isolation|cold|mentions)'`)
 *   --profile     workers write V8 CPU profiles to bench/results/profiles/
 *   --reps N      evaluate kernel and Synapse: at least N samples per row (5)
 *   --synapse-rows a,b   Synapse's rows to run (all; the others show "not measured")
 *   --cold-samples N     evaluate requests timed per cold row (6)
 *   --heap-profile       heap snapshots of the evaluate cache even when its memory target is met
 *
 * `--only failover` runs only the failover row (issue 16): writes over 30 s
 * on the local three-node cluster (`scripts/services.sh cluster-up`, started
 * if it is not up), its request queue's leader killed at second 10.
 *
 * `--only import` runs only the import row (issue 25): a generated Synapse
 * SQLite file of `--import-users` users (100,000), imported by the store's
 * own bulk writes and by the whole importer.
 *
 * `--only clients` runs only the clients part (issue 41): the TypeScript,
 * Python and Rust clients' `get_pushrules` and 100-recipient `evaluate` at
 * c = 1 and 64 against one worker, next to the broker's echo; its parts are
 * clients/get_pushrules and clients/evaluate.
 *
 * `--only delivery` runs only the delivery part (issue 22), whose parts are
 * delivery/raw, delivery/fanout, delivery/slow, delivery/batched,
 * delivery/outage, delivery/isolation and delivery/roles:
 *   --delivery-outage-seconds N   how long the gateway fails in delivery/outage (60)
 *   --delivery-outage-room N      devices each notification of delivery/outage goes to (all 2,000)
 *   --delivery-rounds N           measured fan-outs per scenario, after one unmeasured (3)
 *
 * `--only synapse` runs only the Synapse part (issue 40): Synapse 1.163.2
 * alone against the same Synapse with the module and three workers, in a
 * room of `--synapse-members` (1,000), `--synapse-sends` messages one after
 * the other (20) and `--synapse-batch` at once (10).
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as os from 'node:os';
import { parseArgs } from 'node:util';
import amqp from 'amqplib';
import { MongoClient } from 'mongodb';
import { PushRulesClient } from '../src/client/push-rules-client.js';
import { RpcClient } from '../src/client/rpc-client.js';
import { loadConfig } from '../src/config/load-config.js';
import { partitionQueue } from '../src/consumer/notify-queue.js';
import { MongoPushStore } from '../src/store/mongo-push-store.js';
import { runClosedLoop, type LoopResult } from './support/closed-loop.js';
import { runHttpLoad } from './support/http-load.js';
import { findPid, ROOT, startChild, startEchoConsumer, startWorker, type Child } from './support/processes.js';
import { peakRssBytes, rssBytes, startCpuWatch } from './support/proc-stats.js';
import {
  checkTargets,
  markdown,
  targetsTable,
  type Group,
  type RssPeak,
  type ScenarioResult,
} from './support/report.js';
import { checkEvaluateTargets, evaluateMarkdown, type EvaluateResults } from './support/evaluate-report.js';
import { runEvaluateScenarios } from './evaluate-scenarios.js';
import { checkFailoverTargets, failoverMarkdown, runFailover, type FailoverResult } from './failover.js';
import { checkImportTargets, importMarkdown, runImportBench, type ImportBenchResult } from './support/import-load.js';
import { runDeliveryScenarios } from './delivery.js';
import { runClientScenarios } from './clients.js';
import { checkClientTargets, clientsMarkdown, type ClientsResults } from './support/clients-report.js';
import { checkDeliveryTargets, deliveryMarkdown, type DeliveryResults } from './support/delivery-report.js';
import { runSynapseBench } from './synapse.js';
import { checkSynapseTargets, synapseMarkdown, type SynapseBenchResult } from './support/synapse-report.js';
import {
  echoCall,
  mixedCall,
  nextWrite,
  seedUsers,
  storeCall,
  STORE_OPS,
  UserPool,
  WORKER_OPS,
  workerCall,
  type Call,
  type StoreOp,
  type WorkerOp,
} from './support/workloads.js';

const { values: flags } = parseArgs({
  options: {
    seconds: { type: 'string' },
    warmup: { type: 'string' },
    long: { type: 'boolean', default: false },
    only: { type: 'string' },
    profile: { type: 'boolean', default: false },
    reps: { type: 'string' },
    'synapse-rows': { type: 'string' },
    'cold-samples': { type: 'string' },
    'heap-profile': { type: 'boolean', default: false },
    'import-users': { type: 'string' },
    'delivery-outage-seconds': { type: 'string' },
    'delivery-outage-room': { type: 'string' },
    'delivery-rounds': { type: 'string' },
    'synapse-members': { type: 'string' },
    'synapse-sends': { type: 'string' },
    'synapse-batch': { type: 'string' },
  },
});
const MEASURE_MS = Number(flags.seconds ?? (flags.long ? 10 : 3)) * 1000;
const WARMUP_MS = Number(flags.warmup ?? (flags.long ? 2 : 1)) * 1000;
const ONLY = flags.only === undefined ? undefined : new RegExp(flags.only);
const CONCURRENCIES = [1, 16, 64] as const;
const USERS = 1000;

/** Every scenario of the part before the evaluate part (issues 5 and 6), by id, to know whether `--only` selects any. */
const CLASSIC_IDS = [
  ...Object.keys(WORKER_OPS).flatMap((op) => [
    ...CONCURRENCIES.map((c) => `worker/${op}/w1/c${c}`),
    `worker/${op}/w2/c16`,
    `worker/${op}/w2/c64`,
  ]),
  ...CONCURRENCIES.map((c) => `worker/mixed/w1/c${c}`),
  ...[1, 64].map((c) => `worker/request-queue/get_pushrule_enabled/w1/c${c}`),
  'worker/mixed/w2/c16',
  'worker/mixed/w2/c64',
  ...['get_pushrule_enabled', 'set_pushrule_enabled', 'get_pushrules'].flatMap((op) => [
    `gateway/${op}/rpc/c64`,
    `gateway/${op}/http/c64`,
  ]),
  'growth/rules0',
  'growth/rules100',
  'growth/rules1000',
  'growth/users1',
  'growth/users100',
  'growth/users10000',
];
const EVALUATE_PARTS = [
  'evaluate/kernel',
  'evaluate/latency',
  'evaluate/isolation',
  'evaluate/cold',
  'evaluate/mentions',
  'evaluate/coalesced',
  'evaluate/memory',
];
const runsClassic = ONLY === undefined || CLASSIC_IDS.some((scenario) => ONLY.test(scenario));
const runsEvaluate = (part: string) => ONLY === undefined || ONLY.test(part);
const runsFailover = ONLY === undefined || ONLY.test('failover');
const runsImport = ONLY === undefined || ONLY.test('import');
const DELIVERY_PARTS = [
  'delivery/raw',
  'delivery/fanout',
  'delivery/slow',
  'delivery/batched',
  'delivery/outage',
  'delivery/isolation',
  'delivery/roles',
];
const runsDelivery = (part: string) => ONLY === undefined || ONLY.test(part);
const runsSynapse = ONLY === undefined || ONLY.test('synapse');
const CLIENT_PARTS = ['clients/get_pushrules', 'clients/evaluate'];
const runsClients = (part: string) => ONLY === undefined || ONLY.test(part);

const AMQP_URL = process.env['AMQP_URL'] ?? 'amqp://guest:guest@127.0.0.1:5672';
const MONGODB_URL = process.env['MONGODB_URL'] ?? 'mongodb://127.0.0.1:27017';
const id = randomUUID().slice(0, 8);
const names = {
  queue: `bench.push.rpc.${id}`,
  echoQueue: `bench.echo.${id}`,
  classicEchoQueue: `bench.echo.classic.${id}`,
  database: `bench_push_${id}`,
};
/** The read queue of the benchmark's workers (and of its client). */
const readQueueOf = (queue: string) => `${queue}.read`;
const evaluateQueueOf = (queue: string) => `${queue}.evaluate`;
/** The workers' defaults, for what the baselines copy of them. */
const DEFAULTS = loadConfig();

/**
 * A worker (or echo consumer) configured like production but on the
 * benchmark's own queues and database: its request, read and evaluate
 * queues, never the shared defaults (`matrix.push.read` may have other
 * consumers on this broker).
 */
function childEnv(queue: string, database = names.database): NodeJS.ProcessEnv {
  return {
    ...process.env,
    AMQP_URL,
    MONGODB_URL,
    MONGODB_DATABASE: database,
    RPC_QUEUE: queue,
    RPC_READ_QUEUE: readQueueOf(queue),
    RPC_DEAD_LETTER_EXCHANGE: `${queue}.dlx`,
    RPC_DEAD_LETTER_QUEUE: `${queue}.dead`,
    EVENTS_EXCHANGE: `${queue}.events`,
    // Its own evaluate queue too: the default one may exist, declared with another dead-letter exchange.
    EVALUATE_QUEUE: evaluateQueueOf(queue),
    // And its own delivery queue: the shared default is declared with another dead-letter exchange.
    DELIVERY_QUEUE: `${queue}.deliver`,
    HEALTH_HOST: '127.0.0.1',
    HEALTH_PORT: '0',
  };
}

const results: ScenarioResult[] = [];
/** The workers serving now. */
const workers: Child[] = [];
/** The kernel's RSS high-water mark of the workers stopped so far, by what they ran. */
const peaks: RssPeak[] = [];
const PROFILE_ARGS = flags.profile ? ['--cpu-prof', '--cpu-prof-dir', `${ROOT}bench/results/profiles`] : [];

async function addWorker(database?: string): Promise<void> {
  workers.push(await startWorker(childEnv(names.queue, database), PROFILE_ARGS));
}

async function stopWorkers(ran: string): Promise<void> {
  if (workers.length > 0) peaks.push({ ran, bytes: Math.max(...workers.map((w) => peakRssBytes(w.pid))) });
  await Promise.all(workers.map(async (w) => w.stop()));
  workers.length = 0;
}
const others: Record<string, number | undefined> = { rabbitmq: findPid('beam.smp'), mongodb: findPid('H2MongoServer') };

interface Scenario {
  readonly id: string;
  readonly group: Group;
  readonly op: string;
  readonly concurrency: number;
  /** A closed loop of these calls, or `run` for a load of another kind. */
  readonly call?: Call;
  readonly run?: () => Promise<LoopResult>;
  readonly userRules?: number;
  readonly users?: number;
}

/** Reads the client sent to the request queue instead of the read queue, per scenario (0 when routing worked). */
const readFallbacks = { count: 0 };

async function measure(scenario: Scenario): Promise<void> {
  if (ONLY !== undefined && scenario.group !== 'broker' && scenario.group !== 'store' && !ONLY.test(scenario.id))
    return;
  const watched: Record<string, number | undefined> = {
    ...Object.fromEntries(workers.map((w, i) => [`worker${workers.length > 1 ? String(i + 1) : ''}`, w.pid])),
    ...others,
  };
  const cpuWatch = startCpuWatch(watched);
  const rss = { max: undefined as number | undefined };
  const sampler = setInterval(() => {
    for (const w of workers) rss.max = Math.max(rss.max ?? 0, rssBytes(w.pid));
  }, 250);
  // A scenario that throws skips the clearInterval below: unref'd, it cannot keep the bench alive.
  sampler.unref();
  readFallbacks.count = 0;
  const { call, run } = scenario;
  const loop =
    run !== undefined
      ? await run()
      : await runClosedLoop({
          concurrency: scenario.concurrency,
          warmupMs: WARMUP_MS,
          measureMs: MEASURE_MS,
          call: call ?? (async () => Promise.resolve()),
        });
  clearInterval(sampler);
  const cpu = cpuWatch.stop();
  const result: ScenarioResult = {
    ...loop,
    id: scenario.id,
    group: scenario.group,
    op: scenario.op,
    workers: scenario.group === 'broker' || scenario.group === 'store' ? 0 : workers.length,
    userRules: scenario.userRules ?? 0,
    users: scenario.users ?? USERS,
    cpu,
    workerRssBytes: rss.max,
    ...(readFallbacks.count > 0 ? { readFallbacks: readFallbacks.count } : {}),
  };
  results.push(result);
  const errors = result.errors > 0 ? ` errors ${result.errors} (${result.firstError ?? ''})` : '';
  const fallbacks = readFallbacks.count > 0 ? `  ${readFallbacks.count} reads fell back to the request queue` : '';
  console.error(
    `${scenario.id.padEnd(44)} ${Math.round(result.throughput).toString().padStart(7)}/s  p50 ${result.p50Ms.toFixed(2)} ms  p99 ${result.p99Ms.toFixed(2)} ms${errors}${fallbacks}`,
  );
}

async function main(): Promise<void> {
  console.error(
    `bench ${id}: ${MEASURE_MS / 1000} s measured after ${WARMUP_MS / 1000} s warm-up per scenario; ${os.cpus().length} CPUs; load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  const mongo = new MongoClient(MONGODB_URL);
  await mongo.connect();
  const cleanups: (() => Promise<unknown>)[] = [];
  try {
    if (runsClassic) await classicScenarios(mongo, cleanups);
    let evaluate: EvaluateResults | undefined;
    if (EVALUATE_PARTS.some(runsEvaluate)) {
      evaluate = await runEvaluateScenarios({
        amqpUrl: AMQP_URL,
        mongo,
        id,
        childEnv,
        deleteQueues,
        workerArgs: PROFILE_ARGS,
        others,
        warmupMs: WARMUP_MS,
        measureMs: MEASURE_MS,
        reps: Number(flags.reps ?? 5),
        ...(flags['synapse-rows'] === undefined ? {} : { synapseRows: flags['synapse-rows'].split(',') }),
        coldSamples: Number(flags['cold-samples'] ?? 6),
        heapProfile: flags['heap-profile'],
        selected: runsEvaluate,
      });
    }

    let failover: FailoverResult | undefined;
    if (runsFailover) {
      console.error(
        "failover: the local three-node cluster, 30 s of writes, the request queue's leader killed at 10 s",
      );
      failover = await runFailover({
        mongo,
        id,
        workerEnv: (queue, database) => childEnv(queue, database),
        workerArgs: PROFILE_ARGS,
        windowMs: 30_000,
        killAtMs: 10_000,
        concurrency: 16,
      });
      console.error(
        `failover: gap ${failover.gapMs} ms; before ${Math.round(failover.beforePerSecond)}/s, after ${Math.round(failover.afterPerSecond)}/s; ${failover.lost} lost`,
      );
    }

    let imported: ImportBenchResult | undefined;
    if (runsImport) {
      imported = await runImportBench({
        mongo,
        amqpUrl: AMQP_URL,
        id,
        users: Number(flags['import-users'] ?? 100_000),
        batchSize: 500,
      });
    }

    let delivery: DeliveryResults | undefined;
    if (DELIVERY_PARTS.some(runsDelivery)) {
      delivery = await runDeliveryScenarios({
        amqpUrl: AMQP_URL,
        mongo,
        id,
        childEnv,
        deleteQueues,
        workerArgs: PROFILE_ARGS,
        others,
        warmupMs: WARMUP_MS,
        measureMs: MEASURE_MS,
        rounds: Number(flags['delivery-rounds'] ?? 3),
        outageSeconds: Number(flags['delivery-outage-seconds'] ?? 60),
        outageRoom: Number(flags['delivery-outage-room'] ?? 2000),
        selected: runsDelivery,
      });
    }

    let synapse: SynapseBenchResult | undefined;
    if (runsSynapse) {
      synapse = await runSynapseBench({
        amqpUrl: AMQP_URL,
        mongo,
        id,
        childEnv,
        deleteQueues,
        workerArgs: PROFILE_ARGS,
        others,
        members: Number(flags['synapse-members'] ?? 1000),
        sends: Number(flags['synapse-sends'] ?? 20),
        batch: Number(flags['synapse-batch'] ?? 10),
      });
    }

    let clients: ClientsResults | undefined;
    if (CLIENT_PARTS.some(runsClients)) {
      clients = await runClientScenarios({
        amqpUrl: AMQP_URL,
        mongo,
        id,
        childEnv,
        deleteQueues,
        warmupMs: WARMUP_MS,
        measureMs: MEASURE_MS,
        selected: runsClients,
      });
    }

    const checks = [
      ...(runsClassic ? checkTargets(results, peaks) : []),
      ...(evaluate === undefined ? [] : checkEvaluateTargets(evaluate)),
      ...(failover === undefined ? [] : checkFailoverTargets(failover)),
      ...(imported === undefined ? [] : checkImportTargets(imported)),
      ...(delivery === undefined ? [] : checkDeliveryTargets(delivery)),
      ...(synapse === undefined ? [] : checkSynapseTargets(synapse)),
      ...(clients === undefined ? [] : checkClientTargets(clients)),
    ];
    const evaluateSection = [
      evaluate === undefined ? '' : evaluateMarkdown(evaluate),
      failover === undefined ? '' : failoverMarkdown(failover),
      imported === undefined ? '' : importMarkdown(imported),
      delivery === undefined ? '' : deliveryMarkdown(delivery),
      synapse === undefined ? '' : synapseMarkdown(synapse),
      clients === undefined ? '' : clientsMarkdown(clients),
    ].join('\n');
    const table = runsClassic
      ? markdown(results, checks, peaks, evaluateSection)
      : `${evaluateSection}\n${targetsTable(checks)}`;
    console.log(table);
    const stamp = new Date().toISOString().replace(/[:.]/g, '-');
    mkdirSync(`${ROOT}bench/results`, { recursive: true });
    const file = `${ROOT}bench/results/bench-${stamp}.json`;
    writeFileSync(
      file,
      `${JSON.stringify(
        {
          startedAt: new Date().toISOString(),
          machine: {
            cpus: os.cpus().length,
            cpuModel: os.cpus()[0]?.model,
            memoryBytes: os.totalmem(),
            node: process.version,
          },
          settings: {
            measureMs: MEASURE_MS,
            warmupMs: WARMUP_MS,
            users: USERS,
            only: flags.only ?? null,
            reps: flags.reps ?? null,
            coldSamples: flags['cold-samples'] ?? null,
            deliveryOutageSeconds: flags['delivery-outage-seconds'] ?? null,
            deliveryOutageRoom: flags['delivery-outage-room'] ?? null,
            deliveryRounds: flags['delivery-rounds'] ?? null,
            synapseMembers: flags['synapse-members'] ?? null,
            synapseSends: flags['synapse-sends'] ?? null,
            synapseBatch: flags['synapse-batch'] ?? null,
          },
          workerPeakRss: peaks,
          results,
          evaluate: evaluate ?? null,
          failover: failover ?? null,
          import: imported ?? null,
          delivery: delivery ?? null,
          synapse: synapse ?? null,
          clients: clients ?? null,
          targets: checks,
        },
        null,
        2,
      )}\n`,
    );
    console.error(`\nresults written to ${file}`);
  } finally {
    await stopWorkers('interrupted');
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
    await mongo
      .db(names.database)
      .dropDatabase()
      .catch(() => undefined);
    await mongo.close();
  }
}

/** The worker against the broker and the store (issues 5 and 6). */
async function classicScenarios(mongo: MongoClient, cleanups: (() => Promise<unknown>)[]): Promise<void> {
  const store = new MongoPushStore(mongo.db(names.database), {
    accountDataCollection: 'account_data',
    pushersCollection: 'pushers',
  });
  await store.ensureIndexes();
  const users = new UserPool('bench', USERS);
  await seedUsers(store, users);
  // Broker limit: the same RPC client code against a consumer that only
  // echoes; on a queue like the request queue (quorum, its prefetch), and
  // on one like the read queue (classic, the read prefetch).
  const echo = await startEchoConsumer(childEnv(names.echoQueue));
  cleanups.push(async () => deleteQueues(names.echoQueue));
  const echoClient = new RpcClient({ url: AMQP_URL, queue: names.echoQueue });
  for (const c of CONCURRENCIES)
    await measure({ id: `broker/echo/c${c}`, group: 'broker', op: 'echo', concurrency: c, call: echoCall(echoClient) });
  await echoClient.close();
  await echo.stop();
  const classicEcho = await startEchoConsumer({
    ...childEnv(names.classicEchoQueue),
    RPC_QUEUE_TYPE: DEFAULTS.amqp.readQueueType,
    RPC_PREFETCH: String(DEFAULTS.amqp.readPrefetch),
  });
  cleanups.push(async () => deleteQueues(names.classicEchoQueue));
  const classicEchoClient = new RpcClient({ url: AMQP_URL, queue: names.classicEchoQueue });
  for (const c of CONCURRENCIES) {
    await measure({
      id: `broker/echo-classic/c${c}`,
      group: 'broker',
      op: 'echo-classic',
      concurrency: c,
      call: echoCall(classicEchoClient),
    });
  }
  await classicEchoClient.close();
  await classicEcho.stop();

  // Store limits: the worker's database calls, no broker.
  for (const op of Object.keys(STORE_OPS) as StoreOp[]) {
    for (const c of CONCURRENCIES)
      await measure({
        id: `store/${op}/c${c}`,
        group: 'store',
        op,
        concurrency: c,
        call: storeCall(store, users, op, c),
      });
  }

  await addWorker();
  cleanups.push(async () => deleteQueues(names.queue));
  // Reads take the client's routing to the workers' read queue, as a front's would.
  const client = new PushRulesClient({
    url: AMQP_URL,
    queue: names.queue,
    readQueue: readQueueOf(names.queue),
    onReadFallback: () => {
      readFallbacks.count += 1;
    },
  });
  cleanups.push(async () => client.close());
  // The same reads on the request queue (quorum), for the read queue's gain in the same run.
  const requestQueueClient = new PushRulesClient({ url: AMQP_URL, queue: names.queue, readQueue: null });
  cleanups.push(async () => requestQueueClient.close());
  const workerScenarios = async (concurrencies: readonly number[]) => {
    for (const op of Object.keys(WORKER_OPS) as WorkerOp[]) {
      for (const c of concurrencies) {
        await measure({
          id: `worker/${op}/w${workers.length}/c${c}`,
          group: 'worker',
          op,
          concurrency: c,
          call: workerCall(client, users, op, c),
        });
      }
    }
    for (const c of concurrencies) {
      await measure({
        id: `worker/mixed/w${workers.length}/c${c}`,
        group: 'worker',
        op: 'mixed',
        concurrency: c,
        call: mixedCall(client, users, c),
      });
    }
  };
  await workerScenarios(CONCURRENCIES);
  for (const c of [1, 64]) {
    await measure({
      id: `worker/request-queue/get_pushrule_enabled/w1/c${c}`,
      group: 'worker',
      op: 'get_pushrule_enabled (request queue)',
      concurrency: c,
      call: workerCall(requestQueueClient, users, 'get_pushrule_enabled', c),
    });
  }
  await gatewayScenarios(client, users);
  await addWorker();
  await workerScenarios([16, 64]);
  await stopWorkers('worker/*');
  // The writes replaced data and added none: a figure measured on data
  // that went missing would be no figure at all.
  const lists = await mongo
    .db(names.database)
    .collection<{ pushers?: unknown[] }>('account_data')
    .find({}, { projection: { pushers: 1 } })
    .toArray();
  const pushers = lists.reduce((n, doc) => n + (doc.pushers?.length ?? 0), 0);
  if (pushers !== USERS) throw new Error(`expected ${USERS} pushers after the worker scenarios, found ${pushers}`);

  // Growth, one worker at c=64: rules per ruleset, then users the load is
  // spread over. Each row has a database of its own, so no row measures
  // the data another row left behind.
  const growth = async (
    row: Omit<Scenario, 'group' | 'op' | 'concurrency' | 'call'>,
    pool: UserPool,
    userRules: number,
  ) => {
    if (ONLY !== undefined && !ONLY.test(row.id)) return;
    const database = `${names.database}_${row.id.replace(/\W/g, '_')}`;
    const rowStore = new MongoPushStore(mongo.db(database), {
      accountDataCollection: 'account_data',
      pushersCollection: 'pushers',
    });
    await rowStore.ensureIndexes();
    await seedUsers(rowStore, pool, userRules);
    await addWorker(database);
    try {
      await measure({
        ...row,
        group: 'growth',
        op: 'set_pushrule_enabled',
        concurrency: 64,
        call: workerCall(client, pool, 'set_pushrule_enabled', 64),
      });
    } finally {
      await stopWorkers(row.id);
      await mongo.db(database).dropDatabase();
    }
  };
  for (const userRules of [0, 100, 1000]) {
    await growth(
      { id: `growth/rules${userRules}`, userRules, users: 64 },
      new UserPool(`rules${userRules}`, 64),
      userRules,
    );
  }
  for (const count of [1, 100, 10_000]) {
    await growth({ id: `growth/users${count}`, users: count }, new UserPool(`users${count}`, count), 0);
  }
}

/**
 * The same reads and writes through the HTTP gateway (autocannon) and
 * directly over RPC (the typed client), one after the other on the same
 * worker and users, so the gateway's cost is a ratio from one run.
 */
async function gatewayScenarios(client: PushRulesClient, users: UserPool): Promise<void> {
  if (ONLY !== undefined && !ONLY.test('gateway/')) return;
  const tokens = Object.fromEntries(users.ids.map((user, k) => [`token-${k}`, user]));
  const tokenFile = join(mkdtempSync(join(os.tmpdir(), 'bench-gateway-')), 'tokens.json');
  writeFileSync(tokenFile, JSON.stringify(tokens));
  const port = { value: '' };
  const gateway = await startChild(
    'gateway',
    ['dist/gateway-main.js'],
    {
      ...childEnv(names.queue),
      AUTH_KIND: 'token-file',
      AUTH_TOKEN_FILE: tokenFile,
      GATEWAY_HOST: '127.0.0.1',
      GATEWAY_PORT: '0',
    },
    (line) => {
      const match = /"msg":"gateway listening".*"port":(\d+)|"port":(\d+).*"msg":"gateway listening"/.exec(line);
      if (match !== null) port.value = match[1] ?? match[2] ?? '';
      return match !== null;
    },
  );
  others['gateway'] = gateway.pid;
  const url = `http://127.0.0.1:${port.value}`;
  const c = 64;
  const rule = '/pushrules/global/override/.m.rule.suppress_notices';
  try {
    for (const op of ['get_pushrule_enabled', 'set_pushrule_enabled', 'get_pushrules'] as const) {
      await measure({
        id: `gateway/${op}/rpc/c${c}`,
        group: 'gateway',
        op: `${op} rpc`,
        concurrency: c,
        call: workerCall(client, users, op, c),
      });
      await measure({
        id: `gateway/${op}/http/c${c}`,
        group: 'gateway',
        op: `${op} http`,
        concurrency: c,
        run: async () =>
          runHttpLoad({
            url,
            concurrency: c,
            warmupMs: WARMUP_MS,
            measureMs: MEASURE_MS,
            request: (i) => {
              const token = `token-${i % users.ids.length}`;
              if (op === 'get_pushrules') return { method: 'GET', path: '/_matrix/client/v3/pushrules/', token };
              if (op === 'get_pushrule_enabled')
                return { method: 'GET', path: `/_matrix/client/v3${rule}/enabled`, token };
              // Each write flips what the user's last one stored, as over RPC.
              const user = users.ids[i % users.ids.length] ?? '';
              return {
                method: 'PUT',
                path: `/_matrix/client/v3${rule}/enabled`,
                token,
                body: { enabled: nextWrite('set_pushrule_enabled', user) % 2 === 0 },
              };
            },
          }),
      });
    }
  } finally {
    others['gateway'] = undefined;
    await gateway.stop();
  }
}

async function deleteQueues(queue: string): Promise<void> {
  const connection = await amqp.connect(AMQP_URL);
  const channel = await connection.createChannel();
  await channel.deleteQueue(queue);
  await channel.deleteQueue(readQueueOf(queue));
  await channel.deleteQueue(evaluateQueueOf(queue));
  await channel.deleteQueue(`${queue}.deliver`);
  // The delivery queue's partition queues (as many as the workers were configured with).
  const partitions = DEFAULTS.delivery.partitions;
  for (let partition = 0; partition < partitions; partition += 1)
    await channel.deleteQueue(partitionQueue({ queue: `${queue}.deliver` }, partition));
  await channel.deleteQueue(`${queue}.dead`);
  await channel.deleteExchange(`${queue}.dlx`);
  await channel.deleteExchange(`${queue}.events`);
  await connection.close();
}

await main();
