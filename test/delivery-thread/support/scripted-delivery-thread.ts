/**
 * A stand-in for delivery-thread.ts that speaks the same protocol and does
 * what its configuration's `delivery.queue` names, so that the host's
 * handling of the thread's life can be shown without a broker or a store:
 *
 * - `start`: logs a line through the same logger setup, starts, consumes,
 *   answers scrapes with a registry of two metrics, and on `close` logs
 *   another line and says `closed`;
 * - `crash-on-scrape`: as `start`, but throws out of the message handler
 *   at a scrape (an uncaught exception ends the thread);
 * - `mismatch`: fails to start with a partition count the pool does not
 *   share;
 * - `exit`: ends with `process.exit(3)` before it starts.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { Counter, Registry } from 'prom-client';
import { PartitionCountMismatchError } from '../../../src/delivery-service/partition-count-guard.js';
import {
  describeError,
  type DeliveryThreadData,
  type FromDeliveryThread,
  type ToDeliveryThread,
} from '../../../src/delivery-thread/thread-messages.js';
import { threadLogger } from '../../../src/delivery-thread/thread-logger.js';

const port = parentPort;
if (port === null) throw new Error('a worker thread');
const data = workerData as DeliveryThreadData;
const script = data.config.delivery.queue;
const post = (message: FromDeliveryThread) => {
  port.postMessage(message);
};
const log = threadLogger(data, post);

if (script === 'exit') process.exit(3);
if (script === 'mismatch') {
  const error = new PartitionCountMismatchError(8, [{ worker: 'other/1', partitions: 4 }]);
  post({ type: 'start-failed', error: describeError(error, 8) });
} else {
  const registry = new Registry();
  new Counter({ name: 'push_worker_delivery_requests_total', help: 'h', registers: [registry] }).inc(3);
  new Counter({
    name: 'push_worker_requests_total',
    help: 'h',
    labelNames: ['op', 'queue'],
    registers: [registry],
  }).inc({ op: 'notify', queue: 'deliver' });
  port.on('message', (message: ToDeliveryThread) => {
    if (message.type === 'metrics') {
      if (script === 'crash-on-scrape') throw new Error('thrown by the scripted delivery thread');
      void registry.getMetricsAsJSON().then((metrics) => {
        post({ type: 'metrics', id: message.id, metrics });
      });
    }
    if (message.type === 'close') {
      log.info('closing delivery');
      post({ type: 'closed' });
    }
  });
  log.info({ partitions: data.config.delivery.partitions }, 'delivery started');
  post({ type: 'started' });
  post({ type: 'consuming', consuming: true });
}
