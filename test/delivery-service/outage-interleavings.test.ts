import { describe, expect, it, vi } from 'vitest';
import type { GatewayExchange } from '../../src/delivery/response-outcome.js';
import { seededRandom } from '../support/seeded-random.js';
import {
  aDelivery,
  ALICE,
  APP,
  aPusher,
  aWorld,
  BOB,
  OK,
  useSchedulerWorlds,
  type World,
} from '../support/scheduler-world.js';

useSchedulerWorlds();

/**
 * The outage bench's per-device check, over random interleavings: while a
 * gateway fails, notifications arrive, the partition's lease comes into
 * doubt and back, is lost and taken back from the store (what arrived
 * meanwhile waits in the queue, taken in with it), pushers change; the
 * gateway answers late, sends outliving a lost lease. Once it answers
 * again, each device gets exactly the newest `maxPending` of what it did
 * not get before, once each, in order. Seeded: a failure names its seed
 * and its steps, to be replayed.
 */

const MAX_PENDING = 3;
const SEEDS = 200;
const CAROL = '@carol:example.org';
const USERS = [ALICE, BOB, CAROL] as const;
const PHONE = (userId: string) => `${userId}-phone`;

/** Notification `n` to every user's phone, as the intake plans one `notify`. */
const fanOut = (n: number) =>
  USERS.map((userId) =>
    aDelivery(n, { userId, acceptedAt: Date.now(), devices: [{ appId: APP, pushkey: PHONE(userId) }] }),
  );

interface Run {
  readonly world: World;
  readonly random: () => number;
  readonly steps: string[];
  /** `<pushkey> <event>` of every request a gateway answered 200. */
  readonly delivered: string[];
  up: boolean;
  released: boolean;
  published: number;
}

async function publish(run: Run): Promise<void> {
  run.published += 1;
  const n = run.published;
  if (run.released) {
    // Not this worker's partition now: the part waits in its queue, read with the partition when it is taken back.
    await run.world.store.accept(
      { id: `queued-${String(n)}`, recipients: 3, devices: 3, acceptedAt: Date.now() },
      fanOut(n),
    );
    run.steps.push(`queued $${String(n)}`);
  } else {
    await run.world.take(fanOut(n));
    run.steps.push(`took $${String(n)}`);
  }
}

async function loseLease(run: Run): Promise<void> {
  await run.world.scheduler.releasePartition(0, 0, false);
  run.released = true;
  run.steps.push('lease lost');
}

async function takeBack(run: Run): Promise<void> {
  run.world.scheduler.hold(await run.world.pending());
  run.released = false;
  run.steps.push('taken back');
}

function toggleDoubt(run: Run): void {
  run.world.leaseHolds = !run.world.leaseHolds;
  // A renewal that went through wakes the queues that waited for it (the coordinator's `resume`).
  if (run.world.leaseHolds) run.world.scheduler.resume();
  run.steps.push(run.world.leaseHolds ? 'lease holds' : 'lease in doubt');
}

async function elapse(run: Run, maxMs: number): Promise<void> {
  const ms = Math.floor(run.random() * maxMs);
  await vi.advanceTimersByTimeAsync(ms);
  run.steps.push(`+${String(ms)} ms`);
}

/** One outage: what each device got after it, against the newest `MAX_PENDING` of its backlog; the wrong ones. */
async function outage(seed: number): Promise<string[]> {
  const random = seededRandom(seed);
  const world = aWorld({ backlog: { maxPending: MAX_PENDING } });
  for (const userId of USERS) world.pushers.set(userId, [aPusher(userId, PHONE(userId))]);
  const run: Run = { world, random, steps: [], delivered: [], up: true, released: false, published: 0 };
  world.gateway.answerWith(async (request) => {
    // Answered up to 15 s later: some answers outlive a lost lease, or the outage's end.
    const sentWhileUp = run.up;
    await new Promise((resolve) => setTimeout(resolve, Math.floor(random() * 15_000)));
    if (!(sentWhileUp && run.up)) return { kind: 'response', status: 503 } satisfies GatewayExchange;
    run.delivered.push(`${request.pushkeys[0] ?? ''} ${request.event}`);
    return OK;
  });
  await publish(run);
  await publish(run);
  await vi.advanceTimersByTimeAsync(60_000);
  const before = new Set(run.delivered);
  run.up = false;
  const backlogFrom = run.published + 1;
  for (let step = 0; step < 40; step += 1) {
    const roll = random();
    if (roll < 0.45) await publish(run);
    else if (roll < 0.55 && !run.released) await loseLease(run);
    else if (roll < 0.65 && run.released) await takeBack(run);
    else if (roll < 0.72) toggleDoubt(run);
    else if (roll < 0.75) {
      world.scheduler.pushersChanged(USERS[Math.floor(random() * USERS.length)] ?? ALICE);
      run.steps.push('pushers changed');
    } else await elapse(run, 5_000);
  }
  run.up = true;
  run.steps.push('gateway up');
  if (!world.leaseHolds) toggleDoubt(run);
  if (!run.released && random() < 0.5) {
    await elapse(run, 3_000);
    await loseLease(run);
    await elapse(run, 3_000);
  }
  if (run.released) await takeBack(run);
  await vi.advanceTimersByTimeAsync(4 * 3_600_000);
  const backlog = Array.from({ length: run.published - backlogFrom + 1 }, (_, i) => `$${String(backlogFrom + i)}`);
  const newest = backlog.slice(-MAX_PENDING);
  const wrong: string[] = [];
  for (const userId of USERS) {
    const prefix = `${PHONE(userId)} `;
    const got = run.delivered
      .filter((entry) => entry.startsWith(prefix) && !before.has(entry))
      .map((entry) => entry.slice(prefix.length))
      .filter((event) => backlog.includes(event));
    if (got.join(' ') !== newest.join(' '))
      wrong.push(
        `seed ${String(seed)}, ${userId} got ${got.join(' ')}, not ${newest.join(' ')}: ${run.steps.join(', ')}`,
      );
  }
  return wrong;
}

describe('a gateway outage, over random interleavings of arrivals, lease doubts, lost leases and take-backs', () => {
  it(`gives each device exactly the newest ${String(MAX_PENDING)} of its backlog, once each and in order (${String(SEEDS)} seeds)`, async () => {
    const wrong: string[] = [];
    for (let seed = 1; seed <= SEEDS; seed += 1) wrong.push(...(await outage(seed)));
    expect(wrong).toEqual([]);
  }, 60_000);
});
