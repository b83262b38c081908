import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';

/**
 * One client's wire adapter as the conformance run drives it: a
 * long-lived process fed one JSON line per request on stdin,
 * `{"id", "request"}`, answering `{"id", "reply"}` lines on stdout in
 * whatever order the answers come (docs/rpc-contract.md#examples).
 */

/** What an adapter answered for one request. */
export type AdapterAnswer =
  | { readonly reply: unknown }
  /** No reply envelope: the line it wrote instead, an `adapter_error`, or no line in time. */
  | { readonly failure: string };

export interface AdapterCommand {
  readonly command: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly env: NodeJS.ProcessEnv;
}

const STDERR_KEPT = 8_000;

export class WireAdapterProcess {
  readonly #child: ChildProcessWithoutNullStreams;
  readonly #waiting = new Map<string, (answer: AdapterAnswer) => void>();
  #stderr = '';
  #next = 0;
  #exited: string | undefined;

  private constructor(child: ChildProcessWithoutNullStreams) {
    this.#child = child;
    child.stderr.on('data', (chunk: Buffer) => {
      this.#stderr = (this.#stderr + chunk.toString('utf8')).slice(-STDERR_KEPT);
    });
    createInterface({ input: child.stdout, crlfDelay: Infinity }).on('line', (line) => {
      this.#answered(line);
    });
    child.once('exit', (code, signal) => {
      this.#exited = `the adapter exited (${signal ?? String(code)})`;
      for (const [id, settle] of this.#waiting) {
        this.#waiting.delete(id);
        settle({ failure: `${this.#exited} before answering; its stderr: ${this.stderr()}` });
      }
    });
    // A request written after the adapter died: its exit answers the wait.
    child.stdin.on('error', () => undefined);
  }

  static start(command: AdapterCommand): WireAdapterProcess {
    return new WireAdapterProcess(
      spawn(command.command, command.args, { cwd: command.cwd, env: command.env, stdio: ['pipe', 'pipe', 'pipe'] }),
    );
  }

  /** The end of what the adapter wrote on stderr. */
  stderr(): string {
    return this.#stderr.trim() === '' ? '(nothing)' : this.#stderr.trim();
  }

  /** Sends one request and resolves with its answer, or a failure after `timeoutMs` without one. */
  async send(request: unknown, timeoutMs: number): Promise<AdapterAnswer> {
    if (this.#exited !== undefined) return { failure: `${this.#exited}; its stderr: ${this.stderr()}` };
    const id = `r${(this.#next += 1)}`;
    return new Promise<AdapterAnswer>((resolve) => {
      const timer = setTimeout(() => {
        this.#waiting.delete(id);
        resolve({ failure: `no answer within ${timeoutMs} ms; the adapter's stderr: ${this.stderr()}` });
      }, timeoutMs);
      this.#waiting.set(id, (answer) => {
        clearTimeout(timer);
        resolve(answer);
      });
      this.#child.stdin.write(`${JSON.stringify({ id, request })}\n`);
    });
  }

  #answered(line: string): void {
    let parsed: { id?: unknown; reply?: unknown; adapter_error?: unknown };
    try {
      parsed = JSON.parse(line) as typeof parsed;
    } catch {
      this.#stderr = `${this.#stderr}\n(stdout, not JSON) ${line}`.slice(-STDERR_KEPT);
      return;
    }
    const settle = typeof parsed.id === 'string' ? this.#waiting.get(parsed.id) : undefined;
    if (settle === undefined || typeof parsed.id !== 'string') {
      this.#stderr = `${this.#stderr}\n(stdout, for no request waiting) ${line}`.slice(-STDERR_KEPT);
      return;
    }
    this.#waiting.delete(parsed.id);
    settle(
      Object.hasOwn(parsed, 'reply')
        ? { reply: parsed.reply }
        : { failure: `the adapter answered without a reply: ${line}` },
    );
  }

  /** Ends its input and waits for it to exit (killing it after `graceMs`); its exit code. */
  async close(graceMs = 10_000): Promise<number | null> {
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return this.#child.exitCode;
    const exited = once(this.#child, 'exit') as Promise<[number | null]>;
    this.#child.stdin.end();
    const timer = setTimeout(() => this.#child.kill('SIGKILL'), graceMs);
    const [code] = await exited;
    clearTimeout(timer);
    return code;
  }
}
