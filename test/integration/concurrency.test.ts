import { describe, expect, it } from 'vitest';
import type { ContractReply } from './support/rpc-caller.js';
import { useWorkerPool } from './support/worker-pool.js';
import { MongoClient } from 'mongodb';
import { inject } from 'vitest';

const USER = '@busy:example.org';
const WORKERS = 3;
const REQUESTS = 200;

const pool = useWorkerPool(WORKERS);

/** Calls, retrying `Unavailable` (503) as the contract allows; counts the retries. */
let callerRetries = 0;
async function call(body: Record<string, unknown>): Promise<ContractReply> {
  for (let attempt = 0; ; attempt += 1) {
    const reply = await pool.caller.call(pool.names.queue, { user_id: USER, ...body });
    if (reply.ok || reply.error?.kind !== 'Unavailable' || attempt >= 5) return reply;
    callerRetries += 1;
  }
}

function conflictsLogged(): { conflicts: number; servedBy: number[] } {
  const served = pool.workers.map((w) => w.lines.filter((l) => l['msg'] === 'request served'));
  const conflicts = served.flat().reduce((sum, l) => sum + Number(l['conflicts'] ?? 0), 0);
  return { conflicts, servedBy: served.map((s) => s.length) };
}

/** The workers' log lines of the rule writes they served. */
function servedWrites(): Record<string, unknown>[] {
  return pool.workers
    .flatMap((w) => w.lines)
    .filter(
      (l) =>
        l['msg'] === 'request served' && (l['op'] === 'set_pushrule_enabled' || l['op'] === 'set_pushrule_actions'),
    );
}

/**
 * The `count` lines logged after the first `skip`, once they are all in: a
 * worker logs right after replying, and the pipe may bring the line a
 * little after the reply.
 */
async function servedWritesAfter(skip: number, count: number): Promise<Record<string, unknown>[]> {
  const deadline = Date.now() + 10_000;
  while (servedWrites().length < skip + count && Date.now() < deadline)
    await new Promise((resolve) => setTimeout(resolve, 50));
  const lines = servedWrites().slice(skip);
  expect(lines).toHaveLength(count);
  return lines;
}

type Global = { global: Record<string, { rule_id: string; enabled: boolean; actions: unknown[] }[]> };

describe(`${WORKERS} worker processes, one user`, () => {
  it(`${REQUESTS} concurrent set_pushrule with distinct IDs → all present exactly once`, async () => {
    expect((await call({ op: 'get_pushrules' })).ok).toBe(true);
    const replies = await Promise.all(
      Array.from({ length: REQUESTS }, async (_, i) =>
        call({
          op: 'set_pushrule',
          scope: 'global',
          kind: 'override',
          rule_id: `r${i}`,
          rule: { actions: ['notify'], conditions: [] },
        }),
      ),
    );
    expect(replies.filter((r) => !r.ok)).toEqual([]);
    const { global } = (await call({ op: 'get_pushrules' })).body as Global;
    const ids = (global['override'] ?? []).map((r) => r.rule_id).filter((id) => !id.startsWith('.'));
    expect(ids).toHaveLength(REQUESTS);
    expect(new Set(ids)).toEqual(new Set(Array.from({ length: REQUESTS }, (_, i) => `r${i}`)));
    const stats = conflictsLogged();
    console.info(
      `[concurrency] ${REQUESTS} inserts: ${stats.conflicts} CAS conflicts retried by workers, ${callerRetries} caller retries, served per worker ${stats.servedBy.join('/')}`,
    );
    expect(stats.servedBy.filter((count) => count > 0).length).toBeGreaterThan(1);
  });

  it('interleaved set_pushrule_enabled / set_pushrule_actions on shared rules → a serial order of the requests', async () => {
    const mongo = await MongoClient.connect(inject('mongoUrl'));
    const versionOf = async () =>
      (
        (await mongo
          .db(pool.names.database)
          .collection('account_data')
          .findOne({ _id: USER as never })) as { version: number } | null
      )?.version ?? 0;
    const startVersion = await versionOf();
    const shared = ['r0', 'r1', 'r2', 'r3'];
    const requests = Array.from({ length: REQUESTS }, (_, i) => {
      // Each rule gets both kinds of request, with differing values.
      const ruleId = shared[Math.floor(i / 2) % shared.length] ?? 'r0';
      const address = { scope: 'global', kind: 'override', rule_id: ruleId };
      return i % 2 === 0
        ? { op: 'set_pushrule_enabled', ...address, enabled: Math.floor(i / 8) % 2 === 0 }
        : { op: 'set_pushrule_actions', ...address, actions: [{ set_tweak: 'sound', value: `req-${i}` }] };
    });
    const before = conflictsLogged().conflicts;
    const servedBefore = servedWrites().length;
    const replies = await Promise.all(requests.map(async (r) => call(r)));
    expect(replies.filter((r) => !r.ok)).toEqual([]);

    // Every write was applied exactly once on top of the one before it: the
    // version moved by exactly the number of writes that changed something
    // (a lost update would leave it short; a double apply would push it
    // over). An enabled flag set to the value it already had, in the order
    // the workers happened to serve the requests, changed nothing: the
    // workers log those `unchanged`, and every set of actions is a change.
    const served = await servedWritesAfter(servedBefore, REQUESTS);
    const unchanged = served.filter((l) => l['unchanged'] === true);
    expect(unchanged.every((l) => l['op'] === 'set_pushrule_enabled')).toBe(true);
    expect((await versionOf()) - startVersion).toBe(REQUESTS - unchanged.length);
    await mongo.close();

    // And the final value of each field is one some request set.
    const { global } = (await call({ op: 'get_pushrules' })).body as Global;
    for (const ruleId of shared) {
      const rule = (global['override'] ?? []).find((r) => r.rule_id === ruleId);
      const mine = requests.filter((r) => r.rule_id === ruleId);
      expect(mine.filter((r) => 'enabled' in r).map((r) => r.enabled)).toContain(rule?.enabled);
      expect(mine.filter((r) => 'actions' in r).map((r) => r.actions)).toContainEqual(rule?.actions);
    }
    console.info(
      `[concurrency] ${REQUESTS} interleaved updates (${unchanged.length} changed nothing): ` +
        `${conflictsLogged().conflicts - before} CAS conflicts retried by workers, ${callerRetries} caller retries in total`,
    );
  });
});
