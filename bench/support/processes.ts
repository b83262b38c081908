import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { appendFileSync, readFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface Child {
  readonly name: string;
  readonly process: ChildProcess;
  readonly pid: number;
  /** Its last lines of output (stdout and stderr), to explain a scenario that failed. */
  recentOutput(): readonly string[];
  stop(): Promise<void>;
}

const RECENT_LINES = 20;

/**
 * Starts a Node process and resolves once a stdout line satisfies `ready`.
 * Output is kept only to explain a failed start.
 */
export async function startChild(
  name: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  ready: (line: string) => boolean,
  // Every line of the child appended there too, to find out why one died or misbehaved.
  logFile: string | undefined = process.env['BENCH_CHILD_LOG'],
): Promise<Child> {
  const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const output: string[] = [];
  const recent: string[] = [];
  const remember = (line: string) => {
    recent.push(line);
    if (recent.length > RECENT_LINES) recent.shift();
  };
  child.stderr.on('data', (chunk: Buffer) => {
    output.push(chunk.toString());
    remember(chunk.toString());
  });
  // BENCH_CHILD_LOG=<file> (the default of `logFile`): every child's output appended there.
  if (logFile !== undefined && logFile !== '') {
    const tee = (chunk: Buffer) => {
      appendFileSync(logFile, `[${name} ${String(child.pid)}] ${chunk.toString()}`);
    };
    child.stdout.on('data', tee);
    child.stderr.on('data', tee);
  }
  await new Promise<void>((resolve, reject) => {
    const reader = createInterface({ input: child.stdout });
    reader.on('line', (line) => {
      if (output.length < 200) output.push(line);
      remember(line);
      if (ready(line)) resolve();
    });
    child.once('exit', (code, signal) => {
      reject(new Error(`${name} exited (${String(code ?? signal)}) before it was ready:\n${output.join('\n')}`));
    });
  });
  const pid = child.pid;
  if (pid === undefined) throw new Error(`${name} has no pid`);
  return {
    name,
    process: child,
    pid,
    recentOutput: () => [...recent],
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** The Node flags `npm start` gives the worker (package.json's `start` script: `node <flags> dist/main.js`). */
export function workerNodeFlags(): string[] {
  const { scripts } = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { scripts: Record<string, string> };
  const match = /^node((?: --[\w-]+(?:=\S+)?)*) dist\/main\.js$/.exec(scripts['start'] ?? '');
  if (match === null)
    throw new Error(`package.json's start script is not "node <flags> dist/main.js": ${scripts['start'] ?? ''}`);
  return (match[1] ?? '').split(' ').filter((flag) => flag !== '');
}

/**
 * The worker's script: `dist/main.js`, or `BENCH_WORKER_MAIN` (the
 * `main.js` of another build, e.g. the code before a change, copied with its
 * package.json, config/ and a node_modules link) to measure it in the same
 * conditions: a run of each, back to back, each with its own baselines.
 */
const WORKER_MAIN = process.env['BENCH_WORKER_MAIN'] ?? 'dist/main.js';

/** The built worker (`dist/main.js`), as `npm start` runs it (its Node flags too). */
export async function startWorker(env: NodeJS.ProcessEnv, nodeArgs: readonly string[] = []): Promise<Child> {
  return (await startWorkerWithHealth(env, nodeArgs)).child;
}

/** A worker and the port its health and metrics listener took (`HEALTH_PORT=0`: the port it logged). */
export async function startWorkerWithHealth(
  env: NodeJS.ProcessEnv,
  nodeArgs: readonly string[] = [],
  logFile?: string,
): Promise<{ child: Child; healthPort: number | undefined }> {
  const found = { port: undefined as number | undefined };
  const child = await startChild(
    'worker',
    [...workerNodeFlags(), ...nodeArgs, WORKER_MAIN],
    env,
    (line) => {
      if (line.includes('"health and metrics listening"')) {
        const match = /"port":(\d+)/.exec(line);
        if (match?.[1] !== undefined) found.port = Number(match[1]);
      }
      return line.includes('"worker started"');
    },
    logFile ?? process.env['BENCH_CHILD_LOG'],
  );
  return { child, healthPort: found.port };
}

/** A TCP port that was free a moment ago (for a child's `--inspect`). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) =>
    server.close(() => {
      resolve();
    }),
  );
  return port;
}

export async function startEchoConsumer(env: NodeJS.ProcessEnv): Promise<Child> {
  return startChild('echo consumer', ['--import', 'tsx', 'bench/echo-consumer.ts'], env, (line) => line === 'ready');
}

/** The pid of the one local process whose command line matches, if there is exactly one. */
export function findPid(pattern: string): number | undefined {
  try {
    const pids = execFileSync('pgrep', ['-f', pattern], { encoding: 'utf8' }).trim().split('\n').map(Number);
    return pids.length === 1 ? pids[0] : undefined;
  } catch {
    return undefined;
  }
}
