import type { ServerResponse } from 'node:http';

/** How the push gateway double (push-gateway-double.ts) writes its answers. */

export function sendJson(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Readonly<Record<string, string>> = {},
): void {
  // The client may have given up during a delay.
  if (response.destroyed) return;
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  response.writeHead(status, { 'Content-Type': 'application/json', ...headers }).end(text);
}

export function retryAfterHeader(retryAfter: number | Date | string | undefined): Record<string, string> {
  if (retryAfter === undefined) return {};
  if (retryAfter instanceof Date) return { 'Retry-After': retryAfter.toUTCString() };
  return { 'Retry-After': String(retryAfter) };
}
