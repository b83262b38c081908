import { afterEach, describe, expect, inject, it } from 'vitest';
import { partitionOf } from '../../src/delivery/partitions.js';
import { eventually } from '../support/eventually.js';
import { throwawayCaUnavailable } from '../support/throwaway-ca.js';
import { stopWorkerProcess, type WorkerProcess } from '../integration/support/worker-processes.js';
import { startCuttableLink, type CuttableLink } from './support/cuttable-link.js';
import { openDeliveryWorld, saveDeliveryLogs, type DeliveryWorld } from './support/delivery-world.js';
import { aMessage, recipients } from './support/numbered-notifications.js';

/**
 * A push gateway that takes a worker's requests and then stays silent for
 * longer than a lease, while their partitions move to another worker: a
 * worker joins (a clean handover, whose grace for sends in flight runs
 * out), the holder is cut from the store (its leases run out), or it is
 * stopped. The old holder (A) has, per partition: a device's notification 1 written to
 * the silent gateway (in flight past the lease), another device's waiting
 * in its gateway client's line for that address (its two slots held by the
 * silent requests), a third's waiting in its scheduler (the gateway's
 * breaker full), and notifications 2 and 3 of each behind them. The new
 * holder (B) sends them all; only then does the gateway answer A.
 *
 * What each device's pushkey received, in order of arrival at the gateway
 * (the held request counts when it arrived): 1, 2, 3; or 1, 1, 2, 3 for the
 * device whose 1 was in flight at A when its partition moved, which B sends
 * again (docs/delivery.md, "What can be sent twice"). Never an older one
 * after a newer one, nothing else twice, nothing lost.
 */
const noCa = throwawayCaUnavailable();
const PARTITIONS = 2;
const ENV = {
  DELIVERY_PARTITIONS: String(PARTITIONS),
  // Two requests in flight to one address: the breaker lets a new gateway have four, so two wait in the line.
  PUSH_GATEWAY_MAX_IN_FLIGHT_PER_ADDRESS: '2',
  // A handover waits a third of it (2 s) for sends in flight; the gateway stays silent far longer.
  SHUTDOWN_TIMEOUT_MS: '6000',
  // A lease taken over after it ran out is read after a write grace of 1 + 1 + 2 − 1 (a third of the lease) = 3 s.
  MONGODB_SERVER_SELECTION_TIMEOUT_MS: '1000',
  MONGODB_WAIT_QUEUE_TIMEOUT_MS: '1000',
  MONGODB_OPERATION_TIMEOUT_MS: '2000',
};

/** How the partitions leave A for B, which each returns (started); `moved`: how many move. */
interface Move {
  readonly name: string;
  readonly moved: number;
  /** What A logs, and how many times, when it lets them go this way. */
  readonly letGo: { readonly msg: string; readonly times: number };
  move(d: DeliveryWorld, a: WorkerProcess, link: CuttableLink): Promise<WorkerProcess>;
}

const MOVES: Move[] = [
  {
    name: 'a second worker joins: A hands half the partitions over',
    moved: PARTITIONS / 2,
    letGo: { msg: 'handed a delivery partition over', times: PARTITIONS / 2 },
    move: async (d) => d.world.startWorker(),
  },
  {
    name: 'A is cut from the store: its leases run out, B takes every partition',
    moved: PARTITIONS,
    letGo: {
      msg: 'the lease of a delivery partition ran out unrenewed (the store cannot be reached): stopped',
      times: PARTITIONS,
    },
    move: async (d, _a, link) => {
      link.cut();
      return d.world.startWorker();
    },
  },
  {
    name: 'A is stopped (SIGTERM), then B starts: B takes every partition',
    moved: PARTITIONS,
    // The silent requests outlast the shutdown's grace for sends in flight.
    letGo: { msg: 'gateway requests still in flight at shutdown: aborted', times: 1 },
    move: async (d, a) => {
      expect(await stopWorkerProcess(a, 'SIGTERM')).toBe(0);
      return d.world.startWorker();
    },
  },
];

/** Where A's notification 1 for the device waits when the partitions move (see above). */
const ROLES = ['silent', 'lined', 'parked'] as const;
type Role = (typeof ROLES)[number];

/** One user of each role in each partition: `@<role><i>:example.org`, the first i that falls in it. */
function cast(): { user: string; role: Role; partition: number }[] {
  return ROLES.flatMap((role) =>
    Array.from({ length: PARTITIONS }, (_, partition) => {
      let i = 0;
      while (partitionOf(`@${role}${String(i)}:example.org`, PARTITIONS) !== partition) i += 1;
      return { user: `@${role}${String(i)}:example.org`, role, partition };
    }),
  );
}

const pushkeyOf = (user: string) => `${user}-phone`;

const partitionsDelivered = (worker: WorkerProcess): number[] =>
  worker.lines.filter((line) => line['msg'] === 'delivering a partition').map((line) => Number(line['partition']));

async function pendingAt(worker: WorkerProcess): Promise<number> {
  const text = await (await fetch(`${worker.healthUrl}/metrics`)).text();
  return Number(/^push_worker_delivery_pending (\S+)$/m.exec(text)?.[1]);
}

let d: DeliveryWorld | undefined;
let link: CuttableLink | undefined;

afterEach(async (context) => {
  if (context.task.result?.state === 'fail' && d !== undefined)
    console.log(`[silent-gateway] worker logs in ${await saveDeliveryLogs(d, 'silent-gateway-')}`);
  link?.mend();
  await d?.close();
  await link?.close();
  d = undefined;
  link = undefined;
});

describe.skipIf(noCa !== undefined)('a gateway silent for longer than a lease while its partitions move', () => {
  it.each(MOVES)(
    '$name: no device gets an older notification after a newer one',
    async (row) => {
      const world = await openDeliveryWorld(0, ENV);
      d = world;
      const mongo = new URL(inject('mongoUrl'));
      link = await startCuttableLink({ host: mongo.hostname, port: Number(mongo.port || '27017') });
      const a = await world.world.startWorker({ MONGODB_URL: `mongodb://${link.address}/?directConnection=true` });
      await eventually(() => {
        expect(new Set(partitionsDelivered(a)).size).toBe(PARTITIONS);
      }, 60_000);
      const everyone = cast();
      const ofRole = (role: Role) => everyone.filter((c) => c.role === role).map((c) => c.user);
      await world.seedPushers(everyone.map((c) => c.user));

      // A writes the silent devices' notification 1 (both address slots), then the others' queue up behind it.
      for (const user of ofRole('silent'))
        world.gateway.behave({ kind: 'hold' }, { pushkey: pushkeyOf(user), times: 1 });
      const secured = { reply: true, timeoutMs: 30_000 } as const;
      await world.client.notify(aMessage(1), recipients(ofRole('silent')), secured);
      await world.gateway.waitForRequests(PARTITIONS, 10_000);
      for (const role of ['lined', 'parked'] as const)
        await world.client.notify(aMessage(1), recipients(ofRole(role)), secured);
      for (const n of [2, 3]) await world.client.notify(aMessage(n), recipients(everyone.map((c) => c.user)), secured);
      // Nothing but the silent requests reached the gateway: the rest waits at A.
      expect(world.gateway.requests.flatMap((r) => r.pushkeys).sort()).toEqual(ofRole('silent').map(pushkeyOf).sort());

      const b = await row.move(world, a, link);
      const arrivals = (user: string) => (world.gateway.deviceLog.get(pushkeyOf(user)) ?? []).map((x) => x.eventId);
      await eventually(() => {
        const moved = new Set(partitionsDelivered(b));
        expect(moved.size).toBe(row.moved);
        for (const c of everyone) if (moved.has(c.partition)) expect(arrivals(c.user)).toContain('$event3');
      }, 60_000);
      expect(a.lines.filter((line) => line['msg'] === row.letGo.msg)).toHaveLength(row.letGo.times);

      // The gateway wakes up: A (if it still runs) gets its answers, and anything it still sent would arrive now.
      expect(world.gateway.answerHeld()).toBe(PARTITIONS);
      const aRuns = a.child.exitCode === null && a.child.signalCode === null;
      await eventually(async () => {
        if (aRuns) expect(await pendingAt(a)).toBe(0);
        for (const c of everyone) expect(arrivals(c.user)).toContain('$event3');
      }, 30_000);

      const moved = new Set(partitionsDelivered(b));
      const received = Object.fromEntries(everyone.map((c) => [c.user, arrivals(c.user).join()]));
      const expected = Object.fromEntries(
        everyone.map((c) => [
          c.user,
          c.role === 'silent' && moved.has(c.partition) ? '$event1,$event1,$event2,$event3' : '$event1,$event2,$event3',
        ]),
      );
      expect(received).toEqual(expected);
    },
    120_000,
  );
});
