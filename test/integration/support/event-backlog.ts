import amqp from 'amqplib';
import { WIRE_VERSION_HEADERS } from '../../../src/contract/wire-version.js';
import type { Names } from './worker-harness.js';
import type { WorkerProcess } from './worker-processes.js';

/** Change events of other users waiting in each worker's event queue: seconds of work for a worker. */
export const EVENT_BACKLOG = 100_000;

/**
 * Other users' writes, announced while `workers` are paused (SIGSTOP), so
 * each worker's event queue holds `count` events and whatever is announced
 * next waits behind them, while the request queues stay empty. The broker
 * keeps no order between two queues: the next request reaches a worker
 * long before the next event does. Their heartbeat must outlast the pause.
 */
export async function backlogOfEvents(
  names: Names,
  workers: readonly WorkerProcess[],
  type: 'm.push_rules' | 'm.pushers',
  count = EVENT_BACKLOG,
): Promise<void> {
  for (const worker of workers) worker.child.kill('SIGSTOP');
  try {
    const connection = await amqp.connect(names.amqp.url);
    try {
      const channel = await connection.createConfirmChannel();
      for (let i = 0; i < count; i += 1) {
        const event = { type, user_id: `@other${String(i)}:example.org`, version: 1 };
        channel.publish(names.amqp.eventsExchange, type, Buffer.from(JSON.stringify(event)), {
          contentType: 'application/json',
          headers: WIRE_VERSION_HEADERS,
        });
      }
      await channel.waitForConfirms();
    } finally {
      await connection.close();
    }
  } finally {
    for (const worker of workers) worker.child.kill('SIGCONT');
  }
}
