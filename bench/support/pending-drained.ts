import { setTimeout as sleep } from 'node:timers/promises';
import type { Db } from 'mongodb';
import { loadConfig } from '../../src/config/load-config.js';
import { brokerBacklog } from './broker-backlog.js';

const PENDING_COLLECTION = loadConfig().delivery.pendingCollection;

const log = (line: string) => {
  console.error(line);
};

/**
 * Until the store holds no pending request, and, with `queue`, the broker no
 * message of that delivery queue either (checked after the store, until
 * both are empty at once): a part a worker took back after its lease ran
 * out waits in its partition queue, or in the worker's hands, with nothing
 * stored for it.
 */
export async function pendingDrained(db: Db, timeoutMs: number, queue?: string): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const pending = await db.collection(PENDING_COLLECTION).countDocuments();
    const parts = pending === 0 && queue !== undefined ? await brokerBacklog(queue) : 0;
    if (pending === 0 && (parts ?? 0) === 0) {
      if (parts === undefined) log('  (rabbitmqctl did not answer: only the store was checked)');
      return;
    }
    if (Date.now() > end)
      throw new Error(
        pending > 0
          ? `${pending} deliveries still pending after ${timeoutMs} ms`
          : `${parts ?? 0} notify parts not acknowledged after ${timeoutMs} ms`,
      );
    await sleep(pending > 0 ? 100 : 1000);
  }
}
