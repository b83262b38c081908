/** JSON values as they arrive on the wire and as they are stored. */
export type JsonPrimitive = string | number | boolean | null;
export type JsonValue = JsonPrimitive | readonly JsonValue[] | JsonObject;
export interface JsonObject {
  readonly [key: string]: JsonValue;
}

export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Canonical JSON allows integers in [-(2^53)+1, (2^53)-1] only. */
export function isCanonicalInteger(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value);
}
