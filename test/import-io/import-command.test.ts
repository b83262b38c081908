import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EXIT, importCommand } from '../../src/import-io/import-command.js';
import { aPusherRow, aRuleRow } from '../support/synapse-rows.js';
import { writeSynapseSqlite } from '../support/synapse-sqlite.js';
import { ALICE } from '../support/builders.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'import-command-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** The command with no services: a dry run, or a run that fails before it needs the store. */
async function run(args: readonly string[], env: NodeJS.ProcessEnv = {}) {
  let stdout = '';
  let stderr = '';
  const status = await importCommand(args, env, {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    stop: new AbortController().signal,
  });
  return { status, stdout, stderr };
}

describe('npm run import:synapse', () => {
  it('reads and reports in a dry run, writing nothing and needing no store', async () => {
    const db = join(dir, 'homeserver.db');
    writeSynapseSqlite(db, { users: [ALICE], rules: [aRuleRow()], pushers: [aPusherRow()] });
    const report = join(dir, 'report.jsonl');
    const result = await run(['--from', `sqlite:${db}`, '--dry-run', '--report', report], {
      MONGODB_URL: 'mongodb://127.0.0.1:1/never',
    });
    expect(result.stderr).toContain('progress: 1/1 users (100%)');
    expect(result.stdout).toContain('rules would be imported: 1; pushers would be imported: 1');
    expect(result.status).toBe(EXIT.done);
    expect(JSON.parse(readFileSync(report, 'utf8'))).toMatchObject({
      user: ALICE,
      status: 'dry-run',
      rules: 1,
      pushers: 1,
    });
  });

  it('exits 1 when a row is skipped, 0 with --allow-skips', async () => {
    const db = join(dir, 'homeserver.db');
    writeSynapseSqlite(db, { users: [ALICE], rules: [aRuleRow({ actions: '[not json' })] });
    expect((await run(['--from', `sqlite:${db}`, '--dry-run'])).status).toBe(EXIT.skipped);
    expect((await run(['--from', `sqlite:${db}`, '--dry-run', '--allow-skips'])).status).toBe(EXIT.done);
  });

  it.each([
    ['bad arguments', () => ['--from', 'mysql://x/y'], EXIT.usage, '--from takes postgresql://'],
    ['bad configuration', () => ['--from', 'sqlite:x.db'], EXIT.usage, 'MONGODB_OPERATION_TIMEOUT_MS'],
    [
      'a file that does not open',
      () => ['--from', `sqlite:${join(dir, 'missing.db')}`],
      EXIT.failed,
      'cannot open the SQLite file',
    ],
    [
      'a database without Synapse\u2019s tables',
      () => {
        writeSynapseSqlite(join(dir, 'other.db'), { without: ['pushers'] });
        return ['--from', `sqlite:${join(dir, 'other.db')}`];
      },
      EXIT.failed,
      'is not a Synapse database: no table pushers',
    ],
    [
      'a PostgreSQL server that does not answer (password not shown)',
      () => ['--from', 'postgresql://synapse:s3cret@127.0.0.1:1/synapse'],
      EXIT.failed,
      'cannot connect to postgresql://synapse:***@127.0.0.1:1/synapse',
    ],
    [
      'a store that does not answer',
      () => {
        writeSynapseSqlite(join(dir, 'h.db'), { users: [ALICE] });
        return ['--from', `sqlite:${join(dir, 'h.db')}`];
      },
      EXIT.failed,
      'cannot reach the store',
    ],
  ] as const)('exits with a one-line message on %s', async (name, args, status, message) => {
    const env =
      name === 'bad configuration'
        ? { MONGODB_OPERATION_TIMEOUT_MS: 'soon' }
        : {
            MONGODB_URL: 'mongodb://127.0.0.1:1/x',
            MONGODB_SERVER_SELECTION_TIMEOUT_MS: '200',
          };
    const result = await run(args(), env);
    expect(result.status).toBe(status);
    expect(result.stderr).toContain(message);
    expect(result.stderr).not.toMatch(/\n\s+at /);
    expect(result.stderr).not.toContain('s3cret');
  });

  it('prints its usage with --help', async () => {
    const result = await run(['--help']);
    expect(result.status).toBe(EXIT.done);
    expect(result.stdout).toContain('Usage: npm run import:synapse -- --from');
  });
});
