import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { anchorsOf, proseLines, slug } from '../support/markdown-anchors.js';

/**
 * Every relative link in the README, docs/ and bench/README.md leads to a
 * file that exists, and every `#anchor` into a markdown file to one of its
 * headings. External (http, https, mailto) links are not checked.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

function markdownUnder(folder: string): string[] {
  return readdirSync(join(ROOT, folder), { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) return markdownUnder(path);
    return entry.name.endsWith('.md') ? [path] : [];
  });
}

const PAGES = ['README.md', ...markdownUnder('docs'), 'bench/README.md'];

interface Link {
  readonly page: string;
  readonly number: number;
  readonly target: string;
}

/** Inline links and reference definitions outside code, with their line numbers. */
function linksOf(page: string): Link[] {
  const links: Link[] = [];
  for (const { line, number } of proseLines(readFileSync(join(ROOT, page), 'utf8'))) {
    const prose = line.replace(/(`+)[^`]*?\1/g, ''); // code spans are not links
    for (const match of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g))
      links.push({ page, number, target: match[1] ?? '' });
    const definition = /^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$/.exec(prose)?.[1];
    if (definition !== undefined) links.push({ page, number, target: definition });
  }
  return links;
}

/** Why a link is dead, or undefined when it resolves. */
function problemOf(link: Link): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(link.target)) return undefined; // http:, https:, mailto:
  const hash = link.target.indexOf('#');
  const path = decodeURIComponent(hash < 0 ? link.target : link.target.slice(0, hash));
  const anchor = hash < 0 ? undefined : decodeURIComponent(link.target.slice(hash + 1));
  const file = path === '' ? join(ROOT, link.page) : join(ROOT, dirname(link.page), path);
  if (!existsSync(file)) return `no file ${relative(ROOT, file)}`;
  if (anchor === undefined || !file.endsWith('.md') || statSync(file).isDirectory()) return undefined;
  return anchorsOf(readFileSync(file, 'utf8')).has(anchor)
    ? undefined
    : `no heading #${anchor} in ${relative(ROOT, file)}`;
}

describe('links in the documentation', () => {
  it('finds the pages', () => {
    expect(PAGES).toEqual(
      expect.arrayContaining(['README.md', 'docs/rpc-contract.md', 'docs/push-rules.md', 'bench/README.md']),
    );
  });

  it.each(markdownUnder('docs'))('%s is linked from the README (its table of the docs)', (page) => {
    const targets = linksOf('README.md').map((link) => link.target.split('#')[0]);
    expect(targets).toContain(page);
  });

  it.each(PAGES)('%s: every relative link and anchor resolves', (page) => {
    const dead = linksOf(page).flatMap((link) => {
      const problem = problemOf(link);
      return problem === undefined ? [] : [`${page}:${link.number}: (${link.target}) ${problem}`];
    });
    expect(dead).toEqual([]);
  });
});

describe('slug', () => {
  it('follows GitHub: lowercase, punctuation dropped, spaces as hyphens', () => {
    expect(slug('Who is notified of an event: `evaluate`')).toBe('who-is-notified-of-an-event-evaluate');
    expect(slug('The evaluate part (issue 14)')).toBe('the-evaluate-part-issue-14');
    expect(slug('Pushers follow devices and accounts: wiring your homeserver')).toBe(
      'pushers-follow-devices-and-accounts-wiring-your-homeserver',
    );
    expect(slug('What a replica-set election looks like to a caller')).toBe(
      'what-a-replica-set-election-looks-like-to-a-caller',
    );
    expect(slug('`account_data`: one document per user')).toBe('account_data-one-document-per-user');
    expect(slug('Deleting, actions, enabled')).toBe('deleting-actions-enabled');
  });
});
