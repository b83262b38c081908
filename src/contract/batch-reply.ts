import type { MatrixErrorBody } from '../errors/error-catalogue.js';

/** One event's answer in a batch: its reply body's JSON text, or its own error. */
export type BatchResult =
  { readonly ok: true; readonly json: string } | { readonly ok: false; readonly error: MatrixErrorBody };

/**
 * The success body of the batch form of `evaluate`, as JSON text:
 * `{"results": [...]}`, each result in the reply envelope of the single
 * form (`{"ok": true, "body": …}` or `{"ok": false, "error": …}`), in the
 * order of the request's `events`. The bodies are already text
 * (evaluation-reply-json.ts): they are joined, never parsed or built again.
 */
export function batchResultsJson(results: readonly BatchResult[]): string {
  const parts = results.map((result) =>
    result.ok ? `{"ok":true,"body":${result.json}}` : `{"ok":false,"error":${JSON.stringify(result.error)}}`,
  );
  return `{"results":[${parts.join(',')}]}`;
}
