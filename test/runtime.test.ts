import { describe, expect, it } from 'vitest';
import packageJson from '../package.json' with { type: 'json' };

describe('the runtime the tests run on', () => {
  it('is Node 24 or later, the version production runs (npm puts the pinned `node` devDependency first on PATH)', () => {
    expect(Number(process.versions.node.split('.')[0])).toBeGreaterThanOrEqual(24);
  });

  it('is the exact version the project pins', () => {
    expect(process.versions.node).toBe(packageJson.devDependencies.node);
  });
});
