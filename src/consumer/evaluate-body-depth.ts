import { closingQuote } from '../matrix/json-depth.js';

const QUOTE = 0x22; // "
const COMMA = 0x2c; // ,
const OPEN_BRACE = 0x7b; // {
const CLOSE_BRACE = 0x7d; // }
const OPEN_BRACKET = 0x5b; // [
const CLOSE_BRACKET = 0x5d; // ]

/**
 * How deep the batch form may nest before anything is parsed. Within it an
 * entry nested deeper than the single form allows fails alone (its
 * neighbours are evaluated); past it the whole message is refused, so that
 * no body makes the parse build millions of nested arrays (`JSON.parse`
 * itself does not recurse). Above the largest `limits.maxJsonDepth` (512)
 * plus the two levels the batch form adds.
 */
export const BATCH_DEPTH_CEILING = 1024;

/** What one scan of an `evaluate` body found about its nesting. */
export interface EvaluateBodyDepth {
  /** It nests deeper than the ceiling it was scanned with: the scan stopped there. */
  readonly overCeiling: boolean;
  /** The deepest level outside the entries of `events` (the whole body when it has none); the envelope is 1. */
  readonly outside: number;
  /**
   * The entries of the top-level `events` array (the last one, as `JSON.parse`
   * keeps the last of repeated keys), by position: how deep each nests on
   * its own, which is how deep the body is when it is sent alone in the
   * single form (an entry that is an object is 1).
   */
  readonly entries: readonly number[];
}

/**
 * One pass over the text of an `evaluate` body, before it is parsed: how
 * deep the envelope nests, and how deep each entry of `events` nests on its
 * own. In the batch form `events` and its entry add two levels, so a
 * depth limit on the whole body would refuse an event that passes alone,
 * and one deep event would fail every event sent with it; with this each
 * entry is held to the single form's limit and fails alone.
 *
 * Like `nestsDeeperThan` (json-depth.ts): brackets inside strings do not
 * count, no recursion, no parse; text that is not JSON gets an answer and
 * the parse that follows refuses it. A key is known by its decoded text,
 * so an escaped `"ev\u0065nts"` is `events` here as it is to `JSON.parse`.
 */
export function evaluateBodyDepth(text: string, ceiling: number): EvaluateBodyDepth {
  let depth = 0;
  let outside = 0;
  /** The last string at level 1: a `[` opened at level 1 is the value of that key. */
  let keyStart = -1;
  let keyEnd = -1;
  /** The entries of the `events` array being scanned, while inside it. */
  let current: number[] | undefined;
  let entry = 0;
  let entries: number[] = [];
  for (let i = 0; i < text.length; i += 1) {
    const unit = text.charCodeAt(i);
    if (unit === QUOTE) {
      const end = closingQuote(text, i);
      if (depth === 1) {
        keyStart = i;
        keyEnd = end;
      }
      i = end;
    } else if (unit === OPEN_BRACE || unit === OPEN_BRACKET) {
      depth += 1;
      if (depth > ceiling) return { overCeiling: true, outside, entries: [] };
      if (current !== undefined && depth > 2) {
        // Levels below the `events` array: the entry's own depth.
        if (depth - 2 > (current[entry] ?? 0)) current[entry] = depth - 2;
      } else {
        if (depth > outside) outside = depth;
        if (depth === 2 && unit === OPEN_BRACKET && isEventsKey(text, keyStart, keyEnd)) {
          current = [];
          entry = 0;
        }
      }
    } else if ((unit === CLOSE_BRACE || unit === CLOSE_BRACKET) && depth > 0) {
      if (current !== undefined && depth === 2) {
        entries = current;
        current = undefined;
      }
      // Never below zero: stray closers (invalid JSON anyway) cannot buy
      // room for deeper nesting later in the text.
      depth -= 1;
    } else if (unit === COMMA && current !== undefined && depth === 2) {
      entry += 1;
    }
  }
  return { overCeiling: false, outside, entries };
}

/** Whether the string token at `start`..`end` (quotes included) is the key `events`. */
function isEventsKey(text: string, start: number, end: number): boolean {
  if (start < 0) return false;
  if (end - start === 7 && text.startsWith('"events"', start)) return true;
  const token = text.slice(start, end + 1);
  if (!token.includes('\\')) return false;
  try {
    return JSON.parse(token) === 'events';
  } catch {
    return false;
  }
}
