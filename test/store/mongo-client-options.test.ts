import { readFileSync } from 'node:fs';
import { MongoClient } from 'mongodb';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load-config.js';
import { mongoClientOptions } from '../../src/store/mongo-client-options.js';

const gateway = JSON.parse(readFileSync(new URL('../../config/gateway.json', import.meta.url), 'utf8')) as {
  http: { requestTimeoutMs: number };
};
/** `RpcClient`'s deadline when a call gives none. */
const CLIENT_DEFAULT_TIMEOUT_MS = 10_000;

describe('the MongoDB client options', () => {
  it('carry every driver timeout of mongodb.*', () => {
    const config = loadConfig({
      MONGODB_SERVER_SELECTION_TIMEOUT_MS: '1100',
      MONGODB_CONNECT_TIMEOUT_MS: '1200',
      MONGODB_SOCKET_TIMEOUT_MS: '1300',
      MONGODB_WAIT_QUEUE_TIMEOUT_MS: '1400',
    });
    expect(mongoClientOptions(config.mongodb)).toEqual({
      serverSelectionTimeoutMS: 1100,
      connectTimeoutMS: 1200,
      socketTimeoutMS: 1300,
      waitQueueTimeoutMS: 1400,
    });
  });

  it('are what the driver then runs with, over the same options in the URL', () => {
    const { mongodb } = loadConfig({});
    const client = new MongoClient(
      'mongodb://127.0.0.1:1/?socketTimeoutMS=99000&connectTimeoutMS=99000',
      mongoClientOptions(mongodb),
    );
    expect(client.options).toMatchObject({
      serverSelectionTimeoutMS: mongodb.serverSelectionTimeoutMs,
      connectTimeoutMS: mongodb.connectTimeoutMs,
      socketTimeoutMS: mongodb.socketTimeoutMs,
      waitQueueTimeoutMS: mongodb.waitQueueTimeoutMs,
    });
  });

  it('default below the default request deadline of the client and the gateway, so a stalled store answers Unavailable in time', () => {
    const { mongodb } = loadConfig({});
    const deadline = Math.min(CLIENT_DEFAULT_TIMEOUT_MS, gateway.http.requestTimeoutMs);
    for (const ms of [
      mongodb.serverSelectionTimeoutMs,
      mongodb.connectTimeoutMs,
      mongodb.socketTimeoutMs,
      mongodb.waitQueueTimeoutMs,
      mongodb.operationTimeoutMs,
    ]) {
      expect(ms).toBeLessThan(deadline);
    }
    // The worker's own bound answers first; the socket timeout then reclaims a connection stuck past it.
    expect(mongodb.operationTimeoutMs).toBeLessThan(mongodb.socketTimeoutMs);
  });
});
