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
  let inString = false;
  for (let i = 0; i < text.length; i += 1) {
    const unit = text.charCodeAt(i);
    if (inString) {
      if (unit === BACKSLASH) i += 1;
      else if (unit === QUOTE) inString = false;
    } else if (unit === QUOTE) {
      inString = true;
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
