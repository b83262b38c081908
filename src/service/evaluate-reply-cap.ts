import { LIMIT_MESSAGES, matrixError, type MatrixErrorBody } from '../errors/error-catalogue.js';
import type { BatchResult } from '../contract/batch-reply.js';

/** What the envelope adds around a body's JSON: `{"ok":true,"body":` and `}`. */
const ENVELOPE_BYTES = '{"ok":true,"body":}'.length;

/**
 * Whether a success whose body is `json` stays within `maxBytes` once
 * encoded. A UTF-16 unit is at most 3 bytes of UTF-8, so a short text needs
 * no count; a long one is counted (once, far cheaper than building it).
 */
export function fitsReply(json: string, maxBytes: number): boolean {
  if (json.length * 3 + ENVELOPE_BYTES <= maxBytes) return true;
  return Buffer.byteLength(json, 'utf8') + ENVELOPE_BYTES <= maxBytes;
}

/** The answer for a reply past the cap: TooLarge, naming the cap and how to stay under it. */
export function replyTooLarge(maxBytes: number): MatrixErrorBody {
  return matrixError('TooLarge', LIMIT_MESSAGES.replyTooLarge(maxBytes)).toBody();
}

/**
 * The batch form's results with each one whose own reply would be past the
 * cap replaced by TooLarge, as the single form answers it: such an event
 * fails alone. Whether the results together fit is the caller's to check.
 */
export function capEachResult(results: readonly BatchResult[], maxBytes: number): BatchResult[] {
  return results.map((result) =>
    result.ok && !fitsReply(result.json, maxBytes) ? { ok: false, error: replyTooLarge(maxBytes) } : result,
  );
}
