import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/load-config.js';
import { parseWorkerRoles, type WorkerRole } from '../../src/config/worker-roles.js';

/** The roles a loaded configuration runs, in the documented order. */
function rolesRun(env: NodeJS.ProcessEnv): WorkerRole[] {
  const parsed = parseWorkerRoles(loadConfig(env).worker.roles);
  if (!parsed.ok) throw new Error(parsed.problem);
  return (Object.entries(parsed.roles) as [WorkerRole, boolean][]).filter(([, on]) => on).map(([role]) => role);
}

/** The default file with `worker.roles` replaced, where CONFIG_FILE can point. */
function fileWithRoles(roles: unknown): string {
  const defaults = JSON.parse(readFileSync(new URL('../../config/default.json', import.meta.url), 'utf8')) as object;
  const file = join(mkdtempSync(join(tmpdir(), 'push-config-')), 'config.json');
  writeFileSync(file, JSON.stringify({ ...defaults, worker: { roles } }));
  return file;
}

const ALL = 'the roles are rpc, read, evaluate, deliver';

describe('worker roles (worker.roles, WORKER_ROLES)', () => {
  it.each([
    { variable: undefined, runs: ['rpc', 'read', 'evaluate', 'deliver'] },
    { variable: '', runs: ['rpc', 'read', 'evaluate', 'deliver'] },
    { variable: 'deliver', runs: ['deliver'] },
    { variable: 'rpc, read', runs: ['rpc', 'read'] },
    { variable: 'deliver,evaluate', runs: ['evaluate', 'deliver'] },
    { variable: 'read,rpc,deliver,evaluate', runs: ['rpc', 'read', 'evaluate', 'deliver'] },
  ])('WORKER_ROLES=$variable runs $runs', ({ variable, runs }) => {
    expect(rolesRun(variable === undefined ? {} : { WORKER_ROLES: variable })).toEqual(runs);
  });

  it.each([
    { variable: 'rpc,send', problem: `"send" is not a role (${ALL})` },
    { variable: 'RPC', problem: `"RPC" is not a role (${ALL})` },
    { variable: 'delivery', problem: `"delivery" is not a role (${ALL})` },
    { variable: ' , ', problem: `names no role: give one or more (${ALL})` },
    { variable: 'read,read', problem: 'names "read" twice' },
  ])('refuses WORKER_ROLES=$variable, naming the setting and the problem', ({ variable, problem }) => {
    expect(() => loadConfig({ WORKER_ROLES: variable })).toThrow(
      new ConfigError(`invalid configuration: worker.roles (WORKER_ROLES) ${problem}`),
    );
  });

  it.each([
    { roles: [], problem: 'names no role' },
    { roles: ['evaluate', 'sending'], problem: '"sending" is not a role' },
  ])('refuses worker.roles $roles in the file', ({ roles, problem }) => {
    expect(() => loadConfig({ CONFIG_FILE: fileWithRoles(roles) })).toThrow(problem);
  });

  it('refuses worker.roles in the file that is not a list of names', () => {
    expect(() => loadConfig({ CONFIG_FILE: fileWithRoles('rpc,read') })).toThrow('worker.roles (WORKER_ROLES)');
  });

  it('decides the roles once, frozen', () => {
    const parsed = parseWorkerRoles(['deliver']);
    if (!parsed.ok) throw new Error(parsed.problem);
    expect(Object.isFrozen(parsed.roles)).toBe(true);
    expect(Object.isFrozen(loadConfig({ WORKER_ROLES: 'deliver' }).worker.roles)).toBe(true);
  });
});
