const QUOTE = 0x22; // "
const BACKSLASH = 0x5c; // \
const OPEN_BRACE = 0x7b; // {
const CLOSE_BRACE = 0x7d; // }
const OPEN_BRACKET = 0x5b; // [
const CLOSE_BRACKET = 0x5d; // ]

/**
 * Whether JSON text nests arrays and objects more than `max` levels deep
 * (`{}` and `[]` are one level, `{"a": []}` two). One pass over the text,
 * no recursion and no parse, so that it can run before anything that walks
 * the value recursively (`JSON.stringify`, validators, our own walks), all
 * of which a few thousand levels — a few KB of `[` — push past the stack.
 *
 * Brackets inside strings do not count; a backslash in a string escapes the
 * next character, so `"\""` and `"\\"` end where JSON says they do. Text
 * that is not JSON gets an answer too; the parse that follows refuses it.
 */
export function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i += 1) {
    const unit = text.charCodeAt(i);
    if (unit === QUOTE) {
      i = closingQuote(text, i);
    } else if (unit === OPEN_BRACE || unit === OPEN_BRACKET) {
      depth += 1;
      if (depth > max) return true;
    } else if ((unit === CLOSE_BRACE || unit === CLOSE_BRACKET) && depth > 0) {
      // Never below zero: stray closers (invalid JSON anyway) cannot buy
      // room for deeper nesting later in the text.
      depth -= 1;
    }
  }
  return false;
}

/**
 * Where the string opened at `open` ends (`text.length` if it never does).
 * Most of a large body is inside strings (an evaluate's user IDs), so this
 * jumps from quote to quote (`indexOf`) instead of looking at every unit: a
 * quote after an odd run of backslashes is escaped, after an even one not.
 */
export function closingQuote(text: string, open: number): number {
  for (let from = open + 1; ;) {
    const quote = text.indexOf('"', from);
    if (quote < 0) return text.length;
    let backslashes = 0;
    while (text.charCodeAt(quote - 1 - backslashes) === BACKSLASH) backslashes += 1;
    if (backslashes % 2 === 0) return quote;
    from = quote + 1;
  }
}
