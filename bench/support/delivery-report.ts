import { percentile } from './closed-loop.js';
import { outageCheckPassed, type OutageCheck } from './outage-check.js';
import type { TargetCheck } from './report.js';

/** Issue 22's targets. */
export const FANOUT_RATIO_TARGET = 0.5;
export const SLOW_GATEWAY_TARGET_MS = 2000;
export const BATCHED_TIME_RATIO_TARGET = 1.2;
export const OUTAGE_RSS_TARGET_BYTES = 250 * 1024 * 1024;
export const ISOLATION_P99_RATIO_TARGET = 2;
/** The read workers' p99 while a deliver-only worker of the pool delivers ÷ idle (issue 42). */
export const ROLES_P99_RATIO_TARGET = 1.2;
/** Issue 42's: a delivered device's worker CPU, and the 10k fan-out's last push, against the bare client's. */
export const DEVICE_CPU_RATIO_TARGET = 1.5;
export const FANOUT_BARE_TIME_RATIO_TARGET = 1.5;

/** One fan-out scenario (or its raw limit): several rounds of the same requests, each timed to the last device received. */
export interface FanOutRow {
  readonly id: string;
  readonly devices: number;
  /** Requests the gateways received per round (the median round's). */
  readonly requests: number;
  /** Per measured round: start (publish, or the first send) to the last device received by a gateway. */
  readonly roundsMs: readonly number[];
  /** Per measured round: start to the first device received (for the worker, the intake's share: nothing is sent before the message is stored). */
  readonly firstMs: readonly number[];
  /** CPU of the watched processes over the measured rounds, in % of one core. */
  readonly cpu: Readonly<Record<string, number>>;
}

export const medianMs = (row: FanOutRow) => median(row.roundsMs);
/** CPU µs per device of one watched process (`load`: the bench process, which is the client in the bare and raw rows). */
export const cpuMicrosPerDevice = (row: FanOutRow, process: string) =>
  ((row.cpu[process] ?? Number.NaN) * 1000) / row.devices;
export const devicesPerSecond = (row: FanOutRow) => row.devices / (medianMs(row) / 1000);
/** Devices per second from the first device received to the last: the sending alone, the intake left out. */
export const sendingDevicesPerSecond = (row: FanOutRow) =>
  row.devices / ((median(row.roundsMs.map((t, i) => t - (row.firstMs[i] ?? 0))) || Number.NaN) / 1000);

export interface OutageResult {
  readonly devices: number;
  /** Devices per notification: the room each notification goes to. */
  readonly room: number;
  readonly ratePerSecond: number;
  readonly healthySeconds: number;
  readonly outageSeconds: number;
  /**
   * How long the gateway failed: `outageSeconds` of load, then until the
   * worker had taken every notify in (the backlog as of the recovery is
   * then exactly what was published).
   */
  readonly downMs: number;
  /** `notify` messages published, and of those not confirmed by the broker. */
  readonly published: number;
  readonly publishFailures: number;
  /** Replies that came with parts not yet taken in (`pending`): those notifications are left out of the backlog check. */
  readonly pendingReplies: number;
  /** From a notify's publish to its reply (stored and held by the worker): how far the intake lagged behind the load. */
  readonly intakeLagP50Ms: number;
  readonly intakeLagMaxMs: number;
  /** Device notifications published while the gateway was down: what it would get without backoff or breaker. */
  readonly deviceNotificationsDuringOutage: number;
  /** Requests the failing gateway received (and answered 503) while it was down. */
  readonly deadHostRequests: number;
  /** What the breaker allows in that time (see `breakerBound`). */
  readonly deadHostBound: number;
  /** From the gateway coming back to its first request answered 200 (the breaker's probe). */
  readonly firstDeliveryAfterMs: number;
  /** Requests in the first second after that probe: the ramp, not the whole backlog at once. */
  readonly requestsFirstSecondAfter: number;
  /** From the gateway coming back to the last device delivered. */
  readonly drainMs: number;
  /** The worker's RSS as the scenario starts (started, connected, idle): what the outage adds is above it. */
  readonly workerRssBeforeBytes: number;
  readonly workerRssMaxBytes: number;
  /** The kernel's high-water mark of the worker's RSS at the end. */
  readonly workerRssHwmBytes: number;
  readonly check: OutageCheck;
  /**
   * Devices by outcome as the worker counted them (`push_worker_delivery_devices_total`,
   * summed over hosts) at the end: what it says it dropped, expired or gave up, to set
   * beside what the devices lack. Absent when its metrics could not be read.
   */
  readonly workerOutcomes?: Readonly<Record<string, number>>;
}

export interface LatencySummary {
  readonly samples: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
}

/** A read loop's latency at rest and while a fan-out is delivered. */
export interface ReadPhases {
  readonly idle: LatencySummary & { readonly errors: number };
  readonly during: LatencySummary & { readonly errors: number };
}

export interface IsolationResult {
  readonly idle: LatencySummary & { readonly errors: number };
  readonly during: LatencySummary & { readonly errors: number };
  /** Beside it, judging nothing: reads of users whose rules are stored, at rest and during one fan-out. */
  readonly stored?: ReadPhases;
  /** And those users' documents read from the database by the bench. */
  readonly store?: ReadPhases;
  /** And the judged read's write alone, by the bench: rules upserted for a user with none, as a first read stores them. */
  readonly storeFirstWrite?: ReadPhases;
  /** Fan-outs of the judged loop. */
  readonly fanOuts: number;
  /** Fan-outs in all, the loops beside it included (absent: `fanOuts`). */
  readonly fanOutsInAll?: number;
}

/** Three workers, one of them deliver-only: what it delivered, and the others' reads meanwhile. */
export interface RolesResult extends IsolationResult {
  /** Devices of every fan-out while it was measured (`fanOutsInAll`). */
  readonly devices: number;
  /** Of those, what the deliver-only worker counted delivered (`push_worker_delivery_devices_total`). */
  readonly deliveredByDeliverWorker: number;
}

export interface DeliveryResults {
  readonly gateways: number;
  readonly rounds: number;
  readonly loadAverageAtStart: readonly number[];
  /** A bare node:http keep-alive client sending the same requests (issue 42's floor). */
  readonly bare?: FanOutRow;
  readonly raw?: FanOutRow;
  readonly rawSlow?: FanOutRow;
  readonly fanout?: FanOutRow;
  readonly slow?: FanOutRow;
  readonly batched?: FanOutRow;
  readonly outage?: OutageResult;
  readonly isolation?: IsolationResult;
  readonly roles?: RolesResult;
  /** The intake's read of the recipients' pushers, from the bench process (`single`: 10k × 1 device; `triple`: 10k × 3). */
  readonly storeReadMs?: { readonly single?: number; readonly triple?: number };
  readonly notes: readonly string[];
}

/**
 * Requests a gateway that fails everything may get over `outageMs` with the
 * default breaker (docs/delivery.md): those in flight when it started
 * failing (the per-host cap), the failures that open the breaker, and one
 * probe per opening, the n-th after at least half of 2^(n-1) s (jitter).
 */
export function breakerBound(outageMs: number, perHostCap = 32, failureThreshold = 5): number {
  let probes = 0;
  for (let waited = 0; waited <= outageMs; probes += 1) waited += 500 * 2 ** probes;
  return perHostCap + failureThreshold + probes;
}

export function summarize(latenciesMs: readonly number[]): LatencySummary {
  const sorted = [...latenciesMs].sort((a, b) => a - b);
  return { samples: sorted.length, p50Ms: percentile(sorted, 0.5), p99Ms: percentile(sorted, 0.99) };
}

export function checkDeliveryTargets(r: DeliveryResults): TargetCheck[] {
  const checks: TargetCheck[] = [];
  if (r.fanout !== undefined && r.raw !== undefined) {
    const ratio = devicesPerSecond(r.fanout) / devicesPerSecond(r.raw);
    checks.push({
      target: 'delivery: 10k devices, gateways answering at once: devices/s ≥ 0.5 × the raw limit',
      measured: `${fmt(devicesPerSecond(r.fanout))}/s ÷ ${fmt(devicesPerSecond(r.raw))}/s = ${ratio.toFixed(2)}`,
      met: ratio >= FANOUT_RATIO_TARGET,
    });
  }
  if (r.fanout !== undefined && r.bare !== undefined) {
    const worker = cpuMicrosPerDevice(r.fanout, 'worker');
    const bare = cpuMicrosPerDevice(r.bare, 'load');
    const time = medianMs(r.fanout) / medianMs(r.bare);
    checks.push(
      {
        target: 'delivery: worker CPU µs per delivered device ÷ bare client CPU µs per request ≤ 1.5',
        measured: `${worker.toFixed(0)} µs ÷ ${bare.toFixed(0)} µs = ${(worker / bare).toFixed(2)}`,
        met: worker / bare <= DEVICE_CPU_RATIO_TARGET,
      },
      {
        target: 'delivery: 10k devices, gateways answering at once: last push ÷ bare wall time ≤ 1.5',
        measured: `${seconds(medianMs(r.fanout))} ÷ ${seconds(medianMs(r.bare))} = ${time.toFixed(2)}`,
        met: time <= FANOUT_BARE_TIME_RATIO_TARGET,
      },
    );
  }
  if (r.slow !== undefined) {
    checks.push({
      target: 'delivery: 10k devices, gateways answering after 100 ms: all delivered within 2 s',
      measured: `${seconds(medianMs(r.slow))}${r.rawSlow === undefined ? '' : ` (raw limit ${seconds(medianMs(r.rawSlow))})`}`,
      met: medianMs(r.slow) <= SLOW_GATEWAY_TARGET_MS,
    });
  }
  if (r.batched !== undefined) {
    const ratio = r.fanout === undefined ? Number.NaN : medianMs(r.batched) / medianMs(r.fanout);
    checks.push({
      target: 'delivery: 10k recipients × 3 devices on one URL: 10k requests, time ≤ 1.2 × the 10k-device fan-out',
      measured: `${fmt(r.batched.requests)} requests; ${seconds(medianMs(r.batched))} ÷ ${r.fanout === undefined ? '–' : seconds(medianMs(r.fanout))} = ${Number.isNaN(ratio) ? '–' : ratio.toFixed(2)}`,
      met: r.batched.requests === r.batched.devices / 3 && ratio <= BATCHED_TIME_RATIO_TARGET,
      ...(r.fanout === undefined ? { unjudged: true } : {}),
    });
  }
  if (r.outage !== undefined) {
    const o = r.outage;
    checks.push(
      {
        target: `delivery: gateway down ${o.outageSeconds} s: requests to the dead host bounded by the breaker`,
        measured: `${fmt(o.deadHostRequests)} (bound ${o.deadHostBound}; ${fmt(o.deviceNotificationsDuringOutage)} device notifications published meanwhile)`,
        met: o.deadHostRequests <= o.deadHostBound,
      },
      {
        target: 'delivery: worker RSS ≤ 250 MB through the outage',
        measured: `${mb(o.workerRssMaxBytes)} sampled, ${mb(o.workerRssHwmBytes)} high-water mark`,
        met: Math.max(o.workerRssMaxBytes, o.workerRssHwmBytes) <= OUTAGE_RSS_TARGET_BYTES,
      },
      {
        target: `delivery: after recovery every device's backlog delivered in order, capped at N`,
        measured: outageCheckText(o.check),
        met: outageCheckPassed(o.check),
      },
    );
  }
  if (r.isolation !== undefined) {
    const ratio = r.isolation.during.p99Ms / r.isolation.idle.p99Ms;
    checks.push({
      target: 'delivery: get_pushrules c=1 p99 while a 10k fan-out is delivered ≤ 2 × idle',
      measured: `${r.isolation.during.p99Ms.toFixed(2)} ms ÷ ${r.isolation.idle.p99Ms.toFixed(2)} ms = ${ratio.toFixed(2)}${r.isolation.during.errors > 0 ? `; ${r.isolation.during.errors} failed` : ''}${storeControl(r.isolation)}`,
      met: ratio <= ISOLATION_P99_RATIO_TARGET && r.isolation.during.errors === 0,
    });
  }
  if (r.roles !== undefined) {
    const { idle, during, devices, deliveredByDeliverWorker } = r.roles;
    const ratio = during.p99Ms / idle.p99Ms;
    checks.push(
      {
        target: 'delivery: 3 workers, deliver-only role on one of them: its share of 10k fan-outs is all of it',
        measured: `${fmt(deliveredByDeliverWorker)} of ${fmt(devices)} devices`,
        met: deliveredByDeliverWorker === devices,
      },
      {
        target:
          "delivery: 3 workers, deliver-only role on one of them: the others' get_pushrules c=1 p99 while it delivers ≤ 1.2 × idle",
        measured: `${during.p99Ms.toFixed(2)} ms ÷ ${idle.p99Ms.toFixed(2)} ms = ${ratio.toFixed(2)}${during.errors > 0 ? `; ${during.errors} failed` : ''}${storeControl(r.roles)}`,
        met: ratio <= ROLES_P99_RATIO_TARGET && during.errors === 0,
      },
    );
  }
  return checks;
}

/** The loops beside a read-isolation row: their p99 during a fan-out ÷ at rest. */
function storeControl(r: IsolationResult): string {
  const ratio = ({ idle, during }: ReadPhases) =>
    `${during.p99Ms.toFixed(2)} ms ÷ ${idle.p99Ms.toFixed(2)} ms = ${(during.p99Ms / idle.p99Ms).toFixed(2)}`;
  const parts = [
    ...(r.stored === undefined ? [] : [`reads of stored rules: ${ratio(r.stored)}`]),
    ...(r.store === undefined ? [] : [`the database alone: ${ratio(r.store)}`]),
    ...(r.storeFirstWrite === undefined ? [] : [`a first read's write alone: ${ratio(r.storeFirstWrite)}`]),
  ];
  return parts.length === 0 ? '' : ` (${parts.join('; ')})`;
}

/** Their rows under a read-isolation table. */
function storeRows(r: IsolationResult): string[] {
  const rows = (name: string, phases: ReadPhases | undefined) =>
    phases === undefined
      ? []
      : [
          `| ${name}, idle | ${fmt(phases.idle.samples)} | ${phases.idle.errors} | ${ms2(phases.idle.p50Ms)} | ${ms2(phases.idle.p99Ms)} |`,
          `| ${name}, during 1 fan-out of 10k | ${fmt(phases.during.samples)} | ${phases.during.errors} | ${ms2(phases.during.p50Ms)} | ${ms2(phases.during.p99Ms)} |`,
        ];
  return [
    ...rows('get_pushrules of 200 users whose rules are stored', r.stored),
    ...rows('the database alone (`findOne` by `_id` from the bench)', r.store),
    ...rows("a first read's write alone (the worker's upsert of a user's defaults, from the bench)", r.storeFirstWrite),
  ];
}

function outageCheckText(c: OutageCheck): string {
  return [
    `${fmt(c.devices)} devices; backlog ${fmt(c.backlogPublished)} taken in, ${fmt(c.backlogDelivered)} delivered (at most ${c.maxFromBacklog} per device, of a largest backlog of ${c.maxBacklog}${c.maxBacklog > c.maxPending ? '' : ': the cap was not reached'})`,
    `taken in after the recovery ${fmt(c.laterPublished)}, delivered ${fmt(c.laterDelivered)}`,
    `devices out of order ${c.outOfOrder} (a first send out of order ${c.firstOutOfOrder}), duplicates ${c.duplicates}, over the cap ${c.overCap}, not the newest ${c.notNewest}, newest missing ${c.lastMissing}, later missing ${c.laterMissing}, lost before ${c.lostBefore}`,
    `missing notifications the cap accounts for ${fmt(c.capExplained)} (uncertain ${fmt(c.capUncertain)}), devices with a loss it cannot account for ${c.unexplained}`,
  ].join('; ');
}

export function deliveryMarkdown(r: DeliveryResults): string {
  const lines = [
    '',
    `### Delivery (issue 22): ${r.gateways} gateway doubles on loopback, median of ${r.rounds} rounds`,
    '',
    '| scenario | devices | requests | first device | last device (median) | rounds | devices/s | ÷ raw | sending only: devices/s (÷ raw) | CPU ms per round | sender CPU µs per device |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  const base = r.raw === undefined ? Number.NaN : devicesPerSecond(r.raw);
  for (const row of [r.bare, r.raw, r.fanout, r.batched, r.rawSlow, r.slow]) {
    if (row === undefined) continue;
    const baseline = row.id.includes('slow') ? r.rawSlow : r.raw;
    const sender = cpuMicrosPerDevice(row, row.cpu['worker'] === undefined ? 'load' : 'worker');
    const ratio =
      baseline === undefined || baseline === row || row === r.bare
        ? Number.NaN
        : devicesPerSecond(row) / devicesPerSecond(baseline);
    const cpu = Object.entries(row.cpu)
      .map(([name, value]) => `${name} ${Math.round(value)}`)
      .join(', ');
    const sending = sendingDevicesPerSecond(row);
    const sendingRatio =
      baseline === undefined || baseline === row || row === r.bare
        ? Number.NaN
        : sending / sendingDevicesPerSecond(baseline);
    lines.push(
      `| ${row.id} | ${fmt(row.devices)} | ${fmt(row.requests)} | ${ms(median(row.firstMs))} | ${ms(medianMs(row))} | ${row.roundsMs.map((t) => Math.round(t)).join(', ')} ms | ${fmt(devicesPerSecond(row))} | ${Number.isNaN(ratio) ? '–' : ratio.toFixed(2)} | ${fmt(sending)}${Number.isNaN(sendingRatio) ? '' : ` (${sendingRatio.toFixed(2)})`} | ${cpu} | ${Number.isFinite(sender) ? Math.round(sender) : '–'} |`,
    );
  }
  if (Number.isNaN(base)) lines.push('', 'No raw limit in this run.');
  const reads = r.storeReadMs;
  if (reads !== undefined)
    lines.push(
      '',
      `Store: the intake's read of the recipients' pushers alone, from the bench process: ${[
        reads.single === undefined ? '' : `10k × 1 device ${ms(reads.single)}`,
        reads.triple === undefined ? '' : `10k × 3 devices ${ms(reads.triple)}`,
      ]
        .filter((text) => text !== '')
        .join('; ')}.`,
    );
  if (r.outage !== undefined) {
    const o = r.outage;
    lines.push(
      '',
      `#### Gateway down ${o.outageSeconds} s under load, ${seconds(o.downMs)} in all (until every notify was taken in)`,
      '',
      '| load | published | intake lag p50 (max) | dead-host requests (bound) | first 200 after it came back | requests in the next second | drained after | worker RSS before → max (HWM) |',
      '|---|---|---|---|---|---|---|---|',
      `| ${o.ratePerSecond} notify/s × ${o.room} devices of ${fmt(o.devices)}, ${o.healthySeconds} s healthy first | ${fmt(o.published)} (${o.publishFailures} failed${o.pendingReplies > 0 ? `, ${fmt(o.pendingReplies)} replied with parts pending` : ''}) | ${seconds(o.intakeLagP50Ms)} (${seconds(o.intakeLagMaxMs)}) | ${fmt(o.deadHostRequests)} (${o.deadHostBound}) | ${seconds(o.firstDeliveryAfterMs)} | ${fmt(o.requestsFirstSecondAfter)} | ${seconds(o.drainMs)} | ${mb(o.workerRssBeforeBytes)} → ${mb(o.workerRssMaxBytes)} (${mb(o.workerRssHwmBytes)}) |`,
      '',
      `Per device: ${outageCheckText(o.check)}.`,
      '',
      o.workerOutcomes === undefined
        ? "The worker's outcome counts could not be read."
        : `The worker counted devices: ${Object.entries(o.workerOutcomes)
            .filter(([, count]) => count > 0)
            .map(([outcome, count]) => `${outcome} ${fmt(count)}`)
            .join(', ')}.`,
      ...(o.check.examples.length === 0
        ? []
        : [
            '',
            'Devices that broke a rule (event numbers received, in order):',
            '',
            ...o.check.examples.map((e) => `- ${e}`),
          ]),
    );
  }
  if (r.isolation !== undefined) {
    const { idle, during, fanOuts } = r.isolation;
    lines.push(
      '',
      '#### Other queues while delivering',
      '',
      '| get_pushrules c=1 | samples | failed | p50 | p99 |',
      '|---|---|---|---|---|',
      `| idle | ${fmt(idle.samples)} | ${idle.errors} | ${ms2(idle.p50Ms)} | ${ms2(idle.p99Ms)} |`,
      `| during ${fanOuts} fan-outs of 10k | ${fmt(during.samples)} | ${during.errors} | ${ms2(during.p50Ms)} | ${ms2(during.p99Ms)} |`,
      ...storeRows(r.isolation),
    );
  }
  if (r.roles !== undefined) {
    const { idle, during, fanOuts, fanOutsInAll, devices, deliveredByDeliverWorker } = r.roles;
    lines.push(
      '',
      '#### Three workers, one of them deliver-only',
      '',
      `The deliver-only worker delivered ${fmt(deliveredByDeliverWorker)} of the ${fmt(devices)} devices of ${fanOutsInAll ?? fanOuts} fan-outs of 10k.`,
      '',
      '| get_pushrules c=1, on the two others | samples | failed | p50 | p99 |',
      '|---|---|---|---|---|',
      `| idle | ${fmt(idle.samples)} | ${idle.errors} | ${ms2(idle.p50Ms)} | ${ms2(idle.p99Ms)} |`,
      `| during ${fanOuts} fan-outs of 10k | ${fmt(during.samples)} | ${during.errors} | ${ms2(during.p50Ms)} | ${ms2(during.p99Ms)} |`,
      ...storeRows(r.roles),
    );
  }
  for (const note of r.notes) lines.push('', note);
  return lines.join('\n');
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? Number.NaN : (sorted[Math.floor((sorted.length - 1) / 2)] ?? Number.NaN);
}
const fmt = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '–');
const ms = (n: number) => (Number.isFinite(n) ? `${Math.round(n)} ms` : '–');
const ms2 = (n: number) => (Number.isFinite(n) ? `${n.toFixed(2)} ms` : '–');
const seconds = (n: number) => (Number.isFinite(n) ? `${(n / 1000).toFixed(2)} s` : '–');
/** Bytes in MiB, written "MB" as every bench table does. */
export const mb = (bytes: number) => (Number.isFinite(bytes) ? `${Math.round(bytes / 1024 / 1024)} MB` : '–');
