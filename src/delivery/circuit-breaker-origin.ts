const DEFAULT_PORTS: Readonly<Record<string, string>> = { 'https:': '443', 'http:': '80' };

/**
 * The key a gateway's circuit breaker is kept under: scheme://host:port,
 * with the scheme's default port written out, so that `https://push.example`
 * and `https://push.example:443/other/path` share one breaker (they are one
 * server) while another port of the same host, another server, does not.
 * Undefined for a URL that is not http(s) or does not parse.
 */
export function gatewayOrigin(url: string): string | undefined {
  const parsed = URL.parse(url);
  return parsed === null ? undefined : originOf(parsed);
}

/** `gatewayOrigin` of a URL already parsed. */
export function originOf(parsed: URL): string | undefined {
  const defaultPort = DEFAULT_PORTS[parsed.protocol];
  if (defaultPort === undefined || parsed.hostname === '') return undefined;
  return `${parsed.protocol}//${parsed.hostname}:${parsed.port === '' ? defaultPort : parsed.port}`;
}
