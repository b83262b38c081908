import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const THROW = fileURLToPath(new URL('./support/throw-once-started.ts', import.meta.url));

/** Settings that keep each entry point running without any service. */
const ENTRIES = {
  'src/main.ts': { name: 'matrix-push-worker', env: { MONGODB_URL: 'mongodb://127.0.0.1:1', HEALTH_ENABLED: 'false' } },
  'src/gateway-main.ts': {
    name: 'matrix-push-gateway',
    env: { GATEWAY_HOST: '127.0.0.1', GATEWAY_PORT: '0', HEALTH_ENABLED: 'false' },
  },
} as const;

describe.each(Object.keys(ENTRIES) as (keyof typeof ENTRIES)[])('%s, on an error nothing handled', (entry) => {
  it.each(['exception', 'rejection'])(
    'an uncaught %s: one fatal JSON line with the error, no bare stack, exit 1',
    async (kind) => {
      const { name, env } = ENTRIES[entry];
      const { CONFIG_FILE: _ownFile, ...inherited } = process.env;
      const child = spawn(process.execPath, ['--import', 'tsx', '--import', THROW, entry], {
        cwd: ROOT,
        env: { ...inherited, LOG_LEVEL: 'info', THROW_KIND: kind, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const [code] = (await once(child, 'exit')) as [number | null];

      expect(code).toBe(1);
      const lines = stdout
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(lines.filter((line) => line['level'] === 60)).toEqual([
        expect.objectContaining({
          name,
          msg: 'unexpected error: exiting',
          event: kind === 'exception' ? 'uncaughtException' : 'unhandledRejection',
          err: expect.objectContaining({
            type: 'Error',
            message: `injected ${kind}`,
            stack: expect.any(String) as unknown,
          }) as unknown,
        }),
      ]);
      expect(stderr).not.toContain('injected');
    },
  );
});
