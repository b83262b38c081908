import { describe, expect, it } from 'vitest';
import { HostLabels } from '../../src/delivery/host-labels.js';

describe('host labels of the delivery metrics', () => {
  it('gives the first hosts their own label and every later one "other"', () => {
    const labels = new HostLabels(2);
    expect(
      [
        'https://a.example/_matrix/push/v1/notify',
        'https://b.example:8443/_matrix/push/v1/notify',
        'https://c.example/_matrix/push/v1/notify',
        'https://a.example/other/path',
        'not a url',
      ].map((url) => labels.labelOf(url)),
    ).toEqual(['a.example', 'b.example:8443', 'other', 'a.example', 'invalid']);
  });
});
