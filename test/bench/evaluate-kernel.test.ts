import { describe, expect, it } from 'vitest';
import { kernelMarkdown, runEvaluateKernel, SYNAPSE_US_PER_PAIR } from '../../bench/evaluate-kernel.js';

describe('evaluate kernel benchmark', () => {
  const [mentions] = runEvaluateKernel({ only: /^mentions$/, sampleMs: 0, minSamples: 3, warmupRuns: 1, warmupMs: 0 });

  it('times the rows asked for, with at least the minimum of samples', () => {
    expect(mentions?.row).toBe('mentions');
    expect(mentions?.pairs).toBe(6000);
    expect(mentions?.samplesMs).toHaveLength(3);
  });

  it('reports the median row time per pair in µs, and a fifth of Synapse as the target', () => {
    if (mentions === undefined) throw new Error('no mentions row');
    const sorted = [...mentions.samplesMs].sort((a, b) => a - b);
    expect(mentions.usPerPairMedian).toBeCloseTo(((sorted[1] ?? 0) * 1000) / 6000, 9);
    expect(mentions.usPerPairMin).toBeCloseTo(((sorted[0] ?? 0) * 1000) / 6000, 9);
    expect(mentions.targetUsPerPair).toBeCloseTo((SYNAPSE_US_PER_PAIR['mentions'] ?? 0) / 5, 9);
  });

  it('prints one table line per row', () => {
    if (mentions === undefined) throw new Error('no mentions row');
    const table = kernelMarkdown([
      { ...mentions, usPerPairMedian: 0.5 },
      { ...mentions, row: 'slow', usPerPairMedian: 2 },
    ]);
    expect(table).toMatch(/^\| `mentions` \| 6,000 \| 3 \| 0\.500 \| [\d.]+ \| 5\.70 \| 1\.14 \| 11× \| yes \|$/m);
    expect(table).toMatch(/^\| `slow` \| .* \| \*\*no\*\* \|$/m);
  });
});
