import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { foldCase, foldCodePoint, isAsciiWordUnit } from '../../src/evaluation/case-fold.js';

const escape = (text: string) => text.replace(/[\\^$.*+?()[\]{}|/-]/g, '\\$&');

function allCodePoints(): string[] {
  const all: string[] = [];
  for (let cp = 0; cp <= 0x10ffff; cp += 1) {
    if (cp < 0xd800 || cp > 0xdfff) all.push(String.fromCodePoint(cp));
  }
  return all;
}

const ALL = allCodePoints();
/** Characters with some case mapping: the only ones a `iu` regex can equate with another. */
const CASED = ALL.filter((c) => c.toLowerCase() !== c || c.toUpperCase() !== c);

describe('foldCase: the equivalence of a `iu` regular expression on the running Node', () => {
  it('equates two cased characters exactly when the regex does (every pair)', () => {
    const wrong: string[] = [];
    for (const c of CASED) {
      const regex = new RegExp(`^${escape(c)}$`, 'iu');
      const folded = foldCase(c);
      for (const d of CASED) {
        if (regex.test(d) !== (foldCase(d) === folded))
          wrong.push(`U+${c.codePointAt(0)?.toString(16)} U+${d.codePointAt(0)?.toString(16)}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('never equates a caseless character with a cased one, and leaves it as it is', () => {
    const anyCased = new RegExp(`[${CASED.map(escape).join('')}]`, 'iu');
    const caseless = ALL.filter((c) => c.toLowerCase() === c && c.toUpperCase() === c);
    expect(caseless.filter((c) => anyCased.test(c) || foldCodePoint(c) !== c)).toEqual([]);
  });

  it('folds every code point to one code point of the same UTF-16 length', () => {
    const wrong = ALL.filter((c) => {
      const folded = foldCodePoint(c);
      return folded.length !== c.length || Array.from(folded).length !== 1;
    });
    expect(wrong).toEqual([]);
  });

  it('folds nothing from outside [A-Za-z0-9_] into it but ſ and the Kelvin sign', () => {
    const intoWord = ALL.filter(
      (c) => !isAsciiWordUnit(c.charCodeAt(0)) && c.length === 1 && isAsciiWordUnit(foldCodePoint(c).charCodeAt(0)),
    );
    expect(intoWord).toEqual(['\u017f', '\u212a']);
  });

  it.each([
    ['É', 'é'],
    ['ΟΔΟΣ', 'οδοσ'],
    ['ΣΑΣ', 'σασ'],
    ['ſtraße', 'straße'],
    ['İstanbul', 'İstanbul'],
    ['µ', 'μ'],
    ['𐐀', '𐐨'],
    ['\u212A', 'k'],
  ])('folds %s to %s', (text, folded) => {
    expect(foldCase(text)).toBe(folded);
  });

  it('folds a string as it folds its code points one by one (toLowerCase shortcut included)', () => {
    const unit = fc.constantFrom(...'aZ_ Σσςſs\u212AkKİiµμÉé\uD83D\uDE00\uD801\uDC00\uDC00xΘϑ'.split(''));
    fc.assert(
      fc.property(fc.array(unit, { maxLength: 12 }), (units) => {
        const text = units.join('');
        expect(foldCase(text)).toBe(Array.from(text, (character) => foldCodePoint(character)).join(''));
      }),
    );
  });
});
