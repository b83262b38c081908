import { MongoClient, type Db } from 'mongodb';
import { inject } from 'vitest';
import { RpcClient } from '../../../src/client/rpc-client.js';
import { deleteTopology, uniqueNames, type Names } from '../../integration/support/worker-harness.js';
import {
  startServiceProcess,
  startWorkerProcess,
  stopWorkerProcess,
  workerEnvironment,
  type WorkerProcess,
} from '../../integration/support/worker-processes.js';

/** The worker with crash hooks (FAULT_CRASH_ON_USER_ID, FAULT_CRASH_AFTER_APPLY_ON_USER_ID), relative to the repository. */
const CRASHING_WORKER = 'test/faults/support/crashing-worker-main.ts';

/** Worker processes on a queue and database of the test's own, a client, and the database to inspect. */
export interface FaultWorld {
  readonly names: Names;
  readonly workers: WorkerProcess[];
  readonly client: RpcClient;
  readonly db: Db;
  startWorker(extraEnv?: Record<string, string>): Promise<WorkerProcess>;
  /** Version and user rule IDs of a user's stored push rules. */
  stored(user: string): Promise<{ version: number; ruleIds: string[] }>;
  close(): Promise<void>;
}

export async function openFaultWorld(workerCount: number, extraEnv: Record<string, string> = {}): Promise<FaultWorld> {
  const names = uniqueNames();
  const mongo = new MongoClient(inject('mongoUrl'), { serverSelectionTimeoutMS: 5000 });
  const db = mongo.db(names.database);
  const workers: WorkerProcess[] = [];
  const startWorker = async (env: Record<string, string> = {}) => {
    const environment = workerEnvironment(names, { ...extraEnv, ...env });
    // Crash hooks are the test entry point's: the production one knows nothing of them.
    const crashing = Object.keys(environment).some((name) => name.startsWith('FAULT_CRASH_'));
    const worker = crashing
      ? await startServiceProcess(CRASHING_WORKER, environment, 'worker started')
      : await startWorkerProcess(environment);
    workers.push(worker);
    return worker;
  };
  await Promise.all(Array.from({ length: workerCount }, async () => startWorker()));
  const client = new RpcClient({
    url: names.amqp.url,
    queue: names.queue,
    timeoutMs: 10_000,
    publisherUserId: 'guest',
  });
  return {
    names,
    workers,
    client,
    db,
    startWorker,
    stored: async (user) => {
      const doc = await db
        .collection<{ _id: string; version?: number; push_rules?: { content_json?: string } }>('account_data')
        .findOne({ _id: user });
      const content = JSON.parse(doc?.push_rules?.content_json ?? '{"global":{}}') as {
        global: Record<string, { rule_id: string; default: boolean }[]>;
      };
      const ruleIds = Object.values(content.global)
        .flat()
        .filter((r) => !r.default)
        .map((r) => r.rule_id);
      return { version: doc?.version ?? 0, ruleIds };
    },
    close: async () => {
      await client.close();
      await Promise.all(workers.map(async (w) => stopWorkerProcess(w, 'SIGKILL')));
      await deleteTopology(names).catch(() => undefined);
      await db.dropDatabase().catch(() => undefined);
      await mongo.close();
    },
  };
}

/** Log lines of every worker, with the worker's index. */
export function logLines(world: FaultWorld, msg: string): Record<string, unknown>[] {
  return world.workers.flatMap((w, i) => w.lines.filter((l) => l['msg'] === msg).map((l) => ({ ...l, worker: i })));
}

/**
 * Log lines matching `where`, once there are some: a worker writes its line
 * right after the reply, and the pipe may deliver it to this process a
 * little after the reply itself. Resolves with what there is after `timeoutMs`.
 */
export async function awaitLogLines(
  world: FaultWorld,
  msg: string,
  where: (line: Record<string, unknown>) => boolean,
  timeoutMs = 5_000,
): Promise<Record<string, unknown>[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const lines = logLines(world, msg).filter(where);
    if (lines.length > 0 || Date.now() > deadline) return lines;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
