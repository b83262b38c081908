const log = (line: string) => {
  console.error(line);
};

/**
 * An unmeasured request that readies the worker (its thread, its cache),
 * sent again after `Unavailable`: on a shared machine the store may miss a
 * deadline once, and that is no reason to stop the whole run.
 */
export async function priming(call: () => Promise<unknown>): Promise<void> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      await call();
      return;
    } catch (error) {
      if (attempt >= 5 || (error as { kind?: unknown }).kind !== 'Unavailable') throw error;
      log(`  priming request answered Unavailable (attempt ${attempt}); sending it again`);
    }
  }
}
