import { describe, expect, it } from 'vitest';
import { requestDeadline } from '../../src/rpc/request-deadline.js';

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
