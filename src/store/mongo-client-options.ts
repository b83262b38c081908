import type { MongoClientOptions } from 'mongodb';
import type { Config } from '../config/config-schema.js';

/**
 * The driver's timeouts, from `mongodb.*` (they win over the same options
 * in `mongodb.url`). Each bounds one wait inside an operation: finding a
 * server to send it to, a pooled connection, a new connection's TCP
 * connect and handshake, a silent socket.
 *
 * The driver's client-side operation timeout (`timeoutMS`) is not among
 * them: driver 6.22 accepts it, warns that it is deprecated, and ignores
 * it (no timeout context is ever built from it). The worker bounds each
 * store operation as a whole itself: `mongodb.operationTimeoutMs`, and the
 * request's deadline (`BoundedStore`).
 */
export function mongoClientOptions(settings: Config['mongodb']): MongoClientOptions {
  return {
    serverSelectionTimeoutMS: settings.serverSelectionTimeoutMs,
    connectTimeoutMS: settings.connectTimeoutMs,
    socketTimeoutMS: settings.socketTimeoutMs,
    waitQueueTimeoutMS: settings.waitQueueTimeoutMs,
  };
}
