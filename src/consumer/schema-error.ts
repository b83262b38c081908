import type { ErrorObject } from 'ajv';

// A file of its own: the evaluation threads need it without the request
// queue's validators (parse-request.ts compiles every op's schema on load).
/** "rule.actions must be array", "request must have required property 'scope'". */
export function describeSchemaError(error: ErrorObject | undefined): string {
  if (error === undefined) return 'Request does not match the schema of its op.';
  const path = error.instancePath === '' ? 'request' : error.instancePath.slice(1).replaceAll('/', '.');
  return `${path} ${error.message ?? 'is invalid'}.`;
}
