import { BoundedCache } from './bounded-cache.js';
import { foldCase, isAsciiWordUnit } from './case-fold.js';
import type { FoldedText } from './folded-text.js';

/**
 * Push-rule globs (`*` any run of characters, newlines included; `?` one
 * code point; everything else literal, case-insensitively), compiled once
 * per pattern and matched without regular expressions.
 *
 * Why not a RegExp: a `iu` regular expression cannot express the spec's word
 * boundary (under `i`, `[A-Za-z0-9_]` also matches `ſ` and the Kelvin sign,
 * which the spec counts as boundaries), and backtracking on `*a*b*c*` over a
 * 64 KiB body is polynomial in its length. Here a glob is split at its stars
 * into segments; placing each segment at its earliest possible position is
 * optimal (an earlier end never removes a choice for what follows), so the
 * matcher never backtracks across stars and literal segments are found with
 * `indexOf` on the folded text.
 */

/** A run of the pattern between stars, folded. */
interface Segment {
  readonly text: string;
  /** Per UTF-16 unit of `text`: true where the pattern had `?`; null when it had none. */
  readonly wild: readonly boolean[] | null;
  /** `text` up to its first wildcard: where a match must start, for `indexOf`. */
  readonly lead: string;
  readonly codePoints: number;
  /** A surrogate without its partner: must not match half of a pair in the text (as a `u` RegExp would not). */
  readonly loneSurrogates: boolean;
  /** No wildcard and no lone surrogate: `startsWith` decides. */
  readonly plain: boolean;
}

const STAR = 0x2a;
const QUESTION = 0x3f;

const isHigh = (unit: number): boolean => unit >= 0xd800 && unit <= 0xdbff;
const isLow = (unit: number): boolean => unit >= 0xdc00 && unit <= 0xdfff;

/** Position `i` falls between the two halves of a surrogate pair. */
function isMidPair(text: string, i: number): boolean {
  return i > 0 && isLow(text.charCodeAt(i)) && isHigh(text.charCodeAt(i - 1));
}

function isPairAt(text: string, i: number): boolean {
  return isHigh(text.charCodeAt(i)) && isLow(text.charCodeAt(i + 1));
}

/** A word boundary lies before position `i` of the raw value. */
function isBoundaryBefore(raw: string, i: number): boolean {
  return i === 0 || !isAsciiWordUnit(raw.charCodeAt(i - 1));
}

/** A word boundary lies at position `i` (after the match) of the raw value. */
function isBoundaryAt(raw: string, i: number): boolean {
  return i >= raw.length || !isAsciiWordUnit(raw.charCodeAt(i));
}

function makeSegment(text: string, wild: readonly boolean[] | null): Segment {
  const firstWild = wild === null ? -1 : wild.indexOf(true);
  let codePoints = 0;
  let loneSurrogates = false;
  for (let k = 0; k < text.length; k += 1) {
    const unit = text.charCodeAt(k);
    if (isHigh(unit) && isLow(text.charCodeAt(k + 1))) {
      k += 1;
    } else if (isHigh(unit) || isLow(unit)) {
      loneSurrogates = true;
    }
    codePoints += 1;
  }
  return {
    text,
    wild,
    lead: firstWild < 0 ? text : text.slice(0, firstWild),
    codePoints,
    loneSurrogates,
    plain: firstWild < 0 && !loneSurrogates,
  };
}

/** The end of `segment` matched at `i` of the folded text, or -1. */
function matchAt(folded: string, segment: Segment, i: number): number {
  if (segment.plain) return folded.startsWith(segment.text, i) ? i + segment.text.length : -1;
  const { text, wild } = segment;
  let j = i;
  for (let k = 0; k < text.length; k += 1) {
    if (wild?.[k] === true) {
      if (j >= folded.length) return -1;
      j += isPairAt(folded, j) ? 2 : 1;
      continue;
    }
    const unit = text.charCodeAt(k);
    if (folded.charCodeAt(j) !== unit) return -1;
    if (segment.loneSurrogates) {
      const loneHigh = isHigh(unit) && !isLow(text.charCodeAt(k + 1));
      const loneLow = isLow(unit) && !(k > 0 && isHigh(text.charCodeAt(k - 1)));
      if (loneHigh && isLow(folded.charCodeAt(j + 1))) return -1;
      if (loneLow && j > 0 && isHigh(folded.charCodeAt(j - 1))) return -1;
    }
    j += 1;
  }
  return j;
}

/** The next position at or after `from` where `segment` may start, or -1. */
function candidateFrom(folded: string, segment: Segment, from: number): number {
  if (from > folded.length) return -1;
  return segment.lead === '' ? from : folded.indexOf(segment.lead, from);
}

/** The end of the earliest match of `segment` starting at or after `from`, or -1. */
function earliestEnd(folded: string, segment: Segment, from: number): number {
  for (let i = candidateFrom(folded, segment, from); i >= 0; i = candidateFrom(folded, segment, i + 1)) {
    if (isMidPair(folded, i)) continue;
    const end = matchAt(folded, segment, i);
    if (end >= 0) return end;
  }
  return -1;
}

/** The end of the earliest match of `segment` that starts after a word boundary, or -1. */
function earliestBoundedStartEnd(text: FoldedText, segment: Segment): number {
  const { folded, raw } = text;
  for (let i = candidateFrom(folded, segment, 0); i >= 0; i = candidateFrom(folded, segment, i + 1)) {
    if (!isBoundaryBefore(raw, i) || isMidPair(folded, i)) continue;
    const end = matchAt(folded, segment, i);
    if (end >= 0) return end;
  }
  return -1;
}

/** `segment` matches somewhere starting at or after `from` and ending at a word boundary. */
function matchesEndingAtBoundary(text: FoldedText, segment: Segment, from: number, boundedStart: boolean): boolean {
  const { folded, raw } = text;
  for (let i = candidateFrom(folded, segment, from); i >= 0; i = candidateFrom(folded, segment, i + 1)) {
    if ((boundedStart && !isBoundaryBefore(raw, i)) || isMidPair(folded, i)) continue;
    const end = segment.plain ? i + segment.text.length : matchAt(folded, segment, i);
    if (end >= 0 && isBoundaryAt(raw, end)) return true;
  }
  return false;
}

/** Position `count` code points before `end`. */
function stepBack(text: string, end: number, count: number): number {
  let i = end;
  for (let c = 0; c < count && i > 0; c += 1)
    i -= i >= 2 && isLow(text.charCodeAt(i - 1)) && isHigh(text.charCodeAt(i - 2)) ? 2 : 1;
  return i;
}

export class GlobMatcher {
  /** True when the pattern has neither `*` nor `?`. */
  readonly isLiteral: boolean;
  /** The folded pattern; for a literal, what a match must equal. */
  readonly folded: string;
  /** Split at stars; empty segments between stars are dropped (they match anywhere). */
  private readonly segments: readonly Segment[];

  constructor(readonly pattern: string) {
    this.folded = foldCase(pattern);
    const parts: Segment[] = [];
    let start = 0;
    for (let i = 0; i <= this.folded.length; i += 1) {
      if (i < this.folded.length && this.folded.charCodeAt(i) !== STAR) continue;
      const text = this.folded.slice(start, i);
      const isEdge = start === 0 || i === this.folded.length;
      if (text !== '' || isEdge) parts.push(segmentOfPattern(text));
      start = i + 1;
    }
    this.segments = parts;
    this.isLiteral = parts.length === 1 && parts[0]?.wild === null;
  }

  /** For every key but `content.body`: the pattern must match the whole value. */
  matchesWhole(text: FoldedText): boolean {
    const { folded } = text;
    const segments = this.segments;
    const first = segments[0];
    const last = segments[segments.length - 1];
    if (first === undefined || last === undefined) return false;
    if (segments.length === 1) return matchAt(folded, first, 0) === folded.length;
    let position = matchAt(folded, first, 0);
    for (let s = 1; s < segments.length - 1 && position >= 0; s += 1) {
      const segment = segments[s];
      if (segment !== undefined) position = earliestEnd(folded, segment, position);
    }
    if (position < 0) return false;
    if (last.text === '') return true;
    const lastStart = stepBack(folded, folded.length, last.codePoints);
    return lastStart >= position && matchAt(folded, last, lastStart) === folded.length;
  }

  /**
   * For `content.body`: the pattern must match a part of the value that
   * starts at the start or after a character outside `[A-Za-z0-9_]`, and
   * ends at the end or before such a character.
   */
  matchesAtWordBoundaries(text: FoldedText): boolean {
    const segments = this.segments;
    const first = segments[0];
    const last = segments[segments.length - 1];
    if (first === undefined || last === undefined) return false;
    if (segments.length === 1) return matchesEndingAtBoundary(text, first, 0, true);
    let position = earliestBoundedStartEnd(text, first);
    for (let s = 1; s < segments.length - 1 && position >= 0; s += 1) {
      const segment = segments[s];
      if (segment !== undefined) position = earliestEnd(text.folded, segment, position);
    }
    if (position < 0) return false;
    // A trailing star runs to the end of the value, which is a boundary.
    if (last.text === '') return true;
    return matchesEndingAtBoundary(text, last, position, false);
  }
}

function segmentOfPattern(text: string): Segment {
  if (!text.includes('?')) return makeSegment(text, null);
  const wild = Array.from({ length: text.length }, (_, k) => text.charCodeAt(k) === QUESTION);
  return makeSegment(text, wild);
}

/**
 * `content.body` contains `literal` (already folded) at word boundaries;
 * `?` and `*` in it are ordinary characters. For `contains_display_name`.
 */
export function containsLiteralAtWordBoundaries(text: FoldedText, foldedLiteral: string): boolean {
  return matchesEndingAtBoundary(text, makeSegment(foldedLiteral, null), 0, true);
}

/** Matchers are pure functions of their pattern: users with the same keyword share one. */
const MATCHERS = new BoundedCache<string, GlobMatcher>(65_536);

export function globMatcher(pattern: string): GlobMatcher {
  return MATCHERS.getOrCreate(pattern, (p) => new GlobMatcher(p));
}
