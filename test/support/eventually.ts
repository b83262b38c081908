import { setTimeout as sleep } from 'node:timers/promises';

/** Polls until `check` stops throwing, or fails with its last error after `timeoutMs`. */
export async function eventually(check: () => void | Promise<void>, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try {
      await check();
      return;
    } catch (error) {
      if (Date.now() > end) throw error;
      await sleep(25);
    }
  }
}
