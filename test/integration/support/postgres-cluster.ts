import { spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from './synapse-server.js';

/**
 * A throwaway PostgreSQL cluster (Debian's `postgresql` binaries): initdb in
 * a temporary folder, a port of its own on 127.0.0.1, trust
 * authentication, stopped and deleted by `stop`. As root it runs as the
 * `postgres` system user (the server refuses to run as root).
 */
export interface PostgresCluster {
  readonly host: string;
  readonly port: number;
  readonly user: string;
  /** Creates a database as Synapse wants it (UTF8, C collation). */
  createDatabase(name: string): Promise<void>;
  url(database: string, password?: string): string;
  stop(): void;
}

const USER = 'synapse';

function binDir(): string | undefined {
  const onPath = spawnSync('sh', ['-c', 'command -v pg_ctl'], { encoding: 'utf8' });
  if (onPath.status === 0 && onPath.stdout.trim() !== '') {
    const initdb = spawnSync('sh', ['-c', 'command -v initdb'], { encoding: 'utf8' });
    if (initdb.status === 0) return undefined;
  }
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root).sort((a, b) => Number(b) - Number(a));
  for (const version of versions) {
    const dir = join(root, version, 'bin');
    if (existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl'))) return dir;
  }
  return undefined;
}

function tool(name: string): string {
  const dir = binDir();
  return dir === undefined ? name : join(dir, name);
}

function systemUser(): { readonly uid: number; readonly gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
  if (id.status !== 0 || gid.status !== 0) return undefined;
  return { uid: Number(id.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

/** Why no cluster can be started here, or undefined when one can. */
export function postgresUnavailable(): string | undefined {
  const initdb = spawnSync(tool('initdb'), ['--version'], { encoding: 'utf8' });
  if (initdb.status !== 0) return 'PostgreSQL is not installed (apt-get install postgresql)';
  if (process.getuid?.() === 0 && systemUser() === undefined)
    return 'running as root without a postgres system user to run the server as';
  return undefined;
}

export async function startPostgres(): Promise<PostgresCluster> {
  const owner = systemUser();
  const dir = mkdtempSync(join(tmpdir(), 'pg-import-'));
  if (owner !== undefined) chownSync(dir, owner.uid, owner.gid);
  const data = join(dir, 'data');
  const port = await freePort();
  const as = owner === undefined ? {} : { uid: owner.uid, gid: owner.gid };
  const run = (command: string, args: readonly string[]) => {
    const result = spawnSync(tool(command), args, { ...as, encoding: 'utf8', cwd: dir });
    if (result.status !== 0) throw new Error(`${command} failed: ${result.stderr}${result.stdout}`);
  };
  run('initdb', ['-D', data, '-U', USER, '--auth=trust', '--encoding=UTF8', '--locale=C']);
  const stop = () => {
    spawnSync(tool('pg_ctl'), ['-D', data, 'stop', '-m', 'fast', '-w'], { ...as, stdio: 'ignore', cwd: dir });
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    run('pg_ctl', [
      '-D',
      data,
      '-l',
      join(dir, 'server.log'),
      '-w',
      '-o',
      `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`,
      'start',
    ]);
  } catch (error) {
    stop();
    throw error;
  }
  const host = '127.0.0.1';
  const url = (database: string, password?: string) =>
    `postgresql://${USER}${password === undefined ? '' : `:${password}`}@${host}:${port}/${database}`;
  return {
    host,
    port,
    user: USER,
    url,
    createDatabase: async (name) => {
      const client = new pg.Client({ connectionString: url('postgres') });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE ${name} ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0`);
      } finally {
        await client.end();
      }
    },
    stop,
  };
}
