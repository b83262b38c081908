import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import type { GatewayBehaviour } from '../../test/support/gateway-double-behaviour.js';
import type { DeviceDelivery, GatewayStats } from '../../test/support/gateway-double-records.js';
import { ROOT } from './processes.js';

/** A command to the doubles' process (bench/gateway-fleet.ts); `index` names one double, else all. */
export type FleetCommand = { readonly id: number; readonly index?: number } & (
  | { readonly cmd: 'behave'; readonly behaviour: GatewayBehaviour }
  | { readonly cmd: 'restore' | 'clear' | 'stats' | 'deviceLog' }
);
/** A command before it is given its id (Omit over each member of the union). */
type CommandBody = FleetCommand extends infer C ? (C extends FleetCommand ? Omit<C, 'id'> : never) : never;
export type FleetReply = { readonly id: number; readonly result: unknown } | { readonly ready: readonly string[] };

export type DoubleStats = GatewayStats & { readonly connections: number };

/** The doubles' counts summed (first and last request over all of them). */
export interface FleetStats {
  readonly requests: number;
  readonly answers: Readonly<Record<string, number>>;
  readonly devicesDelivered: number;
  readonly firstAt: number | undefined;
  readonly lastAt: number | undefined;
  readonly connections: number;
  readonly perGateway: readonly DoubleStats[];
}

/** Without a command in flight the doubles' process answers within milliseconds: longer is a hang. */
const COMMAND_TIMEOUT_MS = 30_000;

/**
 * The push gateway doubles of the delivery bench, in a child process
 * (bench/gateway-fleet.ts), driven over IPC: one double per gateway, each
 * on its own loopback port.
 */
export class GatewayFleet {
  readonly notifyUrls: readonly string[];
  readonly #child: ChildProcess;
  #next = 0;
  readonly #pending = new Map<number, (result: unknown) => void>();

  private constructor(child: ChildProcess, notifyUrls: readonly string[]) {
    this.#child = child;
    this.notifyUrls = notifyUrls;
    child.on('message', (reply: FleetReply) => {
      if (!('id' in reply)) return;
      this.#pending.get(reply.id)?.(reply.result);
      this.#pending.delete(reply.id);
    });
  }

  static async start(count: number): Promise<GatewayFleet> {
    const child = fork(`${ROOT}bench/gateway-fleet.ts`, [String(count)], {
      cwd: ROOT,
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const [reply] = (await Promise.race([
      once(child, 'message'),
      once(child, 'exit').then(() => {
        throw new Error('the gateway doubles exited before they were ready');
      }),
    ])) as [FleetReply];
    if (!('ready' in reply)) throw new Error('the gateway doubles sent something else than ready');
    return new GatewayFleet(child, reply.ready);
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  async behave(behaviour: GatewayBehaviour, index?: number): Promise<void> {
    await this.#command({ cmd: 'behave', behaviour, ...(index === undefined ? {} : { index }) });
  }

  /** Every double back to answering 200 at once. */
  async restore(): Promise<void> {
    await this.#command({ cmd: 'restore' });
  }

  /** Every double forgets its counts and device log. */
  async clear(): Promise<void> {
    await this.#command({ cmd: 'clear' });
  }

  async stats(): Promise<FleetStats> {
    const perGateway = (await this.#command({ cmd: 'stats' })) as DoubleStats[];
    const answers: Record<string, number> = {};
    for (const g of perGateway)
      for (const [answer, n] of Object.entries(g.answers)) answers[answer] = (answers[answer] ?? 0) + n;
    const defined = (values: (number | undefined)[]) => values.filter((v): v is number => v !== undefined);
    const firsts = defined(perGateway.map((g) => g.firstAt));
    const lasts = defined(perGateway.map((g) => g.lastAt));
    return {
      requests: sum(perGateway.map((g) => g.requests)),
      answers,
      devicesDelivered: sum(perGateway.map((g) => g.devicesDelivered)),
      firstAt: firsts.length === 0 ? undefined : Math.min(...firsts),
      lastAt: lasts.length === 0 ? undefined : Math.max(...lasts),
      connections: sum(perGateway.map((g) => g.connections)),
      perGateway,
    };
  }

  /** What each device (by pushkey) got in requests answered 200, in order, from one double or all. */
  async deviceLog(index?: number): Promise<ReadonlyMap<string, readonly DeviceDelivery[]>> {
    const log = (await this.#command({ cmd: 'deviceLog', ...(index === undefined ? {} : { index }) })) as Record<
      string,
      DeviceDelivery[]
    >;
    return new Map(Object.entries(log));
  }

  /** Resolves with the counts once the doubles got at least `devices` devices answered 200; rejects after `timeoutMs`. */
  async waitForDevices(devices: number, timeoutMs: number): Promise<FleetStats> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const stats = await this.stats();
      if (stats.devicesDelivered >= devices) return stats;
      if (Date.now() > end)
        throw new Error(`the gateway doubles got ${stats.devicesDelivered} of ${devices} devices in ${timeoutMs} ms`);
      // Polling costs the doubles one IPC message; the times come from their own clocks, not from this loop.
      await sleep(10);
    }
  }

  async stop(): Promise<void> {
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return;
    const exited = once(this.#child, 'exit');
    this.#child.disconnect();
    await exited;
  }

  async #command(command: CommandBody): Promise<unknown> {
    const id = (this.#next += 1);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new Error(`the gateway doubles did not answer ${command.cmd} in ${COMMAND_TIMEOUT_MS} ms`));
      }, COMMAND_TIMEOUT_MS);
      this.#pending.set(id, (result) => {
        clearTimeout(timer);
        resolve(result);
      });
      this.#child.send({ ...command, id });
    });
  }
}

const sum = (values: readonly number[]) => values.reduce((total, value) => total + value, 0);
