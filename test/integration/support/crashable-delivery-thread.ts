/**
 * The production delivery thread, which throws an uncaught error when a
 * test posts `crash` on the `delivery-thread-faults` broadcast channel: a
 * bug in delivery, as the worker sees it. Production code knows nothing
 * of it: only tests give it (`ServeHooks.deliveryThread`).
 */
import { BroadcastChannel } from 'node:worker_threads';
import '../../../src/delivery-thread/delivery-thread.js';

const faults = new BroadcastChannel('delivery-thread-faults');
faults.onmessage = (event) => {
  if ((event as MessageEvent).data === 'crash') throw new Error('TEST-ONLY: the delivery thread crashes');
};
faults.unref();
