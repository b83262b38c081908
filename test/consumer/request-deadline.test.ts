import { describe, expect, it } from 'vitest';
import { requestDeadline, stopWorkBy } from '../../src/consumer/request-deadline.js';

describe('request deadline', () => {
  it.each([
    ['milliseconds timestamp', 1_700_000_000_000, '5000', 1_700_000_005_000],
    ['seconds timestamp (AMQP)', 1_700_000_000, '5000', 1_700_000_005_000],
    ['numeric expiration', 1_700_000_000_000, 250, 1_700_000_000_250],
    ['no timestamp', undefined, '5000', undefined],
    ['no expiration', 1_700_000_000_000, undefined, undefined],
    ['garbage expiration', 1_700_000_000_000, 'soon', undefined],
    ['negative expiration', 1_700_000_000_000, -1, undefined],
  ])('%s', (_case, timestamp, expiration, expected) => {
    expect(requestDeadline(timestamp, expiration)).toBe(expected);
  });
});

describe('when a worker stops working on a request', () => {
  it.each([
    ['the margin before the deadline', 1_700_000_000_000, '10000', 200, 1_700_000_009_800],
    ['at most a tenth of a short expiration', 1_700_000_000_000, '1000', 200, 1_700_000_000_900],
    ['no margin', 1_700_000_000_000, '1000', 0, 1_700_000_001_000],
    ['seconds timestamp (AMQP)', 1_700_000_000, 5000, 200, 1_700_000_004_800],
    ['no deadline', 1_700_000_000_000, undefined, 200, undefined],
  ])('%s', (_case, timestamp, expiration, marginMs, expected) => {
    expect(stopWorkBy(timestamp, expiration, marginMs)).toBe(expected);
  });
});
