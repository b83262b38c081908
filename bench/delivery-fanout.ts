/**
 * The fan-out rows of the delivery part (bench/README.md, "Delivery"):
 * rounds of one notify to 10k recipients through a worker, and the same
 * requests from a sender alone (the raw limit and the bare floor), each
 * round timed to the last device a gateway received.
 */
import type { Db } from 'mongodb';
import type { PushRulesClient, NotifyRecipient } from '../src/client/push-rules-client.js';
import { loadConfig } from '../src/config/load-config.js';
import { parseAddressAllowlist } from '../src/delivery/address-allowlist.js';
import { planIntake, type PlannedDelivery } from '../src/delivery/intake-plan.js';
import { bodyText } from '../src/delivery/request-body.js';
import { GatewayClient } from '../src/delivery-http/gateway-client.js';
import {
  benchNotification,
  benchRecipients,
  deliveryPushersOf,
  type DeliveryAudience,
} from './support/delivery-seed.js';
import type { FanOutRow } from './support/delivery-report.js';
import { BareHttpClient } from './support/bare-http-client.js';
import type { GatewayFleet } from './support/gateway-fleet.js';
import { cpuSeconds } from './support/proc-stats.js';
import { pendingDrained } from './support/pending-drained.js';

const ROUND_TIMEOUT_MS = 180_000;
const DEFAULTS = loadConfig();

const log = (line: string) => {
  console.error(line);
};

/** The requests the worker plans for one notify to the audience: the raw limit sends exactly these. */
export function plan(audience: DeliveryAudience, eventId: string): readonly PlannedDelivery[] {
  const pushers = deliveryPushersOf(audience);
  return planIntake(
    { op: 'notify', notification: benchNotification(eventId), recipients: benchRecipients(audience.userIds) },
    (userId) => pushers.get(userId) ?? [],
    { notifyId: 'raw', partition: 0, seq: 1, acceptedAt: Date.now() },
  ).deliveries;
}

interface Round {
  readonly ms: number;
  readonly firstMs: number;
  readonly requests: number;
}

/**
 * One unmeasured round (connections, JIT), then `rounds` measured ones,
 * with the CPU time each watched process spent over the measured rounds.
 */
async function rows(
  id: string,
  devices: number,
  rounds: number,
  pids: Readonly<Record<string, number | undefined>>,
  round: (n: number) => Promise<Round>,
): Promise<FanOutRow> {
  await round(0);
  const before = cpuOf(pids);
  const measured: Round[] = [];
  for (let n = 1; n <= rounds; n += 1) {
    const r = await round(n);
    log(
      `  ${id} round ${n}: first device ${Math.round(r.firstMs)} ms, last ${Math.round(r.ms)} ms, ${r.requests} requests`,
    );
    measured.push(r);
  }
  const after = cpuOf(pids);
  const cpu = Object.fromEntries(
    Object.keys(after).map((name) => [name, (((after[name] ?? 0) - (before[name] ?? 0)) * 1000) / rounds]),
  );
  const sorted = [...measured].sort((a, b) => a.ms - b.ms);
  const middle = sorted[Math.floor((sorted.length - 1) / 2)];
  return {
    id,
    devices,
    requests: middle?.requests ?? 0,
    roundsMs: measured.map((r) => r.ms),
    firstMs: measured.map((r) => r.firstMs),
    cpu,
  };
}

/** CPU seconds so far of each watched process, this one as `load`. */
function cpuOf(pids: Readonly<Record<string, number | undefined>>): Record<string, number> {
  const load = process.cpuUsage();
  const cpu: Record<string, number> = { load: (load.user + load.system) / 1e6 };
  for (const [name, pid] of Object.entries(pids)) if (pid !== undefined) cpu[name] = cpuSeconds(pid);
  return cpu;
}

/** The raw limit: the worker's HTTP client, configured as the worker configures it, sending the planned requests at once. */
export async function rawRow(
  id: string,
  planned: readonly PlannedDelivery[],
  devices: number,
  fleet: GatewayFleet,
  rounds: number,
  pids: Readonly<Record<string, number | undefined>>,
): Promise<FanOutRow> {
  const sender = new GatewayClient({
    allowlist: parseAddressAllowlist(['127.0.0.1/32']),
    maxInFlight: DEFAULTS.delivery.maxInFlight,
    maxInFlightPerOrigin: DEFAULTS.delivery.maxInFlightPerHost,
    connectTimeoutMs: DEFAULTS.delivery.connectTimeoutMs,
    headersTimeoutMs: DEFAULTS.delivery.headersTimeoutMs,
    bodyTimeoutMs: DEFAULTS.delivery.bodyTimeoutMs,
    maxBodyBytes: DEFAULTS.delivery.maxResponseBytes,
  });
  try {
    return await sentAtOnce(id, planned, devices, fleet, rounds, pids, async (url, body) => {
      const exchange = await sender.send(url, body);
      return exchange.kind === 'response' && exchange.status === 200 ? undefined : exchange;
    });
  } finally {
    await sender.close();
  }
}

/**
 * Rounds of a sender alone (`rawRow`, `bareRow`): the planned requests, encoded before the clock starts (as a
 * bare client would hold them), sent at once each round; `send` answers what failed, or undefined.
 */
async function sentAtOnce(
  id: string,
  planned: readonly PlannedDelivery[],
  devices: number,
  fleet: GatewayFleet,
  rounds: number,
  pids: Readonly<Record<string, number | undefined>>,
  send: (url: string, body: string) => Promise<unknown>,
): Promise<FanOutRow> {
  const bodies = planned.map((d) => [d.url, bodyText(d.body)] as const);
  return rows(id, devices, rounds, pids, async () => {
    await fleet.clear();
    const startedAt = Date.now();
    const failed = (await Promise.all(bodies.map(async ([url, body]) => send(url, body)))).filter(
      (failure) => failure !== undefined,
    );
    if (failed.length > 0) throw new Error(`${id}: ${failed.length} requests failed: ${JSON.stringify(failed[0])}`);
    const stats = await fleet.waitForDevices(devices, ROUND_TIMEOUT_MS);
    return {
      ms: (stats.lastAt ?? Number.NaN) - startedAt,
      firstMs: (stats.firstAt ?? Number.NaN) - startedAt,
      requests: stats.requests,
    };
  });
}

/**
 * Issue 42's floor: a bare node:http keep-alive client (32 per gateway, 256 in all, as the worker's caps)
 * sending the planned requests at once; its CPU per request is what a delivered device is judged against.
 */
export async function bareRow(
  id: string,
  planned: readonly PlannedDelivery[],
  devices: number,
  fleet: GatewayFleet,
  rounds: number,
  pids: Readonly<Record<string, number | undefined>>,
): Promise<FanOutRow> {
  const sender = new BareHttpClient(DEFAULTS.delivery.maxInFlightPerHost, DEFAULTS.delivery.maxInFlight);
  try {
    return await sentAtOnce(id, planned, devices, fleet, rounds, pids, async (url, body) => {
      const exchange = await sender.send(url, body);
      return 'status' in exchange && exchange.status === 200 ? undefined : exchange;
    });
  } finally {
    sender.close();
  }
}

let events = 0;

/** One notify to the whole audience per round (reply: false, resolved on the broker's confirm), timed to the last device a gateway received. */
export async function workerRow(
  id: string,
  client: PushRulesClient,
  audience: DeliveryAudience,
  fleet: GatewayFleet,
  db: Db,
  rounds: number,
  pids: Readonly<Record<string, number | undefined>>,
): Promise<FanOutRow> {
  const recipients = benchRecipients(audience.userIds);
  return rows(id, audience.devices, rounds, pids, async () => fanOut(client, recipients, audience.devices, fleet, db));
}

export async function fanOut(
  client: PushRulesClient,
  recipients: readonly NotifyRecipient[],
  devices: number,
  fleet: GatewayFleet,
  db: Db,
): Promise<Round & { readonly startedAt: number; readonly lastAt: number }> {
  await fleet.clear();
  events += 1;
  const notification = benchNotification(`$fanout${events}`);
  const startedAt = Date.now();
  await client.notify(notification, recipients);
  const stats = await fleet.waitForDevices(devices, ROUND_TIMEOUT_MS);
  const lastAt = stats.lastAt ?? Number.NaN;
  // Idle before the next round: every request done with and deleted from the store.
  await pendingDrained(db, ROUND_TIMEOUT_MS);
  return {
    ms: lastAt - startedAt,
    firstMs: (stats.firstAt ?? Number.NaN) - startedAt,
    requests: stats.requests,
    startedAt,
    lastAt,
  };
}
