/** What the local push gateway is set with: environment variables only (it is a development tool). */
export interface LocalGatewaySettings {
  readonly host: string;
  readonly port: number;
  /** Pushkeys answered as rejected, besides every one starting with `reject-`. */
  readonly reject: ReadonlySet<string>;
  /** Largest request body read; a larger one is answered 413. */
  readonly maxBodyBytes: number;
}

/** Every variable the local push gateway reads, with its default (what compose files are checked against). */
export const LOCAL_GATEWAY_ENVIRONMENT = [
  { name: 'LOCAL_PUSH_GATEWAY_HOST', default: '127.0.0.1', description: 'Address it listens on.' },
  { name: 'LOCAL_PUSH_GATEWAY_PORT', default: '8091', description: 'Port it listens on; 0: any free port.' },
  {
    name: 'LOCAL_PUSH_GATEWAY_REJECT',
    default: '',
    description: 'Pushkeys answered as rejected (comma-separated), besides those starting with `reject-`.',
  },
] as const;

export const LOCAL_GATEWAY_MAX_BODY_BYTES = 512 * 1024;

export type SettingsCheck =
  { readonly ok: true; readonly settings: LocalGatewaySettings } | { readonly ok: false; readonly error: string };

/** Reads the settings from the environment; the error names the variable. */
export function localGatewaySettings(env: Readonly<Record<string, string | undefined>>): SettingsCheck {
  const host = (env['LOCAL_PUSH_GATEWAY_HOST'] ?? '').trim() || '127.0.0.1';
  const portText = (env['LOCAL_PUSH_GATEWAY_PORT'] ?? '').trim() || '8091';
  if (!/^\d{1,5}$/.test(portText) || Number(portText) > 65535) {
    return { ok: false, error: `LOCAL_PUSH_GATEWAY_PORT must be a port number (0-65535), not "${portText}"` };
  }
  const reject = new Set(
    (env['LOCAL_PUSH_GATEWAY_REJECT'] ?? '')
      .split(',')
      .map((pushkey) => pushkey.trim())
      .filter((pushkey) => pushkey !== ''),
  );
  return { ok: true, settings: { host, port: Number(portText), reject, maxBodyBytes: LOCAL_GATEWAY_MAX_BODY_BYTES } };
}
