import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The client as a homeserver project gets it (docs/client.md): the package
 * packed with `npm pack`, installed from the tarball into a project of its
 * own, imported as `matrix-push-worker/client` and type-checked with tsc.
 * Without the internet: the package's dependencies are copied from this
 * checkout's node_modules into the project first, so that
 * `npm install --offline` finds every one of them already there.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');

interface PackageJson {
  readonly dependencies?: Readonly<Record<string, string>>;
  readonly optionalDependencies?: Readonly<Record<string, string>>;
}

let scratch = '';
let tarball = '';

function npm(args: readonly string[], cwd: string): string {
  return execFileSync('npm', args, {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, npm_config_update_notifier: 'false' },
  });
}

/** Copies every package `pkg` needs at run time, as Node resolves it from `from`, into `project`/node_modules. */
function copyDependencies(from: string, pkg: PackageJson, project: string): void {
  const modules = realpathSync(join(ROOT, 'node_modules'));
  const copied = new Set<string>();
  const walk = (dir: string, manifest: PackageJson): void => {
    const optional = manifest.optionalDependencies ?? {};
    for (const name of Object.keys({ ...manifest.dependencies, ...optional })) {
      const at = resolvePackage(dir, name);
      if (at === undefined) {
        if (name in optional) continue;
        throw new Error(`${name} (needed by ${dir}) is not installed`);
      }
      if (copied.has(at)) continue;
      copied.add(at);
      walk(at, JSON.parse(readFileSync(join(at, 'package.json'), 'utf8')) as PackageJson);
    }
  };
  walk(from, pkg);
  for (const at of copied) cpSync(at, join(project, 'node_modules', relative(modules, at)), { recursive: true });
}

function resolvePackage(from: string, name: string): string | undefined {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name);
    if (existsSync(join(candidate, 'package.json'))) return realpathSync(candidate);
    if (dir === dirname(dir)) return undefined;
  }
}

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), 'client-package-'));
  // `prepack` builds dist/ first.
  const [packed] = JSON.parse(npm(['pack', '--json', '--pack-destination', scratch], ROOT)) as { filename: string }[];
  tarball = join(scratch, packed?.filename ?? '');
  const project = join(scratch, 'homeserver');
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'homeserver', private: true, type: 'module' }));
  copyDependencies(ROOT, JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as PackageJson, project);
  npm(['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', tarball], project);
}, 180_000);

afterAll(() => {
  if (scratch !== '') rmSync(scratch, { recursive: true, force: true });
});

describe('the packed package', () => {
  it('holds the build and its settings, not the sources or the tests', () => {
    const files = execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' }).split('\n');
    expect(files).toEqual(
      expect.arrayContaining([
        'package/package.json',
        'package/dist/client/push-rules-client.js',
        'package/dist/client/push-rules-client.d.ts',
        'package/config/default.json',
      ]),
    );
    expect(files.filter((file) => /^package\/(src|test|bench|scripts|examples|node_modules)\//.test(file))).toEqual([]);
  });

  it('installs into a project, which imports matrix-push-worker/client at run time', () => {
    const project = join(scratch, 'homeserver');
    const output = execFileSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        "const m = await import('matrix-push-worker/client'); console.log(typeof m.PushRulesClient, typeof m.PushRulesError)",
      ],
      { cwd: project, encoding: 'utf8' },
    );
    expect(output.trim()).toBe('function function');
    expect(JSON.parse(readFileSync(join(project, 'package.json'), 'utf8'))).toMatchObject({
      dependencies: { 'matrix-push-worker': expect.stringMatching(/^file:/) as unknown },
    });
  });

  it("type-checks a homeserver's calls with tsc, and refuses a wrong one", () => {
    const project = join(scratch, 'homeserver');
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2023',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          exactOptionalPropertyTypes: true,
          noEmit: true,
          skipLibCheck: true,
          types: ['node'],
        },
        files: ['front.ts'],
      }),
    );
    writeFileSync(
      join(project, 'front.ts'),
      [
        "import { PushRulesClient, PushRulesError, type RuleAddress } from 'matrix-push-worker/client';",
        '',
        "const pushRules = new PushRulesClient({ url: 'amqp://guest:guest@127.0.0.1:5672', publisherUserId: 'guest' });",
        "const address: RuleAddress = { scope: 'global', kind: 'content', ruleId: 'lunch' };",
        'export async function front(userId: string): Promise<number> {',
        '  try {',
        "    await pushRules.setPushRule(userId, address, { actions: ['notify'], pattern: 'lunch' });",
        '    const { notify } = await pushRules.evaluate(',
        "      { type: 'm.room.message', room_id: '!r:hs', sender: '@bob:hs', content: { body: 'lunch?' } },",
        '      { member_count: 2 },',
        '      [{ user_id: userId }],',
        '    );',
        '    const recipients = Object.entries(notify).map(([user_id, actions]) => ({ user_id, actions }));',
        "    const { devices } = await pushRules.notify({ event_id: '$e', room_id: '!r:hs' }, recipients, { reply: true });",
        '    // @ts-expect-error: a rule address names its kind',
        "    await pushRules.getPushRule(userId, { scope: 'global', ruleId: 'lunch' });",
        '    return devices;',
        '  } catch (error) {',
        '    if (error instanceof PushRulesError) return error.status;',
        '    throw error;',
        '  } finally {',
        '    await pushRules.close();',
        '  }',
        '}',
        '',
      ].join('\n'),
    );
    const run = (): string => {
      const tsc = spawnSync(process.execPath, [TSC, '-p', project], { cwd: project, encoding: 'utf8' });
      return `${tsc.stdout}${tsc.stderr}`;
    };
    expect(run()).toBe('');
    // The check has teeth: a call the types refuse fails it.
    writeFileSync(
      join(project, 'front.ts'),
      `${readFileSync(join(project, 'front.ts'), 'utf8')}export const wrong = pushRules.getPushers(42);\n`,
    );
    expect(run()).toMatch(/front\.ts\(\d+,\d+\): error TS2345/);
  });
});
