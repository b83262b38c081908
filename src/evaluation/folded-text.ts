import { foldCase, isAsciiWordUnit } from './case-fold.js';

/** The distinct word runs of a text, for the content-keyword index. */
export interface WordRuns {
  /** In order of first appearance, each once. */
  readonly list: readonly string[];
  readonly set: ReadonlySet<string>;
}

/**
 * A string value of the event with its case folding, computed once per event
 * and shared by every rule and recipient that looks at it.
 *
 * Matching compares `folded` with folded patterns; word boundaries are
 * decided on `raw` (a boundary is any character outside `[A-Za-z0-9_]` of
 * the value as sent: `ſ` is a boundary even though it folds to `s`). The two
 * have the same length, position for position (see `case-fold.ts`).
 */
export class FoldedText {
  readonly folded: string;
  private runs: WordRuns | null | undefined;

  constructor(readonly raw: string) {
    this.folded = foldCase(raw);
  }

  /**
   * The folded text of every maximal run of `[A-Za-z0-9_]` in `raw`, or
   * `null` when some character outside that set folds into it (`ſ`, the
   * Kelvin sign): a keyword may then match starting inside what `raw` calls
   * a boundary, and the index's reasoning does not hold.
   */
  wordRuns(): WordRuns | null {
    if (this.runs === undefined) this.runs = findWordRuns(this.raw, this.folded);
    return this.runs;
  }
}

function findWordRuns(raw: string, folded: string): WordRuns | null {
  const set = new Set<string>();
  const list: string[] = [];
  let start = -1;
  for (let i = 0; i <= raw.length; i += 1) {
    const isWord = i < raw.length && isAsciiWordUnit(raw.charCodeAt(i));
    if (i < raw.length && isWord !== isAsciiWordUnit(folded.charCodeAt(i))) return null;
    if (isWord) {
      if (start < 0) start = i;
    } else if (start >= 0) {
      const run = folded.slice(start, i);
      if (!set.has(run)) {
        set.add(run);
        list.push(run);
      }
      start = -1;
    }
  }
  return { list, set };
}
