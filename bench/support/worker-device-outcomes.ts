/** What a bench worker counted of its deliveries, read from its `/metrics`. */

const log = (line: string) => {
  console.error(line);
};

/** Devices a worker counted delivered (`push_worker_delivery_devices_total{outcome="delivered"}`, every host). */
export async function deliveredBy(healthPort: number | undefined): Promise<number> {
  const outcomes = (await deviceOutcomes(healthPort)).workerOutcomes;
  if (outcomes === undefined) throw new Error("the deliver-only worker's metrics could not be read");
  return outcomes['delivered'] ?? 0;
}

/**
 * The worker's own count of devices by outcome (its `/metrics`), summed
 * over gateway hosts: nothing when the port is unknown or the read fails.
 */
export async function deviceOutcomes(
  healthPort: number | undefined,
): Promise<{ workerOutcomes?: Record<string, number> }> {
  if (healthPort === undefined) return {};
  try {
    const text = await (await fetch(`http://127.0.0.1:${healthPort}/metrics`)).text();
    const outcomes: Record<string, number> = {};
    for (const match of text.matchAll(
      /^push_worker_delivery_devices_total\{[^}]*outcome="([a-z_]+)"[^}]*\} (\S+)$/gm,
    )) {
      const [, outcome = '', value = '0'] = match;
      outcomes[outcome] = (outcomes[outcome] ?? 0) + Number(value);
    }
    return { workerOutcomes: outcomes };
  } catch (error) {
    log(`  the worker's metrics could not be read: ${error instanceof Error ? error.message : String(error)}`);
    return {};
  }
}
