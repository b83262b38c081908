import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { JsonLinesReport } from '../../src/import-io/report-writer.js';

describe('JsonLinesReport', () => {
  it('writes one JSON line per user, replacing an older report', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'report-'));
    const path = join(dir, 'r.jsonl');
    try {
      for (const users of [['@old:x'], ['@a:x', '@b:x']]) {
        const report = await JsonLinesReport.open(path);
        for (const user of users)
          await report.write({ user, status: 'imported', rules: 1, pushers: 0, skipped: [], notes: [] });
        await report.close();
      }
      const lines = readFileSync(path, 'utf8').split('\n');
      expect(lines).toEqual([
        '{"user":"@a:x","status":"imported","rules":1,"pushers":0,"skipped":[],"notes":[]}',
        '{"user":"@b:x","status":"imported","rules":1,"pushers":0,"skipped":[],"notes":[]}',
        '',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a file it cannot create', async () => {
    await expect(JsonLinesReport.open('/nonexistent-dir/r.jsonl')).rejects.toThrow(/ENOENT/);
  });
});
