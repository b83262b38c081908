import { isAsciiWordUnit } from './case-fold.js';
import type { CompiledRule } from './compiled-rule.js';
import type { FoldedText } from './folded-text.js';
import type { GlobMatcher } from './glob-matcher.js';
import { ARRAY_BYTES, MAP_ENTRY_BYTES, POINTER_BYTES, stringBytes } from './heap-estimate.js';
import type { PreparedEvent } from './prepared-event.js';

export interface ContentRule {
  /** The rule's `pattern`, matched against `content.body` at word boundaries. */
  readonly matcher: GlobMatcher;
  readonly rule: CompiledRule;
}

/** Below this many indexable keywords, trying each in order is as cheap as the index. */
const INDEX_THRESHOLD = 8;

/**
 * A user's enabled content rules, in order, and an index that finds the
 * first one matching a body without trying every keyword.
 *
 * The index holds literal keywords (no `*` or `?`) that start with a
 * character of `[A-Za-z0-9_]`, by their leading run of such characters. Such
 * a keyword can only match where a word of the body starts, and that word
 * must be exactly its leading run: the match starts after a boundary, and
 * its leading run ends either at the end of the keyword (where the match
 * must end at a boundary) or before a character outside the set. So the
 * body's distinct words (`FoldedText.wordRuns`) name every keyword that can
 * match; each is then checked in full. Everything else (globs, keywords
 * starting with punctuation or CJK) is tried in order, and only while it
 * could still come before the best match found so far: the first rule in
 * order decides, whichever way it was found.
 */
export class ContentRules {
  private readonly index: ReadonlyMap<string, readonly number[]> | null;
  /** Positions the index does not cover, ascending. */
  private readonly unindexed: readonly number[];
  readonly estimatedBytes: number;

  constructor(private readonly rules: readonly ContentRule[]) {
    const keys = rules.map(({ matcher }) => indexKey(matcher));
    const indexable = keys.filter((key) => key !== null).length;
    let bytes = ARRAY_BYTES + rules.length * POINTER_BYTES * 3;
    if (indexable >= INDEX_THRESHOLD) {
      const index = new Map<string, number[]>();
      const unindexed: number[] = [];
      keys.forEach((key, position) => {
        if (key === null) {
          unindexed.push(position);
          return;
        }
        const positions = index.get(key);
        if (positions === undefined) {
          index.set(key, [position]);
          bytes += MAP_ENTRY_BYTES + ARRAY_BYTES + stringBytes(key);
        } else {
          positions.push(position);
        }
        bytes += POINTER_BYTES;
      });
      this.index = index;
      this.unindexed = unindexed;
    } else {
      this.index = null;
      this.unindexed = rules.map((_, position) => position);
    }
    this.estimatedBytes = bytes + this.unindexed.length * POINTER_BYTES;
  }

  get size(): number {
    return this.rules.length;
  }

  /** The first rule, in order, whose pattern matches the event's body. */
  firstMatch(event: PreparedEvent): CompiledRule | undefined {
    if (this.rules.length === 0) return undefined;
    const body = event.body();
    if (body === null) return undefined;
    let best = this.rules.length;
    const runs = this.index === null ? null : body.wordRuns();
    if (this.index !== null && runs !== null) {
      if (runs.list.length <= this.index.size) {
        for (const run of runs.list) {
          const positions = this.index.get(run);
          if (positions !== undefined) best = this.firstMatching(positions, best, body);
        }
      } else {
        for (const [key, positions] of this.index) {
          if (runs.set.has(key)) best = this.firstMatching(positions, best, body);
        }
      }
      best = this.firstMatching(this.unindexed, best, body);
    } else {
      // No index, or a body the index cannot vouch for: every rule, in order.
      for (let position = 0; position < best; position += 1) {
        if (this.rules[position]?.matcher.matchesAtWordBoundaries(body) === true) best = position;
      }
    }
    return this.rules[best]?.rule;
  }

  /** The first of `positions` (ascending) below `best` whose pattern matches, else `best`. */
  private firstMatching(positions: readonly number[], best: number, body: FoldedText): number {
    for (const position of positions) {
      if (position >= best) return best;
      if (this.rules[position]?.matcher.matchesAtWordBoundaries(body) === true) return position;
    }
    return best;
  }
}

/** The leading run of `[A-Za-z0-9_]` of a literal keyword, or `null` when it cannot be indexed. */
function indexKey(matcher: GlobMatcher): string | null {
  if (!matcher.isLiteral) return null;
  const folded = matcher.folded;
  let end = 0;
  while (end < folded.length && isAsciiWordUnit(folded.charCodeAt(end))) end += 1;
  return end === 0 ? null : folded.slice(0, end);
}
