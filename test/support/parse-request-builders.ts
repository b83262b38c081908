import { parseRequest } from '../../src/consumer/parse-request.js';
import { DEFAULT_LIMITS } from './default-config.js';

// Requests as the consumer receives them (bytes), parsed under the default
// limits: for test/consumer/parse-request*.test.ts.

export const LIMIT = DEFAULT_LIMITS;
export const encode = (value: unknown) =>
  new TextEncoder().encode(typeof value === 'string' ? value : JSON.stringify(value));
export const parse = (value: unknown) => parseRequest(encode(value), LIMIT);
