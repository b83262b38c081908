import { describe, expect, it } from 'vitest';
import type { SynapseUserRows } from '../../src/import/map-user.js';
import type { ChangeEvent, ChangeEventSink } from '../../src/import-io/change-event-publisher.js';
import type { ProgressSink } from '../../src/import-io/progress-output.js';
import type { ReportSink } from '../../src/import-io/report-writer.js';
import { runImport, type ImportRun } from '../../src/import-io/run-import.js';
import type { SynapseReader } from '../../src/import-io/synapse-reader.js';
import type { UserReport } from '../../src/import/import-tally.js';
import type { ImportStore } from '../../src/store/import-store.js';
import { InMemoryPushStore } from '../../src/store/in-memory-push-store.js';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import { aPusherRow, aRuleRow } from '../support/synapse-rows.js';

const user = (n: number) => `@u${n}:example.org`;

function rowsOf(n: number, extra: Partial<SynapseUserRows> = {}): SynapseUserRows {
  return {
    userId: user(n),
    known: true,
    rules: [aRuleRow({ user_name: user(n) })],
    enables: [],
    pushers: [aPusherRow({ user_name: user(n), ts: 1000 + n })],
    ...extra,
  };
}

/** A reader over users held in memory, in batches, as the SQL readers hand them out. */
function aReader(users: readonly SynapseUserRows[], onBatch: (index: number) => void = () => undefined): SynapseReader {
  return {
    countUsers: async () => Promise.resolve(users.length),
    async *batches(batchSize) {
      for (let start = 0, index = 0; start < users.length; start += batchSize, index += 1) {
        await Promise.resolve();
        onBatch(index);
        yield users.slice(start, start + batchSize);
      }
    },
    close: async () => Promise.resolve(),
  };
}

class Recorded implements ReportSink, ChangeEventSink, ProgressSink {
  readonly reports: UserReport[] = [];
  readonly events: ChangeEvent[] = [];
  readonly progress: number[] = [];
  write = async (report: UserReport) => {
    await Promise.resolve();
    this.reports.push(report);
  };
  publish = async (events: readonly ChangeEvent[]) => {
    await Promise.resolve();
    this.events.push(...events);
  };
  update = (state: { done: number }) => {
    this.progress.push(state.done);
  };
  done = () => undefined;
  close = async () => Promise.resolve();
}

function aRun(
  reader: SynapseReader,
  store: ImportStore | undefined,
  recorded: Recorded,
  overrides: Partial<ImportRun> = {},
): ImportRun {
  return {
    reader,
    store,
    events: recorded,
    report: recorded,
    progress: recorded,
    policy: { allowInsecureGateways: false },
    batchSize: 2,
    overwrite: false,
    stop: new AbortController().signal,
    ...overrides,
  };
}

describe('runImport', () => {
  it('writes every user, announces each written type, reports each user, counts progress by batch', async () => {
    const store = new InMemoryPushStore();
    const recorded = new Recorded();
    const result = await runImport(aRun(aReader([rowsOf(1), rowsOf(2), rowsOf(3, { pushers: [] })]), store, recorded));
    expect(result.interrupted).toBe(false);
    expect(result.summary).toMatchObject({ usersRead: 3, rules: 3, pushers: 2, skipped: {} });
    expect(result.summary.users.imported).toBe(3);
    expect(recorded.events).toEqual([
      { user_id: user(1), type: 'm.push_rules', version: 1 },
      { user_id: user(1), type: 'm.pushers', version: 1 },
      { user_id: user(2), type: 'm.push_rules', version: 1 },
      { user_id: user(2), type: 'm.pushers', version: 1 },
      { user_id: user(3), type: 'm.push_rules', version: 1 },
    ]);
    expect(recorded.reports.map((report) => [report.user, report.status, report.rules, report.pushers])).toEqual([
      [user(1), 'imported', 1, 1],
      [user(2), 'imported', 1, 1],
      [user(3), 'imported', 1, 0],
    ]);
    expect(recorded.progress).toEqual([0, 2, 3]);
    expect((await store.listPushers(user(2)))[0]?.ts).toBe(1002);
  });

  it('writes nothing in a dry run, and reports what would be imported', async () => {
    const recorded = new Recorded();
    const result = await runImport(aRun(aReader([rowsOf(1)]), undefined, recorded, { events: undefined }));
    expect(result.summary.users['dry-run']).toBe(1);
    expect(result.summary.rules).toBe(1);
    expect(recorded.reports[0]?.status).toBe('dry-run');
  });

  it('reports users and rows it skips, and writes the rest of a user', async () => {
    const store = new InMemoryPushStore();
    const recorded = new Recorded();
    const broken = rowsOf(2, { rules: [aRuleRow({ user_name: user(2), actions: '[not json' })] });
    const unknown = rowsOf(3, { known: false, rules: [], pushers: [] });
    const result = await runImport(aRun(aReader([rowsOf(1), broken, unknown]), store, recorded));
    expect(result.summary.skipped).toEqual({ 'unparsable-json': 1, 'unknown-user': 1 });
    expect(recorded.reports.map((report) => report.status)).toEqual(['imported', 'imported', 'skipped']);
    expect(recorded.reports[1]?.rules).toBe(0);
    expect(await store.listPushers(user(2))).toHaveLength(1);
    expect((await store.loadPushRules(user(3))).version).toBe(0);
  });

  it('stops after the batch it is writing when told to; the next run resumes with the users left', async () => {
    const store = new InMemoryPushStore();
    const users = [rowsOf(1), rowsOf(2), rowsOf(3), rowsOf(4), rowsOf(5)];
    const stop = new AbortController();
    const first = new Recorded();
    const stopped = await runImport(
      aRun(
        aReader(users, (index) => {
          if (index === 1) stop.abort();
        }),
        store,
        first,
        { stop: stop.signal },
      ),
    );
    // Told while the second batch was read: that batch is not written, the first is whole.
    expect(stopped.interrupted).toBe(true);
    expect(first.reports.map((report) => report.user)).toEqual([user(1), user(2)]);
    const again = new Recorded();
    const resumed = await runImport(aRun(aReader(users), store, again));
    expect(resumed.interrupted).toBe(false);
    expect(again.reports.map((report) => report.status)).toEqual([
      'unchanged',
      'unchanged',
      'imported',
      'imported',
      'imported',
    ]);
    expect(again.events.map((event) => event.user_id)).not.toContain(user(1));
  });

  it('a batch whose events could not be published is imported and announced again by the next run', async () => {
    const store = new InMemoryPushStore();
    const users = [rowsOf(1), rowsOf(2), rowsOf(3)];
    const refused = new Recorded();
    // The broker refuses the second batch's events (a nack, a lost connection): the run ends there.
    refused.publish = async (events) => {
      if (events.some((event) => event.user_id === user(3))) throw new Error('not confirmed');
      await Promise.resolve();
      refused.events.push(...events);
    };
    await expect(runImport(aRun(aReader(users), store, refused))).rejects.toThrow('not confirmed');
    const again = new Recorded();
    await runImport(aRun(aReader(users), store, again));
    expect(again.reports.map((report) => report.status)).toEqual(['unchanged', 'unchanged', 'imported']);
    expect(again.events).toEqual([
      { user_id: user(3), type: 'm.push_rules', version: 1 },
      { user_id: user(3), type: 'm.pushers', version: 1 },
    ]);
    // Announced now: the run after finds it done.
    const third = new Recorded();
    await runImport(aRun(aReader(users), store, third));
    expect(third.events).toEqual([]);
  });

  it('leaves users with data of their own alone unless overwriting', async () => {
    const store = new InMemoryPushStore();
    await store.savePushRules(user(1), 0, serverDefaultRuleset(user(1)), 'v1.19');
    const kept = new Recorded();
    await runImport(aRun(aReader([rowsOf(1)]), store, kept));
    expect(kept.reports[0]).toMatchObject({ status: 'present', rules: 0, pushers: 0 });
    expect(kept.events).toEqual([]);
    const replaced = new Recorded();
    await runImport(aRun(aReader([rowsOf(1)]), store, replaced, { overwrite: true }));
    expect(replaced.reports[0]?.status).toBe('imported');
    expect(replaced.events).toContainEqual({ user_id: user(1), type: 'm.push_rules', version: 2 });
  });

  it('tries a user whose write lost to a concurrent one again, and reports one that loses every time', async () => {
    const inner = new InMemoryPushStore();
    let losses = 0;
    const flaky: ImportStore = {
      finishImports: async (userIds) => inner.finishImports(userIds),
      importUsers: async (users, options) => {
        const outcomes = await inner.importUsers(
          users.filter((u) => u.userId !== user(2) || losses >= 2),
          options,
        );
        const lost = users.some((u) => u.userId === user(2)) && losses < 2;
        if (lost) losses += 1;
        return users.map(
          (u) =>
            outcomes.find((outcome) => outcome.userId === u.userId) ?? {
              userId: u.userId,
              status: 'conflict' as const,
            },
        );
      },
    };
    const recorded = new Recorded();
    await runImport(aRun(aReader([rowsOf(1), rowsOf(2)]), flaky, recorded));
    expect(recorded.reports.map((report) => report.status)).toEqual(['imported', 'imported']);

    const never: ImportStore = {
      finishImports: async () => Promise.resolve(),
      importUsers: async (users) =>
        Promise.resolve(users.map((u) => ({ userId: u.userId, status: 'conflict' as const }))),
    };
    const lost = new Recorded();
    const result = await runImport(aRun(aReader([rowsOf(1)]), never, lost, { conflictRetries: 2 }));
    expect(result.summary.users.conflict).toBe(1);
    expect(lost.events).toEqual([]);
  });
});
