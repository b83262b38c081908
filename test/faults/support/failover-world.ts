import { MongoClient, type Db } from 'mongodb';
import { afterAll, afterEach, beforeAll, inject } from 'vitest';
import { deleteTopology, uniqueNames, type Names } from '../../integration/support/worker-harness.js';
import {
  startWorkerProcess,
  stopWorkerProcess,
  workerEnvironment,
  type WorkerProcess,
} from '../../integration/support/worker-processes.js';
import {
  CLUSTER_HOOK_TIMEOUT_MS,
  clusterUp,
  killNode,
  restoreCluster,
  startNode,
  type ClusterNode,
} from '../../support/rabbit-cluster.js';

/**
 * The service on the local three-node cluster (`scripts/services.sh
 * cluster-up`), given every node in AMQP_URL. A node is killed (SIGKILL of
 * its Erlang VM) under a load of writes that carry `messageId`s and are
 * retried when they time out or lose their connection, as a front does:
 *
 * - the node a worker is connected to: the worker consumes again through
 *   a surviving node, within 10 s;
 * - the node that leads the request queue (a quorum queue): a survivor
 *   takes over;
 *
 * and in both, every write is acknowledged, and applied exactly once (the
 * stored version counts the writes). Then a worker is started while a node
 * of three is down, with the read and evaluate queues (classic) homed on
 * that node: it starts and serves, and consumes them once the node is back.
 */
const WORKERS = 3;
export const SERVE_AGAIN_WITHIN_MS = 10_000;
export let nodes: readonly ClusterNode[];
export let names: Names;
export let mongo: MongoClient;
export let db: Db;
export const workers: WorkerProcess[] = [];
/** Nodes this file killed and has not started again. */
export const down = new Set<ClusterNode>();

export const clusterUrls = () => nodes.map((n) => n.url).join(',');
export const nodeOfBroker = (broker: unknown) => nodes.find((n) => `127.0.0.1:${n.port}` === broker);

async function startWorker(extra: Record<string, string> = {}): Promise<WorkerProcess> {
  const worker = await startWorkerProcess(
    workerEnvironment(names, { AMQP_URL: clusterUrls(), LOG_LEVEL: 'info', ...extra }),
  );
  workers.push(worker);
  return worker;
}

export async function kill(node: ClusterNode): Promise<void> {
  down.add(node);
  await killNode(node);
}

export async function revive(node: ClusterNode): Promise<void> {
  await startNode(node);
  down.delete(node);
}

/**
 * The cluster, the database and the workers, up before the file's tests
 * and gone after them; whatever a test did to the cluster undone after it.
 * Call once at the top of a test file.
 */
export function useFailoverWorld(): void {
  beforeAll(async () => {
    nodes = await clusterUp();
    const own = uniqueNames();
    names = { ...own, amqp: { ...own.amqp, url: nodes[0]?.url ?? '' } };
    mongo = new MongoClient(inject('mongoUrl'), { serverSelectionTimeoutMS: 5000 });
    db = mongo.db(names.database);
    for (let i = 0; i < WORKERS; i += 1) await startWorker();
  }, CLUSTER_HOOK_TIMEOUT_MS);

  // Whatever a test did to the cluster is undone before the next one starts,
  // passed or failed: a node left down would make the next kill take the
  // quorum away, and one failure would fail every test after it.
  afterEach(async () => {
    await restoreCluster(nodes, down, [names.queue]);
  }, CLUSTER_HOOK_TIMEOUT_MS);

  afterAll(async () => {
    await Promise.all(workers.map(async (w) => stopWorkerProcess(w, 'SIGKILL')));
    await deleteTopology(names).catch(() => undefined);
    await db.dropDatabase().catch(() => undefined);
    await mongo.close();
  });
}
