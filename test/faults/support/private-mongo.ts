import { spawn, type ChildProcessByStdio } from 'node:child_process';
import type { Readable } from 'node:stream';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { localEnv } from '../global-setup.js';

const SCRIPT = new URL('../../../scripts/services.sh', import.meta.url).pathname;

/**
 * A MongoDB stand-in of one test's own (`scripts/services.sh private-mongo`:
 * mongo-java-server in memory, on 127.0.0.1 and a free port), so that the
 * test can pause it without touching the shared stand-in on 27017, which
 * other tests use.
 */
export interface PrivateMongo {
  readonly url: string;
  /** SIGSTOP: the process stops dead; its sockets stay open and nothing answers. */
  pause(): void;
  /** SIGCONT. */
  resume(): void;
  /** Resumes it if paused, kills it (its data is in memory) and waits for it to exit. */
  stop(): Promise<void>;
}

export async function startPrivateMongo(): Promise<PrivateMongo> {
  // The script `exec`s the JVM: the child's pid is the stand-in's own, for the signals.
  const child = spawn(SCRIPT, ['private-mongo', '0'], { env: localEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const port = await new Promise<number>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout });
    lines.on('line', (line) => {
      const match = /^listening on 127\.0\.0\.1:(\d+)$/.exec(line);
      if (match !== null) resolve(Number(match[1]));
    });
    child.once('exit', (code, signal) => {
      reject(new Error(`the private MongoDB stand-in exited (${String(code ?? signal)}) before listening: ${stderr}`));
    });
  });
  const signal = (name: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(name);
  };
  return {
    url: `mongodb://127.0.0.1:${port}`,
    pause: () => {
      signal('SIGSTOP');
    },
    resume: () => {
      signal('SIGCONT');
    },
    stop: async () => stop(child),
  };
}

async function stop(child: ChildProcessByStdio<null, Readable, Readable>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGCONT');
  child.kill('SIGKILL');
  await exited;
}
