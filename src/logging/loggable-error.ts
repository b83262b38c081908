/**
 * A store error as a log line may hold it: its kind, message and code. A
 * driver's bulk-write error carries the documents it failed on, and those
 * hold pushkeys, which never go into a log.
 */
export function loggable(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) return { message: String(error) };
  const code = (error as { code?: unknown }).code;
  return {
    type: error.name,
    message: error.message,
    ...(typeof code === 'string' || typeof code === 'number' ? { code } : {}),
  };
}
