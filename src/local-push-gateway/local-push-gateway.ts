import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pushkeyTag } from '../delivery/pushkey-tag.js';
import { deviceLine, isRejected } from './device-line.js';
import type { LocalGatewaySettings } from './local-gateway-settings.js';
import { checkNotifyBody } from './notify-body.js';

/** The push gateway API's one endpoint. */
export const NOTIFY_PATH = '/_matrix/push/v1/notify';
/** Notifications `/recent` lists, oldest dropped first. */
const RECENT_KEPT = 100;

/** One notify request as `GET /recent` lists it: no content, no pushkeys. */
export interface RecentNotification {
  readonly received_at: string;
  readonly event_id?: string;
  readonly room_id?: string;
  readonly devices: readonly { readonly app_id: string; readonly pushkey_tag: string; readonly rejected: boolean }[];
}

/**
 * A push gateway for development (`npm run push-gateway:local`): it
 * answers `POST /_matrix/push/v1/notify` as the Matrix push gateway API
 * says, pushes nothing anywhere, and prints one line per device instead
 * (`deviceLine`). Besides it, two endpoints of its own, both read-only:
 * `GET /health` and `GET /recent` (the last 100 notify requests, newest
 * last, so that a script can wait for its event).
 *
 * The spec's answers for what is not a notify request: 404 `M_UNRECOGNIZED`
 * for an unknown path, 405 `M_UNRECOGNIZED` for another method on a known
 * one. A body over `maxBodyBytes` is answered 413 `M_TOO_LARGE`.
 */
export class LocalPushGateway {
  readonly #settings: LocalGatewaySettings;
  readonly #print: (line: string) => void;
  readonly #now: () => Date;
  readonly #server: Server;
  readonly #recent: RecentNotification[] = [];

  constructor(settings: LocalGatewaySettings, print: (line: string) => void, now: () => Date = () => new Date()) {
    this.#settings = settings;
    this.#print = print;
    this.#now = now;
    this.#server = createServer((request, response) => {
      this.#route(request, response);
    });
  }

  /** Listens on the settings' host and port; resolves with the port (the one chosen, for port 0). */
  async listen(): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(this.#settings.port, this.#settings.host, () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
    return (this.#server.address() as AddressInfo).port;
  }

  /** Stops listening and closes every connection. */
  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => {
      this.#server.close(() => {
        resolve();
      });
    });
    this.#server.closeAllConnections();
    await closed;
  }

  #route(request: IncomingMessage, response: ServerResponse): void {
    const path = new URL(request.url ?? '/', 'http://local').pathname;
    const method = request.method ?? '';
    const readOnly = method === 'GET' || method === 'HEAD';
    switch (path) {
      case NOTIFY_PATH:
        if (method === 'POST') this.#receive(request, response);
        else unsupportedMethod(response, 'POST');
        return;
      case '/health':
        if (readOnly) sendJson(response, 200, { status: 'ok' });
        else unsupportedMethod(response, 'GET, HEAD');
        return;
      case '/recent':
        if (readOnly) sendJson(response, 200, { notifications: this.#recent });
        else unsupportedMethod(response, 'GET, HEAD');
        return;
      default:
        sendJson(response, 404, { errcode: 'M_UNRECOGNIZED', error: 'Unrecognized request' });
    }
  }

  #receive(request: IncomingMessage, response: ServerResponse): void {
    const limit = this.#settings.maxBodyBytes;
    const tooLarge = (): void => {
      // Answered before the body is read whole: the connection goes with it.
      response.once('finish', () => request.destroy());
      sendJson(
        response,
        413,
        { errcode: 'M_TOO_LARGE', error: `The body is over ${limit} bytes` },
        { Connection: 'close' },
      );
    };
    if (Number(request.headers['content-length'] ?? 0) > limit) {
      tooLarge();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size <= limit) {
        chunks.push(chunk);
        return;
      }
      request.off('data', onData);
      request.off('end', onEnd);
      tooLarge();
    };
    const onEnd = (): void => {
      this.#notify(Buffer.concat(chunks).toString('utf8'), response);
    };
    request.on('data', onData);
    request.on('end', onEnd);
  }

  #notify(text: string, response: ServerResponse): void {
    const check = checkNotifyBody(text);
    if (!check.ok) {
      sendJson(response, 400, { errcode: check.errcode, error: check.error });
      return;
    }
    const { notification } = check;
    const at = this.#now();
    const rejected: string[] = [];
    const devices = notification.devices.map((device) => {
      const refused = isRejected(device.pushkey, this.#settings.reject);
      if (refused && !rejected.includes(device.pushkey)) rejected.push(device.pushkey);
      this.#print(deviceLine(at, notification, device, refused));
      return { app_id: device.app_id, pushkey_tag: pushkeyTag(device.pushkey), rejected: refused };
    });
    this.#recent.push({
      received_at: at.toISOString(),
      ...(notification.event_id === undefined ? {} : { event_id: notification.event_id }),
      ...(notification.room_id === undefined ? {} : { room_id: notification.room_id }),
      devices,
    });
    if (this.#recent.length > RECENT_KEPT) this.#recent.shift();
    sendJson(response, 200, { rejected });
  }
}

function unsupportedMethod(response: ServerResponse, allow: string): void {
  sendJson(response, 405, { errcode: 'M_UNRECOGNIZED', error: 'Unrecognized request' }, { Allow: allow });
}

function sendJson(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Readonly<Record<string, string>> = {},
): void {
  response.writeHead(status, { 'Content-Type': 'application/json', ...headers }).end(JSON.stringify(body));
}
