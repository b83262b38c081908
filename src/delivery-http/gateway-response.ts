import type { Dispatcher } from 'undici';
import type { GatewayExchange } from '../delivery/response-outcome.js';
import { refusal } from './checked-connector.js';

/** undici's errors that are not the network's or the gateway's doing: a closed client, a bad argument. */
const NOT_A_NETWORK_FAILURE = new Set([
  'UND_ERR_INVALID_ARG',
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
  'UND_ERR_NOT_SUPPORTED',
  'UND_ERR_INVALID_RETURN_VALUE',
]);

/** A request that got no response, as an exchange. */
export function failedExchange(error: unknown): GatewayExchange {
  const refused = refusal(error);
  if (refused !== undefined) return { kind: 'address-refused', rule: refused.rule, reason: refused.reason };
  const code = errorCode(error);
  if (code === 'UND_ERR_CONNECT_TIMEOUT') return { kind: 'timeout', phase: 'connect' };
  if (code === 'UND_ERR_HEADERS_TIMEOUT') return { kind: 'timeout', phase: 'headers' };
  if (code !== undefined && NOT_A_NETWORK_FAILURE.has(code)) throw error;
  return code === undefined ? { kind: 'connection-error' } : { kind: 'connection-error', reason: code };
}

function errorCode(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined;
  const { code } = error as { code?: unknown };
  return typeof code === 'string' ? code : error.name;
}

/**
 * At most `maxBytes` of a response body, within `timeoutMs`. Over the cap,
 * too slow, or broken off: the body is dropped whole (and the connection
 * with it, since the rest was not read), never a prefix, which could parse
 * as a different `rejected` list than the whole body says.
 */
export async function readBody(
  body: Dispatcher.ResponseData['body'],
  maxBytes: number,
  timeoutMs: number,
): Promise<{ body?: string; bodyDropped?: 'too-large' | 'timeout' | 'connection-error' }> {
  // Through the stream's events, not `for await`: an async iterator costs a generator and a promise per chunk, per request.
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let finished = false;
    const finish = (result: Awaited<ReturnType<typeof readBody>>, destroyWith?: Error | null) => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      body.off('data', onData);
      body.off('end', onEnd);
      body.off('close', onClose);
      // Whatever the stream reports from now on is of no interest, and must not be an unhandled error.
      body.off('error', onError);
      body.on('error', ignore);
      // The rest is never read: the connection goes with it.
      if (destroyWith !== undefined) body.destroy(destroyWith ?? undefined);
      resolve(result);
    };
    const timer = setTimeout(() => {
      finish({ bodyDropped: 'timeout' }, new Error('the response body took too long'));
    }, timeoutMs);
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) finish({ bodyDropped: 'too-large' }, null);
      else chunks.push(chunk);
    };
    const onEnd = () => {
      const text = Buffer.concat(chunks).toString('utf8');
      finish(text === '' ? {} : { body: text });
    };
    const onError = (error: unknown) => {
      finish({ bodyDropped: errorCode(error) === 'UND_ERR_BODY_TIMEOUT' ? 'timeout' : 'connection-error' });
    };
    // Closed before its end, without an error: broken off.
    const onClose = () => {
      finish({ bodyDropped: 'connection-error' });
    };
    body.on('data', onData);
    body.on('end', onEnd);
    body.on('error', onError);
    body.on('close', onClose);
  });
}

function ignore(): void {
  // See `readBody`.
}

/**
 * Reads a body nobody needs to its end, keeping none of it, so that its
 * connection can carry the next request; one longer than `maxBytes`, or
 * slower than `timeoutMs`, is cut off with its connection instead. A
 * gateway failing with large bodies (a 503 page per request) thus costs a
 * bounded read, never memory.
 */
export async function discardBody(
  body: Dispatcher.ResponseData['body'],
  maxBytes: number,
  timeoutMs: number,
): Promise<Record<string, never>> {
  try {
    await body.dump({ limit: maxBytes, signal: AbortSignal.timeout(timeoutMs) });
  } catch {
    // Too slow, or broken off: the connection goes with it, the status stands.
  }
  return {};
}

export function firstValue(header: string | string[] | undefined): string | undefined {
  return Array.isArray(header) ? header[0] : header;
}
