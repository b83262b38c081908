import { describe, expect, it } from 'vitest';
import {
  checkSynapseTargets,
  messagesFromDeviceLog,
  synapseMarkdown,
  type SendRecord,
  type SentMessage,
  type SynapseBenchResult,
  type SynapseSide,
} from '../../bench/support/synapse-report.js';

const sentAt = (eventId: string, kind: SendRecord['kind'], startedAt: number, sendMs = 10): SendRecord => ({
  eventId,
  kind,
  startedAt,
  sendMs,
});

const message = (overrides: Partial<SentMessage> = {}): SentMessage => ({
  eventId: '$e',
  kind: 'sequential',
  sendMs: 10,
  lastPushMs: 100,
  devices: 2,
  duplicates: 0,
  ...overrides,
});

const side = (sendMs: number, lastPushMs: number, overrides: Partial<SynapseSide> = {}): SynapseSide => ({
  messages: [message({ sendMs, lastPushMs }), message({ sendMs, lastPushMs, kind: 'batch' })],
  batchLastPushMs: lastPushMs,
  recipients: 2,
  gatewayRequests: 4,
  otherRequests: 0,
  cpuMsPerMessage: { synapse: 50 },
  wallMs: 1000,
  ...overrides,
});

const result = (overrides: Partial<SynapseBenchResult> = {}): SynapseBenchResult => ({
  loadAverageAtStart: [1, 1, 1],
  members: 3,
  sends: 1,
  batch: 1,
  workers: 3,
  setupMs: 1000,
  totalMs: 5000,
  notes: [],
  ...overrides,
});

describe('messagesFromDeviceLog', () => {
  it("counts each message's devices, the pushes beyond one per device, and its last push after its send started", () => {
    const log = new Map([
      [
        'a',
        [
          { eventId: '$warm', at: 50 },
          { eventId: '$one', at: 1040 },
          { eventId: '$one', at: 1090 },
          { eventId: '$b1', at: 2300 },
        ],
      ],
      [
        'b',
        [
          { eventId: '$one', at: 1060 },
          { eventId: '', at: 1500 },
          { eventId: '$b2', at: 2450 },
        ],
      ],
    ]);
    const { messages, batchLastPushMs, otherRequests } = messagesFromDeviceLog(
      [
        sentAt('$warm', 'warmup', 0),
        sentAt('$one', 'sequential', 1000),
        sentAt('$b1', 'batch', 2010),
        sentAt('$b2', 'batch', 2020),
        sentAt('$lost', 'sequential', 3000),
      ],
      log,
      2000,
    );
    expect(
      messages.map(({ eventId, devices, duplicates, lastPushMs }) => [eventId, devices, duplicates, lastPushMs]),
    ).toEqual([
      ['$one', 2, 1, 90],
      ['$b1', 1, 0, 290],
      ['$b2', 1, 0, 430],
      ['$lost', 0, 0, undefined],
    ]);
    expect(batchLastPushMs).toBe(450);
    // The badge-only push (no event ID) is none of the messages.
    expect(otherRequests).toBe(1);
  });
});

describe('checkSynapseTargets', () => {
  it.each([
    { name: 'both met', module: side(10.5, 400), met: [true, true, true] },
    { name: 'the send slower by more than 10 %', module: side(11.5, 400), met: [false, true, true] },
    { name: 'the last push later than half', module: side(10, 600), met: [true, false, true] },
    {
      name: 'a push lost',
      module: side(10, 400, { messages: [message({ devices: 1 }), message({ kind: 'batch' })] }),
      met: [true, true, false],
    },
    {
      name: 'a push twice',
      module: side(10, 400, { messages: [message({ duplicates: 1 }), message({ kind: 'batch' })] }),
      met: [true, true, false],
    },
  ])('judges the module against Synapse alone on the sequential p50s: $name', ({ module, met }) => {
    const checks = checkSynapseTargets(result({ alone: side(10, 1000), module }));
    expect(checks.map((check) => check.met)).toEqual(met);
  });

  it('judges nothing when a side was not measured', () => {
    const [check] = checkSynapseTargets(result({ alone: side(10, 1000) }));
    expect(check?.unjudged).toBe(true);
  });
});

describe('synapseMarkdown', () => {
  it('shows each figure on both sides with the ratio, how many samples, and the pushes received', () => {
    const text = synapseMarkdown(result({ alone: side(10, 1000), module: side(12, 250) }));
    expect(text).toContain('| send (PUT round trip), one after the other, p50 | 1 | 10.0 ms | 12.0 ms | 1.20 |');
    expect(text).toContain(
      '| send → last push, one after the other, p99 | 1 (the largest) | 1000 ms | 250 ms | 0.25 |',
    );
    expect(text).toContain('| pushes received / expected (devices × messages) | | 4 / 4 | 4 / 4 | |');
  });
});
