import { describe, expect, it } from 'vitest';
import { ParsedEntryCache } from '../../src/store/parsed-entry-cache.js';
import { readPushRulesEntry } from '../../src/store/push-rules-entry.js';

/** Looks `text` up for `user` at `version`, counting the parses it took. */
function aCache(maxChars = 1_000) {
  const cache = new ParsedEntryCache(maxChars);
  let parses = 0;
  const read = (user: string, version: number, text: string, revision: string | undefined = 'v1.19') =>
    cache.lookup(user, version, text, revision, () => {
      parses += 1;
      return readPushRulesEntry({ contentJson: text, defaultsRevision: revision });
    });
  return { cache, read, parses: () => parses };
}

const TEXT = '{"global":{"override":[]}}';

describe('ParsedEntryCache', () => {
  it('parses a text once and hands back the same lookup while user, version, revision and text are the same', () => {
    const { read, parses } = aCache();
    const first = read('@a:x', 3, TEXT);
    expect(read('@a:x', 3, TEXT)).toBe(first);
    expect(read('@a:x', 3, TEXT.split('').join(''))).toBe(first);
    expect(parses()).toBe(1);
    expect(first).toEqual({ found: true, event: { content: { global: { override: [] } } }, defaultsRevision: 'v1.19' });
  });

  it.each([
    ['another version', 4, TEXT, 'v1.19'],
    ['another text at the same version (written by hand)', 3, '{"global":{"room":[]}}', 'v1.19'],
    ['another defaults revision', 3, TEXT, 'v1.18'],
  ])('parses again for %s', (_name, version, text, revision) => {
    const { read, parses } = aCache();
    read('@a:x', 3, TEXT);
    expect(read('@a:x', version, text, revision)).toEqual(
      readPushRulesEntry({ contentJson: text, defaultsRevision: revision }),
    );
    expect(parses()).toBe(2);
  });

  it('keeps users apart', () => {
    const { read, parses } = aCache();
    expect(read('@a:x', 1, TEXT)).not.toBe(read('@b:x', 1, TEXT));
    expect(parses()).toBe(2);
  });

  it('evicts the least recently read beyond its characters, and never keeps a text over a sixteenth of them', () => {
    const { cache, read, parses } = aCache(16 * TEXT.length * 2);
    for (let user = 0; user < 40; user += 1) read(`@u${user}:x`, 1, TEXT);
    expect(cache.size).toBe(32);
    read('@u39:x', 1, TEXT);
    expect(parses()).toBe(40);
    read('@u0:x', 1, TEXT);
    expect(parses()).toBe(41);
    const huge = `{"global":{"override":[],"pad":"${'x'.repeat(16 * TEXT.length * 2)}"}}`;
    read('@huge:x', 1, huge);
    read('@huge:x', 1, huge);
    expect(parses()).toBe(43);
  });

  it('keeps nothing when its size is 0', () => {
    const { cache, read, parses } = aCache(0);
    read('@a:x', 1, TEXT);
    read('@a:x', 1, TEXT);
    expect([cache.size, parses()]).toEqual([0, 2]);
  });
});

describe('ParsedEntryCache: what a write loads and stores', () => {
  it('uses an entry but keeps no new one when asked not to, and forgets a user on request', () => {
    const cache = new ParsedEntryCache(1_000);
    let parses = 0;
    const parse = () => {
      parses += 1;
      return readPushRulesEntry({ contentJson: TEXT, defaultsRevision: 'v1.19' });
    };
    const notKept = cache.lookup('@a:x', 1, TEXT, 'v1.19', parse, false);
    expect(cache.size).toBe(0);
    const kept = cache.lookup('@a:x', 1, TEXT, 'v1.19', parse);
    expect(cache.lookup('@a:x', 1, TEXT, 'v1.19', parse, false)).toBe(kept);
    expect(kept).toEqual(notKept);
    expect(parses).toBe(2);
    cache.forget('@a:x');
    expect(cache.size).toBe(0);
    cache.lookup('@a:x', 1, TEXT, 'v1.19', parse);
    expect(parses).toBe(3);
  });
});
