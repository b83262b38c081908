import { describe, expect, it } from 'vitest';
import { parseRetryAfter } from '../../src/delivery/retry-after.js';

/** Sunday 1 June 2025, 12:00:00 UTC. */
const NOW = Date.UTC(2025, 5, 1, 12, 0, 0);
const YEAR_MS = 365 * 24 * 3600 * 1000;

describe('Retry-After: delta-seconds', () => {
  it.each([
    ['0', 0],
    ['1', 1000],
    ['120', 120_000],
    ['0030', 30_000],
    [' 45 ', 45_000],
    ['86400', 86_400_000],
  ])('%j waits %i ms', (value, waitMs) => {
    expect(parseRetryAfter(value, NOW)).toBe(waitMs);
  });
});

describe('Retry-After: HTTP-date, relative to now', () => {
  it.each([
    ['IMF-fixdate, two minutes ahead', 'Sun, 01 Jun 2025 12:02:00 GMT', 120_000],
    ['IMF-fixdate, the next day', 'Mon, 02 Jun 2025 12:00:00 GMT', 86_400_000],
    ['IMF-fixdate, now', 'Sun, 01 Jun 2025 12:00:00 GMT', 0],
    ['IMF-fixdate, in the past: no wait', 'Sat, 31 May 2025 12:00:00 GMT', 0],
    ['IMF-fixdate, a leap second stands for the next second', 'Sun, 01 Jun 2025 12:00:60 GMT', 60_000],
    ['RFC 850, two minutes ahead', 'Sunday, 01-Jun-25 12:02:00 GMT', 120_000],
    ['RFC 850, a year ahead', 'Monday, 01-Jun-26 12:00:00 GMT', YEAR_MS],
    ['RFC 850, -94 is 1994, not 2094 (more than 50 years ahead)', 'Sunday, 06-Nov-94 08:49:37 GMT', 0],
    ['asctime, a one-digit day padded with a space', 'Sun Jun  1 12:02:00 2025', 120_000],
    ['asctime, a two-digit day', 'Tue Jun 10 12:00:00 2025', 9 * 86_400_000],
  ])('%s', (_, value, waitMs) => {
    expect(parseRetryAfter(value, NOW)).toBe(waitMs);
  });
});

describe('Retry-After: anything else is no Retry-After at all', () => {
  it.each([
    ['empty', ''],
    ['a word', 'soon'],
    ['negative', '-1'],
    ['a fraction', '1.5'],
    ['an exponent', '1e3'],
    ['a sign', '+5'],
    ['seconds too many to count exactly', '99999999999999999999'],
    ['two numbers', '5, 10'],
    ['ISO 8601, not an HTTP-date', '2025-06-01T12:02:00Z'],
    ['what Date.parse would still accept', 'Tuesday 7'],
    ['IMF-fixdate with a one-digit day', 'Sun, 1 Jun 2025 12:02:00 GMT'],
    ['IMF-fixdate in another zone', 'Sun, 01 Jun 2025 12:02:00 UTC'],
    ['IMF-fixdate, no zone', 'Sun, 01 Jun 2025 12:02:00'],
    ['IMF-fixdate, 31 February', 'Sun, 31 Feb 2025 12:00:00 GMT'],
    ['IMF-fixdate, hour 24', 'Sun, 01 Jun 2025 24:00:00 GMT'],
    ['IMF-fixdate, minute 60', 'Sun, 01 Jun 2025 12:60:00 GMT'],
    ['IMF-fixdate, an unknown month', 'Sun, 01 Jux 2025 12:00:00 GMT'],
    ['IMF-fixdate, a lower-case month', 'Sun, 01 jun 2025 12:00:00 GMT'],
    ['IMF-fixdate, a long day name', 'Sunday, 01 Jun 2025 12:02:00 GMT'],
    ['RFC 850 with a short day name', 'Sun, 01-Jun-25 12:02:00 GMT'],
    ['asctime with a zone', 'Sun Jun  1 12:02:00 2025 GMT'],
  ])('%s: %j', (_, value) => {
    expect(parseRetryAfter(value, NOW)).toBeUndefined();
  });
});
