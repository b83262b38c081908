import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { expect } from 'vitest';

// Requests to a push gateway double as a client sends them, and how they
// ended: for test/delivery/push-gateway-double*.test.ts.

/** A valid notify body for devices with these pushkeys. */
export function notifyBody(pushkeys: readonly string[]): unknown {
  return {
    notification: {
      event_id: '$event',
      room_id: '!room:hs',
      type: 'm.room.message',
      prio: 'high',
      counts: { unread: 2, missed_calls: 0 },
      devices: pushkeys.map((pushkey) => ({
        app_id: 'org.example.app',
        pushkey,
        pushkey_ts: 1_700_000_000,
        data: {},
        tweaks: { sound: 'default' },
      })),
    },
  };
}

export async function notify(
  url: string,
  body: unknown = notifyBody(['key-1']),
  init: RequestInit = {},
): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    ...init,
  });
}

/** How one request over node:http(s), without keep-alive, ended: its answer or the error's code. */
type RawOutcome = { readonly status: number; readonly body: string } | { readonly errorCode: string };

export async function rawNotify(url: string, options: { readonly ca?: string } = {}): Promise<RawOutcome> {
  const send = url.startsWith('https:') ? httpsRequest : httpRequest;
  return new Promise((resolve) => {
    const request = send(url, { method: 'POST', agent: false, ...options }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString() });
      });
      response.on('error', (error: NodeJS.ErrnoException) => {
        resolve({ errorCode: error.code ?? error.message });
      });
    });
    request.on('error', (error: NodeJS.ErrnoException) => {
      resolve({ errorCode: error.code ?? error.message });
    });
    request.setHeader('Content-Type', 'application/json');
    request.end(JSON.stringify(notifyBody(['key-1'])));
  });
}

/** The `code` of a failed fetch's cause (undici puts the socket error there). */
export async function fetchErrorCode(attempt: Promise<Response>): Promise<string> {
  const error = await attempt.then(
    () => undefined,
    (failure: unknown) => failure,
  );
  expect(error).toBeInstanceOf(Error);
  const cause = (error as Error).cause as { code?: string } | undefined;
  return cause?.code ?? (error as Error).name;
}
