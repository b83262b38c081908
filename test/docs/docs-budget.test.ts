import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

/**
 * docs/ is read by operators and homeserver developers, who should not have
 * to wade through it: its pages together stay within a budget of lines
 * (issue 40), counted as `wc -l docs/*.md` counts them. A page that grows
 * makes room by merging, moving or cutting elsewhere.
 */
const BUDGET = 2500;
const DOCS = new URL('../../docs/', import.meta.url);

/** Lines of each `docs/*.md`, as `wc -l` counts them (newline characters). */
function linesByPage(): Record<string, number> {
  const pages = readdirSync(DOCS).filter((name) => name.endsWith('.md'));
  return Object.fromEntries(
    pages.map((name) => [name, (readFileSync(new URL(name, DOCS), 'utf8').match(/\n/g) ?? []).length]),
  );
}

describe('docs/', () => {
  it(`stays within ${BUDGET} lines over all its pages`, () => {
    const pages = linesByPage();
    const total = Object.values(pages).reduce((sum, lines) => sum + lines, 0);
    expect(Object.keys(pages).length, 'the pages are found').toBeGreaterThan(5);
    // On failure: the pages by size, to see where to cut.
    const bySize = Object.entries(pages).sort(([, a], [, b]) => b - a);
    expect(total, `docs/*.md: ${total} lines (${bySize.map(([p, n]) => `${p} ${n}`).join(', ')})`).toBeLessThanOrEqual(
      BUDGET,
    );
  });
});
