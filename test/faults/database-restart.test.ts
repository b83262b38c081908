import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { logLines, openFaultWorld, type FaultWorld } from './support/fault-world.js';
import { runLoad, tally } from './support/load.js';
import { services } from './support/services.js';

/**
 * Stop the MongoDB stand-in under load and start it again. The driver
 * fails each operation after its server-selection timeout (1 s here), the
 * worker answers Unavailable, and once the server is back the driver's
 * own monitoring reconnects and replies are correct again. The stand-in
 * is stopped with SIGTERM and keeps its data file.
 */
const USERS = Array.from({ length: 4 }, (_, i) => `@db${i}:example.org`);
const RECOVER_WITHIN_MS = 10_000;
/** The callers' deadline: every request is answered before it (an Unavailable is an answer). */
const CALL_TIMEOUT_MS = 8_000;
/**
 * Why a request met a stopped store, in the words the worker logs. Which of
 * them a given request gets depends only on which timer fires first (the
 * driver's server selection, `mongodb.operationTimeoutMs`, or the request's
 * own deadline), which a busy machine reorders: all are the same outcome.
 */
const STORE_OUTAGE_CAUSE = new RegExp(
  [
    '^MongoDB is unavailable: ',
    '^\\w+ took longer than \\d+ ms \\(mongodb\\.operationTimeoutMs\\)$',
    "^the request's deadline (came while|had passed before) \\w+",
  ].join('|'),
);
let world: FaultWorld;

beforeAll(async () => {
  world = await openFaultWorld(2, { MONGODB_SERVER_SELECTION_TIMEOUT_MS: '1000' });
  for (const user of USERS) expect((await world.client.request({ op: 'get_pushrules', user_id: user })).ok).toBe(true);
});
afterAll(async () => {
  await services('start-mongo');
  await world.close();
});

describe('the MongoDB stand-in restarted under load', () => {
  it('answers Unavailable during the outage, correctly after it, and loses nothing written before', async () => {
    let running = true;
    const load = runLoad({
      client: world.client,
      concurrency: 8,
      timeoutMs: CALL_TIMEOUT_MS,
      retry: false,
      running: () => running,
      next: (i) => {
        const user = USERS[i % USERS.length] ?? '';
        const body =
          i % 2 === 0
            ? {
                op: 'set_pushrule',
                user_id: user,
                scope: 'global',
                kind: 'room',
                rule_id: `!d${i}:example.org`,
                rule: { actions: [] },
              }
            : { op: 'get_pushrules', user_id: user };
        return { user, messageId: `db-${i}`, body };
      },
    });
    await sleep(1_500);
    // The stand-in refuses work from the signal on, before it has exited.
    const stoppedAt = Date.now();
    await services('stop-mongo');
    await sleep(4_000);
    const startedAt = Date.now();
    await services('start-mongo');
    await sleep(RECOVER_WITHIN_MS / 2);
    running = false;
    const outcomes = await load;

    const counts = tally(outcomes.map((o) => o.outcome));
    const unexpected = logLines(world, 'request failed unexpectedly').map(
      (l) => l['err'] as { message?: string; type?: string } | undefined,
    );
    expect({ kinds: Object.keys(counts).sort(), unexpected }).toEqual({ kinds: ['Unavailable', 'ok'], unexpected: [] });
    const unavailable = outcomes.filter((o) => o.outcome === 'Unavailable');
    // Unavailable only for requests that met the outage. Every request was
    // answered before the caller's deadline: a `timeout` would be a kind above.
    for (const o of unavailable) expect(o.doneAt).toBeGreaterThan(stoppedAt);
    expect(unavailable.length).toBeGreaterThan(0);
    // Recovered: the last Unavailable came soon after the start, and every request since was served.
    const firstOkMs =
      Math.min(...outcomes.filter((o) => o.outcome === 'ok' && o.sentAt > startedAt).map((o) => o.doneAt)) - startedAt;
    const lastUnavailableMs = Math.max(...unavailable.map((o) => o.doneAt)) - startedAt;
    expect(lastUnavailableMs).toBeLessThan(RECOVER_WITHIN_MS);
    expect(outcomes.filter((o) => o.sentAt > stoppedAt && o.outcome === 'ok').length).toBeGreaterThan(0);

    for (const user of USERS) {
      const writes = outcomes.filter((o) => o.request.user === user && o.request.body['op'] === 'set_pushrule');
      const acknowledged = writes.filter((o) => o.outcome === 'ok').map((o) => o.request.body['rule_id']);
      const maybe = new Set(writes.filter((o) => o.outcome === 'Unavailable').map((o) => o.request.body['rule_id']));
      const stored = await world.stored(user);
      for (const id of acknowledged) expect(stored.ruleIds).toContain(id);
      // A write answered Unavailable may have reached the disk before the
      // reply was lost; nothing else may be there, and nothing twice.
      for (const id of stored.ruleIds) if (!acknowledged.includes(id)) expect(maybe.has(id)).toBe(true);
      expect(stored.version).toBe(1 + stored.ruleIds.length);
    }
    // Operators see why: every Unavailable reply is logged with its cause.
    const notServed = logLines(world, 'request not served');
    expect(notServed.length).toBeGreaterThan(0);
    for (const line of notServed)
      expect(line).toMatchObject({
        outcome: 'Unavailable',
        cause: expect.stringMatching(STORE_OUTAGE_CAUSE) as unknown,
      });
    const late = notServed.filter((l) => Date.parse(String(l['time'])) > startedAt + 1_000);
    if (late.length > 0) console.info(late.slice(0, 3));
    console.info(
      `[fault: database restart] stand-in down ${startedAt - stoppedAt} ms; ${outcomes.length} requests: ${JSON.stringify(counts)}; ` +
        `first reply ok ${firstOkMs} ms and last Unavailable ${lastUnavailableMs} ms after the start command; ` +
        'every acknowledged write still stored, none twice',
    );
  });

  it('a worker started while the database is down waits for it, then serves', async () => {
    await services('stop-mongo');
    const starting = world.startWorker();
    await sleep(2_500);
    await services('start-mongo');
    const worker = await starting;
    expect(worker.lines.filter((l) => l['msg'] === 'cannot reach MongoDB; retrying').length).toBeGreaterThan(0);
    expect((await world.client.request({ op: 'get_pushers', user_id: USERS[0] })).ok).toBe(true);
  });
});
