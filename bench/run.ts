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
import { mkdirSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import { MongoClient } from 'mongodb';
import { ROOT } from './support/processes.js';
import { checkTargets, markdown, targetsTable } from './support/report.js';
import { checkEvaluateTargets, type EvaluateResults } from './support/evaluate-report.js';
import { evaluateMarkdown } from './support/evaluate-markdown.js';
import { runEvaluateScenarios } from './evaluate-scenarios.js';
import { checkFailoverTargets, failoverMarkdown, runFailover, type FailoverResult } from './failover.js';
import { checkImportTargets, importMarkdown, runImportBench, type ImportBenchResult } from './support/import-load.js';
import { runDeliveryScenarios } from './delivery.js';
import { runClientScenarios } from './clients.js';
import { checkClientTargets, clientsMarkdown, type ClientsResults } from './support/clients-report.js';
import { checkDeliveryTargets, deliveryMarkdown, type DeliveryResults } from './support/delivery-report.js';
import { runSynapseBench } from './synapse.js';
import { checkSynapseTargets, synapseMarkdown, type SynapseBenchResult } from './support/synapse-report.js';
import { CLASSIC_IDS, classicScenarios } from './classic-scenarios.js';
import { others, peaks, results, stopWorkers, USERS } from './support/classic-measure.js';
import { flags, MEASURE_MS, ONLY, PROFILE_ARGS, WARMUP_MS } from './support/run-flags.js';
import { AMQP_URL, childEnv, deleteQueues, id, MONGODB_URL, names } from './support/run-services.js';

const EVALUATE_PARTS = [
  'evaluate/kernel',
  'evaluate/latency',
  'evaluate/isolation',
  'evaluate/cold',
  'evaluate/mentions',
  'evaluate/coalesced',
  'evaluate/memory',
];
const runsClassic = ONLY === undefined || CLASSIC_IDS.some((scenario) => ONLY?.test(scenario));
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

await main();
