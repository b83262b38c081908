/**
 * Case folding for push-rule matching: `foldCase(a) === foldCase(b)` exactly
 * when a JavaScript regular expression with the `i` and `u` flags would take
 * `a` and `b` for the same text (Unicode simple case folding), code point by
 * code point.
 *
 * `String.prototype.toLowerCase` gets that right for almost every character
 * and is fast, so it does the work; it is wrong in three ways, each handled
 * here:
 * - characters whose simple case folding is not their lower case (`ſ` folds
 *   to `s`, `µ` to `μ`, `ς` to `σ`, Greek symbol forms, old Cyrillic forms,
 *   two Greek letters and a ligature with a canonically equivalent twin);
 * - `İ` lower-cases to two code points, but has no simple folding;
 * - `Σ` lower-cases to `ς` or `σ` depending on its neighbours (final sigma).
 *
 * A string holding none of them is folded by `toLowerCase` in one native
 * call; any other string is folded code point by code point. The exception
 * table was derived by comparing every cased code point with every other
 * under a `iu` regular expression (Unicode 17); `test/evaluation/case-fold.test.ts`
 * repeats that comparison on the running Node, so a later Unicode version
 * that adds an exception fails there rather than silently here.
 *
 * Every code point folds to exactly one code point of the same UTF-16
 * length, so positions in a folded string are positions in the original.
 */
const FOLD_EXCEPTIONS: ReadonlyMap<number, number> = new Map([
  [0x00b5, 0x03bc], // µ → μ
  [0x0130, 0x0130], // İ: no simple folding (toLowerCase gives two code points)
  [0x017f, 0x0073], // ſ → s
  [0x0345, 0x03b9], // combining ypogegrammeni → ι
  [0x03a3, 0x03c3], // Σ → σ (never ς: toLowerCase's final-sigma rule depends on context)
  [0x03c2, 0x03c3], // ς → σ
  [0x03d0, 0x03b2], // ϐ → β
  [0x03d1, 0x03b8], // ϑ → θ
  [0x03d5, 0x03c6], // ϕ → φ
  [0x03d6, 0x03c0], // ϖ → π
  [0x03f0, 0x03ba], // ϰ → κ
  [0x03f1, 0x03c1], // ϱ → ρ
  [0x03f5, 0x03b5], // ϵ → ε
  [0x1c80, 0x0432], // ᲀ → в
  [0x1c81, 0x0434], // ᲁ → д
  [0x1c82, 0x043e], // ᲂ → о
  [0x1c83, 0x0441], // ᲃ → с
  [0x1c84, 0x0442], // ᲄ → т
  [0x1c85, 0x0442], // ᲅ → т
  [0x1c86, 0x044a], // ᲆ → ъ
  [0x1c87, 0x0463], // ᲇ → ѣ
  [0x1c88, 0xa64b], // ᲈ → ꙋ
  [0x1e9b, 0x1e61], // ẛ → ṡ
  [0x1fbe, 0x03b9], // ι (prosgegrammeni) → ι
  [0x1fd3, 0x0390], // ΐ (oxia) → ΐ (tonos)
  [0x1fe3, 0x03b0], // ΰ (oxia) → ΰ (tonos)
  [0xfb06, 0xfb05], // ﬆ → ﬅ
]);

const NEEDS_CODE_POINT_FOLD = new RegExp(
  `[${[...FOLD_EXCEPTIONS.keys()].map((cp) => `\\u{${cp.toString(16)}}`).join('')}]`,
  'u',
);

/** The simple case folding of one code point, as a string. */
export function foldCodePoint(character: string): string {
  const exception = FOLD_EXCEPTIONS.get(character.codePointAt(0) ?? -1);
  return exception === undefined ? character.toLowerCase() : String.fromCodePoint(exception);
}

export function foldCase(text: string): string {
  if (!NEEDS_CODE_POINT_FOLD.test(text)) return text.toLowerCase();
  let folded = '';
  for (const character of text) folded += foldCodePoint(character);
  return folded;
}

/** `[A-Za-z0-9_]`, the characters that are not word boundaries, by UTF-16 unit. */
export function isAsciiWordUnit(unit: number): boolean {
  return (
    (unit >= 0x61 && unit <= 0x7a) || (unit >= 0x41 && unit <= 0x5a) || (unit >= 0x30 && unit <= 0x39) || unit === 0x5f
  );
}
