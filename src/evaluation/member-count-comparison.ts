/**
 * `room_member_count`'s `is`: `N`, `==N`, `<N`, `>N`, `<=N` or `>=N`, with
 * `N` a run of ASCII digits. Parsed once per rule; anything else yields
 * `undefined`, and the condition never matches.
 */
export type MemberCountTest = (memberCount: number) => boolean;

const FORM = /^(==|<=|>=|<|>)?([0-9]+)$/;

export function parseMemberCountComparison(is: string): MemberCountTest | undefined {
  const match = FORM.exec(is);
  const digits = match?.[2];
  if (match === null || digits === undefined) return undefined;
  const n = Number(digits);
  switch (match[1]) {
    case undefined:
    case '==':
      return (count) => count === n;
    case '<':
      return (count) => count < n;
    case '>':
      return (count) => count > n;
    case '<=':
      return (count) => count <= n;
    case '>=':
      return (count) => count >= n;
    default:
      return undefined;
  }
}
