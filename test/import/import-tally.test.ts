import { describe, expect, it } from 'vitest';
import { anythingSkipped, formatSummary, ImportTally, type SummaryContext } from '../../src/import/import-tally.js';
import type { MappedUser } from '../../src/import/map-user.js';

function aMappedUser(overrides: Partial<MappedUser> = {}): MappedUser {
  return { userId: '@a:x', pushers: [], rules: 2, skipped: [], notes: [], ...overrides };
}

const CONTEXT: SummaryContext = {
  source: 'sqlite:/h.db',
  dryRun: false,
  elapsedMs: 12_345,
  events: { published: true, exchange: 'matrix.account_data' },
  interrupted: false,
};

describe('ImportTally', () => {
  it.each([
    ['imported', 2, 1],
    ['dry-run', 2, 1],
    ['unchanged', 0, 0],
    ['present', 0, 0],
    ['conflict', 0, 0],
    ['skipped', 0, 0],
  ] as const)('counts the rules and pushers of a user %s as written: %i, %i', (status, rules, pushers) => {
    const tally = new ImportTally();
    const pusher = {
      user_id: '@a:x',
      kind: 'email',
      app_id: 'm.email',
      pushkey: 'a@x',
      app_display_name: 'E',
      device_display_name: 'E',
      lang: 'en',
      data: {},
      enabled: true,
    } as const;
    const report = tally.add(aMappedUser({ pushers: [pusher] }), status);
    expect(report).toMatchObject({ user: '@a:x', status, rules, pushers });
    expect(tally.summary()).toMatchObject({ rules, pushers, usersRead: 1, users: { [status]: 1 } });
  });

  it('counts skipped items by reason whatever became of their user, and notes by kind', () => {
    const tally = new ImportTally();
    tally.add(
      aMappedUser({
        skipped: [
          { table: 'push_rules', ruleId: 'global/override/x', reason: 'unparsable-json', detail: '' },
          { table: 'pushers', appId: 'a', pushkeyTag: '12345678', reason: 'invalid-pusher', detail: '' },
        ],
        notes: [{ kind: 'priority-tie', ruleId: 'global/override/y', detail: '' }],
      }),
      'present',
    );
    tally.add(
      aMappedUser({ skipped: [{ table: 'push_rules', ruleId: 'r', reason: 'unparsable-json', detail: '' }] }),
      'imported',
    );
    const summary = tally.summary();
    expect(summary.skipped).toEqual({ 'unparsable-json': 2, 'invalid-pusher': 1 });
    expect(summary.notes).toEqual({ 'priority-tie': 1 });
    expect(anythingSkipped(summary)).toBe(true);
    expect(anythingSkipped(new ImportTally().summary())).toBe(false);
  });
});

describe('formatSummary', () => {
  it('gives users by outcome, rules and pushers, skips by reason, and where the events went', () => {
    const tally = new ImportTally();
    tally.add(
      aMappedUser({ skipped: [{ table: 'push_rules', ruleId: 'r', reason: 'synapse-only-default-rule', detail: '' }] }),
      'imported',
    );
    tally.add(aMappedUser(), 'present');
    expect(formatSummary(tally.summary(), { ...CONTEXT, reportFile: 'r.jsonl' })).toBe(
      [
        'Import from sqlite:/h.db finished in 12.3 s',
        'users read: 2',
        '  1 imported',
        '  1 already present, left alone (--overwrite replaces them)',
        'rules imported: 2; pushers imported: 0',
        'skipped, by reason (docs/import-from-synapse.md#what-is-skipped-and-why):',
        '  synapse-only-default-rule: 1',
        'change events: published to matrix.account_data',
        'per-user report: r.jsonl',
      ].join('\n'),
    );
  });

  it.each([
    ['a dry run', { dryRun: true }, ['(dry run: nothing written)', 'rules would be imported: 0'], ['change events']],
    [
      'a run without events',
      { events: { published: false, why: '--no-events' } },
      ['change events: NOT published (--no-events)'],
      [],
    ],
    [
      'an interrupted run',
      { interrupted: true },
      ['stopped by Ctrl-C after 12.3 s', 'run the same command again to resume'],
      [],
    ],
  ] as const)('words %s', (_name, context, present, absent) => {
    const text = formatSummary(new ImportTally().summary(), { ...CONTEXT, ...context });
    for (const part of present) expect(text).toContain(part);
    for (const part of absent) expect(text).not.toContain(part);
  });
});
