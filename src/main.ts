import { MongoClient } from 'mongodb';
import { ConfigError, loadConfig } from './config/load-config.js';
import { createLogger } from './logging/logger.js';
import { RpcWorker } from './rpc/rpc-worker.js';
import { MongoPushStore } from './store/mongo-push-store.js';
import { PushService } from './worker/push-service.js';

/** `npm start`: one worker process. Stops cleanly on SIGTERM/SIGINT. */
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`matrix-push-worker: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  const log = createLogger(config.log.level);

  const mongo = new MongoClient(config.mongodb.url, { serverSelectionTimeoutMS: config.mongodb.serverSelectionTimeoutMs });
  await mongo.connect();
  const store = new MongoPushStore(mongo.db(config.mongodb.database), {
    ...config.mongodb,
    recordedWritesWindow: config.writes.recordedWritesWindow,
  });
  await store.ensureIndexes();

  const service = new PushService(store, {
    maxWriteAttempts: config.writes.maxAttempts,
    backoff: { baseMs: config.writes.backoffBaseMs, maxMs: config.writes.backoffMaxMs },
    pusherPolicy: { allowInsecureGateways: config.pushers.allowInsecureGateways },
  });
  const worker = new RpcWorker(service, { amqp: config.amqp, maxRequestBytes: config.limits.maxRequestBytes, logger: log });

  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) {
      log.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    log.info({ signal, inFlight: worker.inFlight }, 'stopping: finishing requests in flight');
    void worker
      .close()
      .then(async () => mongo.close())
      .then(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  await worker.start();
  log.info({ database: config.mongodb.database }, 'worker started');
}

main().catch((error: unknown) => {
  process.stderr.write(`matrix-push-worker: failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
