import { describe, expect, it } from 'vitest';
import { parseImportSource } from '../../src/import/import-source.js';

describe('parseImportSource', () => {
  it.each([
    [
      'sqlite:PATH',
      'sqlite:/data/homeserver.db',
      { kind: 'sqlite', path: '/data/homeserver.db', display: 'sqlite:/data/homeserver.db' },
    ],
    ['sqlite:relative', 'sqlite:homeserver.db', { kind: 'sqlite', path: 'homeserver.db' }],
    ['sqlite:///absolute', 'sqlite:///data/h.db', { kind: 'sqlite', path: '/data/h.db' }],
    [
      'postgresql:// with a password (hidden from display)',
      'postgresql://synapse:s3cret@db:5432/synapse',
      {
        kind: 'postgres',
        url: 'postgresql://synapse:s3cret@db:5432/synapse',
        display: 'postgresql://synapse:***@db:5432/synapse',
      },
    ],
    [
      'postgres:// with a password parameter (hidden)',
      'postgres://db/synapse?password=s3cret&sslmode=require',
      { kind: 'postgres', display: 'postgres://db/synapse?password=***&sslmode=require' },
    ],
    ['postgresql:// without a password', 'postgresql://db/synapse', { display: 'postgresql://db/synapse' }],
  ] as const)('reads %s', (_name, from, expected) => {
    const parsed = parseImportSource(from);
    expect(parsed.ok ? parsed.source : parsed).toMatchObject(expected);
  });

  it.each([
    ['an empty sqlite path', 'sqlite:', 'needs the path'],
    ['a PostgreSQL URL without a database', 'postgresql://u:s3cret@db', 'names no database'],
    ['a PostgreSQL URL that does not parse', 'postgresql://u:s3cret@db:notaport/x', 'does not parse'],
    ['another scheme', 'mysql://u:s3cret@db/x', '--from takes'],
  ])('refuses %s without repeating the value', (_name, from, message) => {
    const parsed = parseImportSource(from);
    expect(parsed.ok).toBe(false);
    const text = parsed.ok ? '' : parsed.message;
    expect(text).toContain(message);
    expect(text).not.toContain('s3cret');
  });
});
