import { createLogger, type Logger } from '../logging/logger.js';
import type { DeliveryThreadData, FromDeliveryThread } from './thread-messages.js';

/**
 * The delivery thread's logger: the worker's setup (its level and name),
 * its lines marked `thread: "delivery"` and posted to the main thread,
 * which writes them where its own go (`relayLine`).
 */
export function threadLogger(
  data: Pick<DeliveryThreadData, 'logLevel' | 'logName'>,
  post: (message: FromDeliveryThread) => void,
): Logger {
  return createLogger(data.logLevel, data.logName, {
    write: (line: string) => {
      post({ type: 'log', line });
    },
  }).child({ thread: 'delivery' });
}
