/** What the push gateway double (push-gateway-double.ts) is told to do, and to which requests. */

/** What the double does with a valid notify request. */
export type GatewayBehaviour =
  /** 200 `{"rejected": [...]}`, the default; after `delayMs` when given. */
  | { readonly kind: 'answer'; readonly delayMs?: number }
  /**
   * Any status. The body is `body` (a string is sent as is, so a test can
   * send one that is not JSON; anything else as JSON), else the usual
   * `{"rejected"}` for a 2xx and a Matrix error otherwise. `retryAfter`
   * sends `Retry-After`: a number as delay-seconds, a Date as an HTTP-date
   * (RFC 9110 §10.2.3), a string verbatim (to send a malformed one).
   */
  | {
      readonly kind: 'status';
      readonly status: number;
      readonly body?: unknown;
      readonly retryAfter?: number | Date | string;
      readonly delayMs?: number;
    }
  /** A redirect (302 unless given) to `location`: a client must not follow it. */
  | { readonly kind: 'redirect'; readonly location: string; readonly status?: number; readonly delayMs?: number }
  /** Read the request and never answer: only the client's timeout ends it. */
  | { readonly kind: 'hang' }
  /**
   * Read the request and answer nothing until `answerHeld` (then as
   * `answer` does): a gateway silent for as long as a test needs. Recorded
   * as 200 when received, as a delayed answer is.
   */
  | { readonly kind: 'hold' }
  /** Read the request and reset the connection (a TCP RST, no response). */
  | { readonly kind: 'reset'; readonly delayMs?: number };

/** Which requests a behaviour applies to, and how many times. */
export interface BehaviourScope {
  /** Only requests with a device of this pushkey; without it, every request. */
  readonly pushkey?: string;
  /** Only the next `times` requests it applies to; then it is dropped. Without it, until replaced. */
  readonly times?: number;
}
