/**
 * The delivery thread (node:worker_threads), started by `DeliveryHost` on
 * a worker that delivers: push delivery (`DeliveryRuntime`) on an event
 * loop of its own, so that a large notify's CPU never queues behind the
 * requests the main thread serves, nor they behind it. Its log lines go to
 * the main thread, which writes them where its own go; its metrics are
 * sent when the main thread is scraped.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { DeliveryRuntime } from './delivery-runtime.js';
import {
  deepFrozen,
  describeError,
  type DeliveryThreadData,
  type FromDeliveryThread,
  type ToDeliveryThread,
} from './thread-messages.js';
import { threadLogger } from './thread-logger.js';

const port = parentPort;
if (port === null) throw new Error('delivery-thread.ts runs as a worker thread of DeliveryHost');
const data = workerData as DeliveryThreadData;
const config = deepFrozen(data.config);
const post = (message: FromDeliveryThread) => {
  port.postMessage(message);
};
const log = threadLogger(data, post);

const runtime = new DeliveryRuntime(config, log);
let closing: Promise<void> | undefined;
const close = async () => {
  closing ??= runtime.close();
  return closing;
};

// The probe reads what the thread last said: asking at each probe would wait behind a burst of sends.
let consuming = false;
const watch = setInterval(() => {
  if (runtime.consuming === consuming) return;
  consuming = runtime.consuming;
  post({ type: 'consuming', consuming });
}, 200);

port.on('message', (message: ToDeliveryThread) => {
  switch (message.type) {
    case 'metrics':
      void runtime.metrics.registry.getMetricsAsJSON().then((metrics) => {
        post({ type: 'metrics', id: message.id, metrics });
      });
      return;
    case 'close':
      void close()
        .catch((error: unknown) => {
          log.error({ err: error }, 'closing delivery failed');
        })
        .finally(() => {
          clearInterval(watch);
          post({ type: 'closed' });
        });
      return;
  }
});

runtime.start().then(
  (started) => {
    if (started) post({ type: 'started' });
  },
  async (error: unknown) => {
    // What it opened is closed before the main thread ends the thread, so that no lease or connection lingers.
    await close().catch(() => undefined);
    clearInterval(watch);
    post({ type: 'start-failed', error: describeError(error, config.delivery.partitions) });
  },
);
