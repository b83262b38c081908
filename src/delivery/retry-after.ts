/**
 * The `Retry-After` header (RFC 9110 §10.2.3) as a wait in milliseconds
 * from `now`, or undefined when the value is neither form: a header we
 * cannot read is as good as none, and the backoff alone decides.
 *
 * Both forms are read: delta-seconds (`120`) and an HTTP-date. A recipient
 * must accept all three date formats of RFC 9110 §5.6.7 (IMF-fixdate and the
 * obsolete RFC 850 and asctime ones), so all three are parsed, strictly: a
 * lenient parser such as `Date.parse` would turn garbage like `Tuesday 7`
 * into some date and make us wait for it. A date already past waits 0.
 */
export function parseRetryAfter(value: string, now: number): number | undefined {
  const text = value.trim();
  if (/^\d+$/.test(text)) {
    const seconds = Number(text);
    // A number of seconds too large to count exactly is no wait anyone meant.
    return Number.isSafeInteger(seconds * 1000) ? seconds * 1000 : undefined;
  }
  const at = parseHttpDate(text, now);
  return at === undefined ? undefined : Math.max(0, at - now);
}

const DAY = '(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)';
const LONG_DAY = '(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)';
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const MONTH = `(${MONTHS.join('|')})`;
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})';

/** `Sun, 06 Nov 1994 08:49:37 GMT` */
const IMF_FIXDATE = new RegExp(`^${DAY}, (\\d{2}) ${MONTH} (\\d{4}) ${TIME} GMT$`);
/** `Sunday, 06-Nov-94 08:49:37 GMT` */
const RFC_850 = new RegExp(`^${LONG_DAY}, (\\d{2})-${MONTH}-(\\d{2}) ${TIME} GMT$`);
/** `Sun Nov  6 08:49:37 1994` (a one-digit day is padded with a space) */
const ASCTIME = new RegExp(`^${DAY} ${MONTH} (\\d{2}| \\d) ${TIME} (\\d{4})$`);

interface DateParts {
  readonly year: number;
  readonly month: string;
  readonly day: string;
  readonly hour: string;
  readonly minute: string;
  readonly second: string;
}

function parseHttpDate(text: string, now: number): number | undefined {
  let match = IMF_FIXDATE.exec(text);
  if (match !== null) {
    const [, day = '', month = '', year = '', hour = '', minute = '', second = ''] = match;
    return utc({ year: Number(year), month, day, hour, minute, second });
  }
  match = RFC_850.exec(text);
  if (match !== null) {
    const [, day = '', month = '', year = '', hour = '', minute = '', second = ''] = match;
    return utc({ year: fullYear(Number(year), now), month, day, hour, minute, second });
  }
  match = ASCTIME.exec(text);
  if (match !== null) {
    const [, month = '', day = '', hour = '', minute = '', second = '', year = ''] = match;
    return utc({ year: Number(year), month, day, hour, minute, second });
  }
  return undefined;
}

/**
 * RFC 9110 §5.6.7: a two-digit year that would be more than 50 years in
 * the future is the most recent past year with the same last two digits.
 */
function fullYear(twoDigits: number, now: number): number {
  const thisYear = new Date(now).getUTCFullYear();
  const candidate = thisYear - (thisYear % 100) + twoDigits;
  return candidate > thisYear + 50 ? candidate - 100 : candidate;
}

/** The instant of valid parts; undefined for a day the month does not have, or a time past 23:59:60. */
function utc(parts: DateParts): number | undefined {
  const month = MONTHS.indexOf(parts.month);
  const [day, hour, minute, second] = [parts.day, parts.hour, parts.minute, parts.second].map(Number);
  if (day === undefined || hour === undefined || minute === undefined || second === undefined) return undefined;
  if (hour > 23 || minute > 59 || second > 60) return undefined;
  // Date.UTC rolls 31 Feb over into March: a date that does not round-trip did not exist.
  const date = new Date(Date.UTC(parts.year, month, day));
  if (date.getUTCFullYear() !== parts.year || date.getUTCMonth() !== month || date.getUTCDate() !== day)
    return undefined;
  // A leap second (:60) has no instant of its own in JavaScript time: the next second stands for it.
  return date.getTime() + ((hour * 60 + minute) * 60 + second) * 1000;
}
