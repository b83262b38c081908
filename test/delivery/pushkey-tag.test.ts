import { describe, expect, it } from 'vitest';
import { pushkeyTag } from '../../src/delivery/pushkey-tag.js';

describe('pushkeyTag', () => {
  it('is the first 8 hex characters of the SHA-256 of the pushkey (UTF-8)', () => {
    // FIPS 180-2's test vector: SHA-256("abc") = ba7816bf 8f01cfea ...
    expect(pushkeyTag('abc')).toBe('ba7816bf');
    // SHA-256("") = e3b0c442 98fc1c14 ...
    expect(pushkeyTag('')).toBe('e3b0c442');
  });

  it('is stable for one pushkey and differs between pushkeys', () => {
    const token = 'fcm-token:APA91bH-some-long-registration-token';
    expect(pushkeyTag(token)).toBe(pushkeyTag(token));
    expect(pushkeyTag(token)).not.toBe(pushkeyTag(`${token}x`));
  });

  it('never contains the pushkey, even a short hex one', () => {
    for (const pushkey of ['deadbeef', 'ba7816bf', 'a'.repeat(64)]) {
      const tag = pushkeyTag(pushkey);
      expect(tag).toMatch(/^[0-9a-f]{8}$/);
      expect(tag).not.toBe(pushkey.slice(0, 8));
    }
  });
});
