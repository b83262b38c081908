/**
 * One evaluation thread (node:worker_threads), started by `EvaluatePool`:
 * parses `evaluate` bodies, keeps its own cache of compiled rulesets (kept
 * current by the invalidations the event loop forwards), reads uncached
 * users from the store on a connection of its own, evaluates, and hands
 * back the reply already encoded. Everything a large room costs happens
 * here, never on the event loop that serves reads, writes and heartbeats.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { MongoClient } from 'mongodb';
import { evaluateInProcess, evaluateLimits } from '../consumer/evaluate-queue.js';
import { retryUntilDone } from '../retry/retry-until-done.js';
import { encodeReply } from '../contract/reply.js';
import type { CompiledRuleset } from '../evaluation/compiled-ruleset.js';
import { EvaluateService } from '../service/evaluate-service.js';
import { RulesetCache } from '../service/ruleset-cache.js';
import { mongoClientOptions } from '../store/mongo-client-options.js';
import { MongoPushStore } from '../store/mongo-push-store.js';
import { describeError, type EvaluateThreadData, type FromThread, type ToThread } from './thread-messages.js';

const port = parentPort;
if (port === null) throw new Error('evaluate-thread.ts runs as a worker thread of EvaluatePool');
const data = workerData as EvaluateThreadData;
const post = (message: FromThread, transfer: ArrayBuffer[] = []) => {
  port.postMessage(message, transfer);
};

const cache = new RulesetCache<CompiledRuleset>({
  maxEntries: data.cacheMaxEntries,
  maxBytes: data.cacheMaxBytes,
  maxStalenessMs: data.evaluate.maxStalenessMs,
});
const mongo = new MongoClient(data.mongodb.url, mongoClientOptions(data.mongodb));
// Connected explicitly, again until it works, as the worker does at start:
// after a failed first connection the driver's topology stays closed and
// never tries again. Once connected, the driver reconnects by itself.
// Reads wait for it (within their deadline and the operation timeout);
// requests that need no read (refused, or all cached) do not.
let storeConnected = false;
const connected = retryUntilDone(
  async () => {
    await mongo.connect();
    storeConnected = true;
  },
  {
    policy: { baseMs: 100, maxMs: 1000 },
    signal: new AbortController().signal,
    onFailure: (error, attempt, retryInMs) => {
      post({ type: 'store-unreachable', error: describeError(error), attempt, retryInMs });
    },
  },
);
/** The store, its reads waiting for the first connection. */
class ConnectedStore extends MongoPushStore {
  override async loadManyPushRules(userIds: readonly string[]): ReturnType<MongoPushStore['loadManyPushRules']> {
    if (!storeConnected) await connected;
    return super.loadManyPushRules(userIds);
  }
}
const store = new ConnectedStore(mongo.db(data.mongodb.database), {
  accountDataCollection: data.mongodb.accountDataCollection,
  pushersCollection: data.mongodb.pushersCollection,
});
const service = new EvaluateService(store, {
  cache,
  loadChunkSize: data.evaluate.loadChunkSize,
  sliceMs: data.evaluate.sliceMs,
  maxReplyBytes: data.evaluate.maxReplyBytes,
  operationTimeoutMs: data.mongodb.operationTimeoutMs,
  observer: {
    storeOperationAbandoned: (operation, reason) => {
      post({ type: 'abandoned', operation, reason });
    },
  },
  onUndecodable: (userId) => {
    post({ type: 'undecodable', userId });
  },
});
const run = evaluateInProcess(service, evaluateLimits(data.evaluate, data.maxJsonDepth));
const encoder = new TextEncoder();

async function evaluate(id: number, body: Uint8Array, deadline: number | undefined): Promise<void> {
  const outcome = await run(body, { deadline });
  const { stats } = cache;
  const snapshot = { size: cache.size, bytes: cache.bytes, ...stats };
  const common = {
    type: 'done' as const,
    id,
    cache: snapshot,
    ...(outcome.stats === undefined ? {} : { stats: outcome.stats }),
    ...(outcome.cause === undefined ? {} : { cause: outcome.cause }),
    ...(outcome.failure === undefined ? {} : { failure: describeError(outcome.failure) }),
    ...(outcome.deadlinePassed === true ? { deadlinePassed: true as const } : {}),
  };
  if (outcome.reply.ok) {
    // A buffer of its own (not a slice of Node's pool), so it can be transferred rather than copied.
    const bytes = encoder.encode(encodeReply(outcome.reply));
    post({ ...common, bytes }, [bytes.buffer]);
  } else {
    post({ ...common, error: outcome.reply.error });
  }
}

port.on('message', (message: ToThread) => {
  switch (message.type) {
    case 'evaluate':
      void evaluate(message.id, message.body, message.deadline);
      return;
    // The service's: the cache, and the reads under way that later evaluations would join.
    case 'invalidate':
      service.invalidate(message.userId);
      return;
    case 'clear':
      service.clear();
      return;
  }
});
post({ type: 'ready' });
