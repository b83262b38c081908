import { describe, expect, it } from 'vitest';
import { DEFAULT_BATCH_SIZE, parseImportArgs } from '../../src/import/import-options.js';

const SQLITE = ['--from', 'sqlite:/var/lib/synapse/homeserver.db'];

describe('parseImportArgs', () => {
  it('reads a minimal command line with the defaults', () => {
    expect(parseImportArgs(SQLITE)).toEqual({
      ok: true,
      options: {
        source: {
          kind: 'sqlite',
          path: '/var/lib/synapse/homeserver.db',
          display: 'sqlite:/var/lib/synapse/homeserver.db',
        },
        dryRun: false,
        overwrite: false,
        allowSkips: false,
        noEvents: false,
        batchSize: DEFAULT_BATCH_SIZE,
      },
    });
  });

  it.each([
    ['--dry-run', ['--dry-run'], { dryRun: true }],
    ['--overwrite', ['--overwrite'], { overwrite: true }],
    ['--allow-skips', ['--allow-skips'], { allowSkips: true }],
    ['--no-events', ['--no-events'], { noEvents: true }],
    ['--report FILE', ['--report', 'out.jsonl'], { reportFile: 'out.jsonl' }],
    ['--report=FILE', ['--report=out.jsonl'], { reportFile: 'out.jsonl' }],
    ['--batch-size N', ['--batch-size', '50'], { batchSize: 50 }],
    ['--users, trimmed, each once, in order', ['--users', '@b:x, @a:x,@b:x'], { users: ['@b:x', '@a:x'] }],
    ['--users twice', ['--users', '@a:x', '--users=@c:x'], { users: ['@a:x', '@c:x'] }],
    [
      '--dry-run with --overwrite (nothing is written either way)',
      ['--dry-run', '--overwrite'],
      { dryRun: true, overwrite: true },
    ],
  ] as const)('reads %s', (_name, args, expected) => {
    const parsed = parseImportArgs([...SQLITE, ...args]);
    expect(parsed.ok && 'options' in parsed ? parsed.options : parsed).toMatchObject(expected);
  });

  it.each([
    ['no --from', [], '--from is required'],
    ['--from without a value', ['--from'], '--from needs a value'],
    ['an unknown source', ['--from', 'mysql://x/y'], '--from takes postgresql://'],
    ['an unknown argument', [...SQLITE, '--fast'], 'unknown argument "--fast"'],
    ['a flag with a value', [...SQLITE, '--dry-run=yes'], '--dry-run takes no value'],
    ['--batch-size 0', [...SQLITE, '--batch-size', '0'], '--batch-size takes a whole number from 1 to 10000'],
    ['--batch-size 1.5', [...SQLITE, '--batch-size', '1.5'], '--batch-size takes a whole number'],
    ['--batch-size too large', [...SQLITE, '--batch-size', '10001'], '--batch-size takes a whole number'],
    ['--users without a list', [...SQLITE, '--users'], '--users needs a comma-separated list'],
    ['--users of commas', [...SQLITE, '--users', ','], '--users needs at least one user ID'],
    ['--users with a non-ID', [...SQLITE, '--users', '@a:x,bob'], '--users: "bob" is not a user ID'],
    ['--report without a file', [...SQLITE, '--report'], '--report needs a file name'],
  ] as const)('refuses %s, saying what is wrong', (_name, args, message) => {
    const parsed = parseImportArgs(args);
    expect(parsed.ok).toBe(false);
    expect(parsed.ok ? '' : parsed.message).toContain(message);
  });

  it('answers --help', () => {
    expect(parseImportArgs(['--help'])).toEqual({ ok: true, help: true });
  });
});
