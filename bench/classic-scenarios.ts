/**
 * The part of `npm run bench` before the evaluate part (issues 5 and 6):
 * the broker's and the store's limits, the worker against them, the HTTP
 * gateway, and growth. See bench/README.md.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as os from 'node:os';
import type { MongoClient } from 'mongodb';
import { PushRulesClient } from '../src/client/push-rules-client.js';
import { RpcClient } from '../src/client/rpc-client.js';
import { MongoPushStore } from '../src/store/mongo-push-store.js';
import {
  addWorker,
  CONCURRENCIES,
  measure,
  others,
  readFallbacks,
  stopWorkers,
  USERS,
  workers,
  type Scenario,
} from './support/classic-measure.js';
import { runHttpLoad } from './support/http-load.js';
import { priming } from './support/priming.js';
import { startChild, startEchoConsumer } from './support/processes.js';
import { MEASURE_MS, ONLY, WARMUP_MS } from './support/run-flags.js';
import { AMQP_URL, childEnv, DEFAULTS, deleteQueues, names, readQueueOf } from './support/run-services.js';
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
  type StoreOp,
  type WorkerOp,
} from './support/workloads.js';

/** Every scenario of the part before the evaluate part (issues 5 and 6), by id, to know whether `--only` selects any. */
export const CLASSIC_IDS = [
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

/** The worker against the broker and the store (issues 5 and 6). */
export async function classicScenarios(mongo: MongoClient, cleanups: (() => Promise<unknown>)[]): Promise<void> {
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
  // Every user's rules read once before the first row: the worker keeps them, as a worker that has run a while
  // does. With a second of warm-up, the first row (`get_pushrules` at c=1, some 650 reads a second) measured the
  // last ~400 of the 1,000 first reads, each a miss that reads the store, and its p50 with them.
  const only = ONLY;
  if (only === undefined || CLASSIC_IDS.some((id) => id.startsWith('worker/') && only.test(id)))
    await primeReadCache(client, users);
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

/** Reads each user's rules once, 32 at a time, unmeasured. */
async function primeReadCache(client: PushRulesClient, users: UserPool): Promise<void> {
  const ids = [...users.ids];
  const reader = async () => {
    for (let user = ids.pop(); user !== undefined; user = ids.pop()) {
      const id = user;
      await priming(async () => client.getPushRules(id));
    }
  };
  await Promise.all(Array.from({ length: 32 }, reader));
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
