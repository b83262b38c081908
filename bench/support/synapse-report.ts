import { percentile } from './closed-loop.js';
import type { TargetCheck } from './report.js';

/** Issue 40's targets: the module adds at most 10 % to the send p50, and its last push comes in half Synapse's time. */
export const SEND_P50_RATIO_TARGET = 1.1;
export const LAST_PUSH_RATIO_TARGET = 0.5;

/** One message sent into the room, as the sender and the push gateway saw it. */
export interface SentMessage {
  readonly eventId: string;
  /** One of the sends one after the other, or of the concurrent batch. */
  readonly kind: 'sequential' | 'batch';
  /** The PUT /rooms/{room}/send round trip. */
  readonly sendMs: number;
  /** From the PUT's start to the last of the event's pushes the gateway double read (its clock, ms). */
  readonly lastPushMs: number | undefined;
  /** Devices that got the event at least once, and requests beyond one per device. */
  readonly devices: number;
  readonly duplicates: number;
}

/** One side of the comparison: Synapse alone, or Synapse with the module and the workers. */
export interface SynapseSide {
  readonly messages: readonly SentMessage[];
  /** The concurrent batch: from its first PUT's start to its last push. */
  readonly batchLastPushMs: number | undefined;
  /** Pushes expected per message: the room's members but the sender. */
  readonly recipients: number;
  /** Requests the gateway double got in the measured window (Synapse sends one per device). */
  readonly gatewayRequests: number;
  /** Requests whose notification was none of the measured events (badge updates, say). */
  readonly otherRequests: number;
  /** CPU seconds per measured message, by process (`synapse`, `workers`, `rabbitmq`, `mongodb`, `gateway`). */
  readonly cpuMsPerMessage: Readonly<Record<string, number>>;
  readonly wallMs: number;
}

/** A message as the sender saw it: `startedAt` on the wall clock the gateway double also stamps with. */
export interface SendRecord {
  readonly eventId: string;
  readonly kind: SentMessage['kind'] | 'warmup';
  readonly startedAt: number;
  readonly sendMs: number;
}

/**
 * The measured messages as the gateway double's device log (pushkey → what
 * it got, in order, with its clock) shows them: devices reached, pushes
 * beyond one per device, the last push after the send started; the batch's
 * last push after `batchStartedAt`; and the pushes of no sent event.
 */
export function messagesFromDeviceLog(
  sent: readonly SendRecord[],
  deviceLog: ReadonlyMap<string, readonly { readonly eventId: string; readonly at: number }[]>,
  batchStartedAt: number,
): { messages: SentMessage[]; batchLastPushMs: number | undefined; otherRequests: number } {
  const byEvent = new Map<string, { devices: Set<string>; count: number; lastAt: number }>();
  for (const [pushkey, deliveries] of deviceLog) {
    for (const { eventId, at } of deliveries) {
      const entry = byEvent.get(eventId) ?? { devices: new Set<string>(), count: 0, lastAt: 0 };
      entry.devices.add(pushkey);
      entry.count += 1;
      entry.lastAt = Math.max(entry.lastAt, at);
      byEvent.set(eventId, entry);
    }
  }
  const sentIds = new Set(sent.map((s) => s.eventId));
  let otherRequests = 0;
  for (const [eventId, entry] of byEvent) if (!sentIds.has(eventId)) otherRequests += entry.count;
  const messages = sent.flatMap((s): SentMessage[] => {
    if (s.kind === 'warmup') return [];
    const entry = byEvent.get(s.eventId);
    return [
      {
        eventId: s.eventId,
        kind: s.kind,
        sendMs: s.sendMs,
        lastPushMs: entry === undefined ? undefined : entry.lastAt - s.startedAt,
        devices: entry?.devices.size ?? 0,
        duplicates: entry === undefined ? 0 : entry.count - entry.devices.size,
      },
    ];
  });
  const batchLasts = messages
    .filter((m) => m.kind === 'batch')
    .map((m) => byEvent.get(m.eventId)?.lastAt)
    .filter((at): at is number => at !== undefined);
  return {
    messages,
    batchLastPushMs: batchLasts.length === 0 ? undefined : Math.max(...batchLasts) - batchStartedAt,
    otherRequests,
  };
}

export interface SynapseBenchResult {
  readonly loadAverageAtStart: readonly number[];
  readonly members: number;
  readonly sends: number;
  readonly batch: number;
  readonly workers: number;
  /** Setting up the room (users, joins, pushers): not measured time. */
  readonly setupMs: number;
  readonly totalMs: number;
  readonly alone?: SynapseSide;
  readonly module?: SynapseSide;
  readonly notes: readonly string[];
}

/** Nearest-rank p50 and p99 of some values, and how many. */
export function quantiles(values: readonly number[]): { p50: number; p99: number; n: number } {
  const sorted = [...values].sort((a, b) => a - b);
  return { p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), n: sorted.length };
}

const of = (side: SynapseSide | undefined, kind: SentMessage['kind'], pick: (m: SentMessage) => number | undefined) =>
  quantiles(
    (side?.messages ?? [])
      .filter((m) => m.kind === kind)
      .map(pick)
      .filter((v): v is number => v !== undefined),
  );

export const received = (side: SynapseSide) => side.messages.reduce((n, m) => n + m.devices, 0);
export const expected = (side: SynapseSide) => side.messages.length * side.recipients;
const duplicates = (side: SynapseSide) => side.messages.reduce((n, m) => n + m.duplicates, 0);

const ms = (value: number | undefined) =>
  value === undefined || Number.isNaN(value)
    ? '–'
    : value >= 100
      ? `${Math.round(value)} ms`
      : `${value.toFixed(1)} ms`;
const ratio = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined || Number.isNaN(a) || Number.isNaN(b) || b === 0 ? '–' : (a / b).toFixed(2);

/** The side-by-side table (bench/README.md, "Synapse with the module"). */
export function synapseMarkdown(r: SynapseBenchResult): string {
  const { alone, module } = r;
  const lines = [
    '',
    `## Synapse alone against Synapse with the module and ${r.workers} workers (issue 40)`,
    '',
    `A room of ${r.members} members, one sender, ${r.members - 1} HTTP pushers on one push gateway double. ` +
      `${r.sends} messages one after the other (each once the last one's pushes all arrived), then ${r.batch} at once. ` +
      `Load average at the start: ${r.loadAverageAtStart.map((l) => l.toFixed(2)).join(' ')}. ` +
      `Setup ${(r.setupMs / 1000).toFixed(0)} s (not measured), the part ${(r.totalMs / 1000).toFixed(0)} s in all.`,
    '',
    '| figure | samples (p99 rank) | Synapse alone | with the module | module ÷ alone |',
    '|---|---|---|---|---|',
  ];
  const row = (what: string, kind: SentMessage['kind'], pick: (m: SentMessage) => number | undefined) => {
    const a = of(alone, kind, pick);
    const m = of(module, kind, pick);
    const n = Math.max(a.n, m.n);
    const rank = Math.min(n, Math.max(1, Math.ceil(0.99 * n)));
    lines.push(
      `| ${what} p50 | ${n} | ${ms(a.p50)} | ${ms(m.p50)} | ${ratio(m.p50, a.p50)} |`,
      `| ${what} p99 | ${n} (${rank === n ? 'the largest' : `rank ${rank}`}) | ${ms(a.p99)} | ${ms(m.p99)} | ${ratio(m.p99, a.p99)} |`,
    );
  };
  row('send (PUT round trip), one after the other,', 'sequential', (m) => m.sendMs);
  row('send → last push, one after the other,', 'sequential', (m) => m.lastPushMs);
  row(`send, ${r.batch} at once,`, 'batch', (m) => m.sendMs);
  row(`send → last push of the same message, ${r.batch} at once,`, 'batch', (m) => m.lastPushMs);
  lines.push(
    `| first send → last push of the ${r.batch} at once | 1 | ${ms(alone?.batchLastPushMs)} | ${ms(module?.batchLastPushMs)} | ${ratio(module?.batchLastPushMs, alone?.batchLastPushMs)} |`,
  );
  const count = (side: SynapseSide | undefined, f: (s: SynapseSide) => string) => (side === undefined ? '–' : f(side));
  lines.push(
    `| pushes received / expected (devices × messages) | | ${count(alone, (s) => `${received(s)} / ${expected(s)}`)} | ${count(module, (s) => `${received(s)} / ${expected(s)}`)} | |`,
    `| pushes twice to a device | | ${count(alone, (s) => String(duplicates(s)))} | ${count(module, (s) => String(duplicates(s)))} | |`,
    `| HTTP requests at the gateway (of them not one of the messages) | | ${count(alone, (s) => `${s.gatewayRequests} (${s.otherRequests})`)} | ${count(module, (s) => `${s.gatewayRequests} (${s.otherRequests})`)} | |`,
  );
  for (const name of ['synapse', 'workers', 'rabbitmq', 'mongodb', 'gateway']) {
    const a = alone?.cpuMsPerMessage[name];
    const m = module?.cpuMsPerMessage[name];
    if (a === undefined && m === undefined) continue;
    lines.push(`| CPU of ${name} per message | | ${ms(a)} | ${ms(m)} | ${ratio(m, a)} |`);
  }
  lines.push(
    `| wall time of the measured messages | | ${ms(alone?.wallMs)} | ${ms(module?.wallMs)} | ${ratio(module?.wallMs, alone?.wallMs)} |`,
  );
  if (r.notes.length > 0) lines.push('', ...r.notes.map((note) => `- ${note}`));
  return lines.join('\n');
}

export function checkSynapseTargets(r: SynapseBenchResult): TargetCheck[] {
  const { alone, module } = r;
  if (alone === undefined || module === undefined)
    return [
      {
        target: 'issue 40: Synapse with the module against Synapse alone',
        measured: 'not measured (a side failed, see the notes)',
        met: false,
        unjudged: true,
      },
    ];
  const sendA = of(alone, 'sequential', (m) => m.sendMs);
  const sendM = of(module, 'sequential', (m) => m.sendMs);
  const pushA = of(alone, 'sequential', (m) => m.lastPushMs);
  const pushM = of(module, 'sequential', (m) => m.lastPushMs);
  const sendRatio = sendM.p50 / sendA.p50;
  const pushRatio = pushM.p50 / pushA.p50;
  return [
    {
      target: `issue 40: send p50 with the module ≤ ${SEND_P50_RATIO_TARGET} × Synapse alone`,
      measured: `${sendRatio.toFixed(2)} (${ms(sendM.p50)} ÷ ${ms(sendA.p50)})`,
      met: sendRatio <= SEND_P50_RATIO_TARGET,
    },
    {
      target: `issue 40: send → last push p50 with the module ≤ ${LAST_PUSH_RATIO_TARGET} × Synapse alone`,
      measured: `${pushRatio.toFixed(2)} (${ms(pushM.p50)} ÷ ${ms(pushA.p50)})`,
      met: pushRatio <= LAST_PUSH_RATIO_TARGET,
    },
    {
      target: 'issue 40: every push arrives, once, on both sides',
      measured: `alone ${received(alone)} / ${expected(alone)}, ${duplicates(alone)} twice; module ${received(module)} / ${expected(module)}, ${duplicates(module)} twice`,
      met:
        received(alone) === expected(alone) &&
        received(module) === expected(module) &&
        duplicates(alone) + duplicates(module) === 0,
    },
  ];
}
