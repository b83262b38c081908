/**
 * Server name grammar of the Matrix appendices: a DNS name, an IPv4 literal
 * or a bracketed IPv6 literal, with an optional decimal port.
 */
export const DNS_NAME = /^[A-Za-z0-9.-]{1,255}$/;
export const IPV6_LITERAL = /^\[[0-9A-Fa-f:.]{2,45}\]$/;
export const PORT = /^[0-9]{1,5}$/;

export function isValidServerName(name: string): boolean {
  let host = name;
  if (name.startsWith('[')) {
    const close = name.indexOf(']');
    if (close < 0) return false;
    host = name.slice(0, close + 1);
    const rest = name.slice(close + 1);
    if (rest !== '' && !(rest.startsWith(':') && PORT.test(rest.slice(1)))) return false;
    return IPV6_LITERAL.test(host);
  }
  const colon = name.lastIndexOf(':');
  if (colon >= 0) {
    if (!PORT.test(name.slice(colon + 1))) return false;
    host = name.slice(0, colon);
  }
  return DNS_NAME.test(host);
}
