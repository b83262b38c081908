import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { throwawayCaUnavailable } from '../support/throwaway-ca.js';
import { startCuttableLink, type CuttableLink } from './support/cuttable-link.js';
import {
  deliveredByDevice,
  openDeliveryWorld,
  saveDeliveryLogs,
  withoutRepeats,
  type DeliveryWorld,
} from './support/delivery-world.js';
import { aMessage, recipients, users } from './support/numbered-notifications.js';

/**
 * A delivering worker cut off from MongoDB while it still reaches RabbitMQ
 * (a network partition between it and the store only: its MongoDB
 * connections go through a relay that falls silent). Its partitions must
 * resume on the other worker: it stops consuming their queues once their
 * leases ran out by its own clock, and the single active consumer passes to
 * the worker that claimed them. Every device gets every notification, first
 * sends in order; what the cut-off worker sent after its last progress
 * note reached the store may be sent again (each at most twice).
 */
const noCa = throwawayCaUnavailable();
const LEASE_MS = 3_000;
let d: DeliveryWorld | undefined;
let link: CuttableLink | undefined;

afterEach(async (context) => {
  if ((context.task.result?.state === 'fail' || process.env['STORE_CUT_LOGS'] !== undefined) && d !== undefined) {
    // Kept after a failure, or every run with STORE_CUT_LOGS set.
    console.log(`[store-cut] worker logs in ${await saveDeliveryLogs(d, 'store-cut-')}`);
  }
  link?.mend();
  await d?.close();
  await link?.close();
  d = undefined;
  link = undefined;
});

async function until(check: () => boolean, timeoutMs: number, what: string, why = () => ''): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out after ${String(timeoutMs)} ms waiting for ${what}${why()}`);
    await sleep(100);
  }
}

/** Which devices lack a notification, and which got their first sends out of order (a failure's message). */
function shortfall(byDevice: Map<string, string[]>, all: readonly string[], events: readonly string[]): string {
  const firstSends = withoutRepeats(byDevice).events;
  const missing: string[] = [];
  const disordered: string[] = [];
  for (const user of all) {
    const list = firstSends.get(`${user}-phone`) ?? [];
    const lacking = events.filter((event) => !list.includes(event));
    if (lacking.length > 0) missing.push(`${user} lacks ${lacking.join(',')}`);
    else if (list.join() !== events.join()) disordered.push(`${user} got ${list.join(',')}`);
  }
  return (
    `: ${String(missing.length)} device(s) lack some (${missing.slice(0, 5).join('; ')}), ` +
    `${String(disordered.length)} out of order (${disordered.slice(0, 5).join('; ')})`
  );
}

describe.skipIf(noCa !== undefined)('a worker cut from the store, not the broker', () => {
  it('its partitions resume on the other worker; nothing lost, first sends in order on every device', async () => {
    const world = await openDeliveryWorld(1, { DELIVERY_LEASE_MS: String(LEASE_MS) });
    d = world;
    const mongo = new URL(inject('mongoUrl'));
    link = await startCuttableLink({ host: mongo.hostname, port: Number(mongo.port || '27017') });
    const cutOff = await world.world.startWorker({
      MONGODB_URL: `mongodb://${link.address}/?directConnection=true`,
      MONGODB_OPERATION_TIMEOUT_MS: '2000',
    });
    const other = world.world.workers[0];
    if (other === undefined) throw new Error('no first worker');
    const delivering = (worker: typeof other) =>
      worker.lines.filter((line) => line['msg'] === 'delivering a partition').length;
    await until(() => delivering(cutOff) > 0, 60_000, 'the second worker to take its share');
    const all = users(300, 'cut');
    await world.seedPushers(all);
    world.gateway.behave({ kind: 'answer', delayMs: 30 });
    const events = [1, 2, 3, 4, 5].map((n) => `$event${String(n)}`);
    for (const n of [1, 2]) await world.client.notify(aMessage(n), recipients(all), { timeoutMs: 60_000 });
    await until(() => world.gateway.requests.length >= 150, 60_000, '150 requests');
    const takenBefore = delivering(other);
    link.cut();
    const cutAt = Date.now();
    for (const n of [3, 4, 5]) {
      await world.client.notify(aMessage(n), recipients(all), { timeoutMs: 60_000 });
      await sleep(1_000);
    }
    await until(() => delivering(other) > takenBefore, 60_000, 'the other worker to take the partitions over');
    const resumedAfterMs = Date.now() - cutAt;
    await until(
      () =>
        [...withoutRepeats(deliveredByDevice(world.gateway.requests)).events.values()].filter(
          (list) => list.join() === events.join(),
        ).length === all.length,
      120_000,
      'all five on every device, in order, with the worker still cut off',
      () => shortfall(deliveredByDevice(world.gateway.requests), all, events),
    );
    const byDevice = deliveredByDevice(world.gateway.requests);
    let replayed = 0;
    for (const list of byDevice.values()) {
      // First sends in publish order (checked above), each at most twice. What the cut-off worker sent after its
      // last progress note reached the store is sent again by the next holder, as a run (n, n+1, n, n+1, n+2):
      // counted here, bounded by what it could send before its lease came into doubt (docs/delivery.md).
      for (const event of events) expect(list.filter((sent) => sent === event).length).toBeLessThanOrEqual(2);
      const numbers = list.map((event) => events.indexOf(event));
      if (numbers.some((n, i) => i > 0 && n < (numbers[i - 1] ?? 0))) replayed += 1;
    }
    expect(
      cutOff.lines.some(
        (line) =>
          line['msg'] === 'the lease of a delivery partition ran out unrenewed (the store cannot be reached): stopped',
      ),
    ).toBe(true);
    console.log(
      `[store-cut] partitions resumed on the other worker ${String(resumedAfterMs)} ms after the cut (lease ${String(LEASE_MS)} ms); ` +
        `${String(withoutRepeats(byDevice).duplicates)} duplicate(s), ${String(replayed)} device(s) saw a run again`,
    );
  }, 300_000);
});
