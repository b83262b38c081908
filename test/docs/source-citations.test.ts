import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { anchorsOf } from '../support/markdown-anchors.js';

/**
 * Comments in src/ cite only what a reader of the repository can open: a
 * page under docs/ (a path from the repository's root, and an `#anchor` that
 * is one of that page's headings) or a public page such as the Matrix spec.
 * The project's original specification ("the seed") and the reference notes
 * kept beside it (evaluation.md, delivery.md, synapse-import.md) are not in
 * the repository, so a comment may not send a reader there.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SCRIPT = /\.(?:[cm]?ts|tsx|[cm]?js)$/;

function filesUnder(folder: string): string[] {
  return readdirSync(join(ROOT, folder), { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name);
    return entry.isDirectory() ? filesUnder(path) : [path];
  });
}

interface Comment {
  readonly file: string;
  /** The comment's text, `//` or `/*` included. */
  readonly text: string;
  /** The line of a character of the comment, from its offset in `text`. */
  readonly lineAt: (offset: number) => number;
}

/** Every comment of a script, found by the TypeScript parser: text in strings, templates and regexes is no comment. */
function commentsOf(file: string, source: string): Comment[] {
  const parsed = ts.createSourceFile(file, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const seen = new Set<number>();
  const comments: Comment[] = [];
  const collect = (ranges: readonly ts.CommentRange[] | undefined): void => {
    for (const { pos, end } of ranges ?? []) {
      if (seen.has(pos)) continue;
      seen.add(pos);
      const lineAt = (offset: number): number => parsed.getLineAndCharacterOfPosition(pos + offset).line + 1;
      comments.push({ file, text: source.slice(pos, end), lineAt });
    }
  };
  // Every comment is trivia before or after some token, the end of the file included.
  const visit = (node: ts.Node): void => {
    collect(ts.getLeadingCommentRanges(source, node.getFullStart()));
    collect(ts.getTrailingCommentRanges(source, node.getEnd()));
    if (ts.isJSDoc(node)) return; // its parts are inside the comment just collected
    for (const child of node.getChildren(parsed)) visit(child);
  };
  visit(parsed);
  return comments;
}

/** Mentions of the original specification as a document: "the seed", "seed 4.3", "seed section 3", "the seed's". */
const SEED =
  /\bthe\s+seed\b(?!\s+(?:value|for|of|number)\b)|\bseed's\b|\bseed\s+(?:spec(?:ification)?\b|section\b|§|\d)/gi;
/** The reference notes kept beside the original specification, named bare. */
const OUTSIDE_NOTES = /(?<![\w./-])(?:evaluation|delivery|synapse-import)\.md\b/g;
const BARE_OUTSIDE_NOTE = /^(?:evaluation|delivery|synapse-import)\.md$/;
/** A markdown file named in a comment, with its anchor when it has one. */
const MARKDOWN = /(?<![\w./-])((?:[\w.-]+\/)*[\w.-]+\.md)\b(?:#([\p{L}\p{N}_-]+))?/gu;
const URL_PATTERN = /\b[a-z][a-z0-9+.-]*:\/\/\S+/gi;

/** Why each citation in a comment cannot be followed, as `file:line: problem`. */
function problemsOf(comment: Comment): string[] {
  const where = (offset: number): string => `${comment.file}:${comment.lineAt(offset)}`;
  const problems: string[] = [];
  for (const match of comment.text.matchAll(SEED))
    problems.push(`${where(match.index)}: "${match[0]}" cites the original specification: cite docs/ instead`);
  for (const match of comment.text.matchAll(OUTSIDE_NOTES))
    problems.push(`${where(match.index)}: ${match[0]} is not in the repository: cite docs/ instead`);
  // Addresses are checked by whoever follows them, not here; blank them out, offsets kept.
  const text = comment.text.replace(URL_PATTERN, (url) => ' '.repeat(url.length));
  for (const match of text.matchAll(MARKDOWN)) {
    const [, path = '', anchor] = match;
    if (BARE_OUTSIDE_NOTE.test(path)) continue; // reported above
    const file = join(ROOT, path);
    if (!existsSync(file) || statSync(file).isDirectory()) {
      problems.push(`${where(match.index)}: no file ${path} (write a path from the repository's root)`);
    } else if (anchor !== undefined && !anchorsOf(readFileSync(file, 'utf8')).has(anchor)) {
      problems.push(`${where(match.index)}: no heading #${anchor} in ${path}`);
    }
  }
  return problems;
}

const SOURCES = filesUnder('src').filter((path) => SCRIPT.test(path));
const COMMENTS = SOURCES.flatMap((path) => commentsOf(path, readFileSync(join(ROOT, path), 'utf8')));

describe('citations in the comments of src/', () => {
  it('reads every script under src/ and its comments', () => {
    expect(SOURCES.length).toBeGreaterThan(50);
    expect(SOURCES).toContain(join('src', 'errors', 'error-catalogue.ts'));
    expect(COMMENTS.some((comment) => comment.text.includes('docs/push-rules.md#error-messages'))).toBe(true);
  });

  it('cites only what a reader can open', () => {
    expect(COMMENTS.flatMap(problemsOf)).toEqual([]);
  });
});

describe('the citation check itself', () => {
  const problemsIn = (source: string): string[] =>
    commentsOf('src/example.ts', source).flatMap((comment) => problemsOf(comment).map((p) => p.replace(/^\S+ /, '')));

  it('refuses the original specification and the notes outside the repository', () => {
    for (const text of [
      'Seed 4.4.',
      'Check order (seed 4.3): scope.',
      'The states of seed section 3.',
      "The seed's states.",
      '`r0` (the seed) and `v3`.',
      'Quoted from the seed specification.',
      'See evaluation.md, "Request".',
      'As delivery.md says.',
      'From synapse-import.md.',
    ]) {
      expect(problemsIn(`/** ${text} */\nexport const a = 1;`), text).toHaveLength(1);
      expect(problemsIn(`export const a = 1; // ${text}`), text).toHaveLength(1);
    }
  });

  it('refuses a page or an anchor that does not exist, and a page not named from the root', () => {
    expect(problemsIn('// docs/no-such-page.md')).toEqual([expect.stringContaining('no file docs/no-such-page.md')]);
    expect(problemsIn('// docs/push-rules.md#no-such-heading')).toEqual([
      expect.stringContaining('no heading #no-such-heading in docs/push-rules.md'),
    ]);
    expect(problemsIn('// see push-rules.md')).toEqual([expect.stringContaining('no file push-rules.md')]);
  });

  it('accepts docs/ pages, their headings and public addresses', () => {
    expect(problemsIn('// docs/push-rules.md#the-push-rules-event-and-its-states.')).toEqual([]);
    expect(problemsIn('/** docs/push-rules.md#evaluation, docs/rpc-contract.md and README.md. */ let a;')).toEqual([]);
    expect(problemsIn('// https://spec.matrix.org/v1.19/client-server-api/#push-rules')).toEqual([]);
    expect(problemsIn('// https://github.com/element-hq/synapse/blob/develop/docs/evaluation.md')).toEqual([]);
    expect(problemsIn('// a random seed for fast-check; seeded; seeds the cache')).toEqual([]);
  });

  it('finds every comment, and nothing in strings, templates or regexes', () => {
    const source = [
      "const a = 'the seed'; // one",
      'const b = `seed 4.3 ${a /* two */} // evaluation.md`;',
      'const c = /\\/\\/ seed 4.3/;',
      'function f() {',
      '  return a;',
      '  /* three: before the closing brace */',
      '}',
      '// four, at the end',
    ].join('\n');
    const found = commentsOf('src/example.ts', source).map((comment) => comment.text);
    expect(found).toEqual(['// one', '/* two */', '/* three: before the closing brace */', '// four, at the end']);
    expect(found.flatMap((text) => problemsIn(text))).toEqual([]);
    expect(problemsIn(source)).toEqual([]);
  });
});
