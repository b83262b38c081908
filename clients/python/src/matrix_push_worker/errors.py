"""`PushRulesError`, the one error the client raises."""

from __future__ import annotations

from typing import Literal

from .wire_types import ErrorBody, ErrorKind

TransportFailure = Literal["timeout", "connection-lost", "refused", "unroutable", "closed", "bad-reply"]
"""Why no reply stands behind an error (the request may or may not have been applied):

- `timeout`: no reply within the deadline;
- `connection-lost`: the connection went before the reply;
- `refused`: the broker nacked the request (a quorum queue failing over); it reached no worker;
- `unroutable`: no queue took it (no worker has declared it);
- `closed`: the client was closed; `bad-reply`: the reply is not an envelope.
"""

_TRANSPORT_MESSAGES: dict[TransportFailure, str] = {
    "timeout": "The push rules service did not answer in time; try again.",
    "connection-lost": "The connection to the push rules service was lost; try again.",
    "unroutable": "No push rules worker is taking requests; try again.",
    "refused": "The push rules service did not take the request; try again.",
    "closed": "The push rules client is closed.",
    "bad-reply": "The push rules service sent a reply that is not JSON.",
}


class PushRulesError(Exception):
    """A worker's Matrix error, or a transport failure as `Unavailable` (503) with its `reason`.

    A front answers `status` with `to_matrix_body()`.
    """

    kind: ErrorKind
    errcode: str
    error: str
    status: int
    reason: TransportFailure | None
    """Set when no reply arrived: a write may or may not have been applied (retry it with the same
    `message_id`)."""

    def __init__(self, body: ErrorBody, reason: TransportFailure | None = None) -> None:
        super().__init__(body["error"])
        self.kind = body["kind"]
        self.errcode = body["errcode"]
        self.error = body["error"]
        self.status = body["status"]
        self.reason = reason

    @classmethod
    def from_transport(cls, reason: TransportFailure) -> PushRulesError:
        body: ErrorBody = {
            "kind": "Unavailable",
            "errcode": "M_UNKNOWN",
            "status": 503,
            "error": _TRANSPORT_MESSAGES[reason],
        }
        return cls(body, reason)

    @classmethod
    def unserializable(cls, detail: str) -> PushRulesError:
        """A call whose arguments are not JSON: `BadJson` (400), nothing sent, no `reason`."""
        body: ErrorBody = {
            "kind": "BadJson",
            "errcode": "M_BAD_JSON",
            "status": 400,
            "error": f"The request cannot be sent as JSON: {detail}",
        }
        return cls(body)

    def to_matrix_body(self) -> dict[str, str]:
        """The standard Matrix error body `{"errcode", "error"}`."""
        return {"errcode": self.errcode, "error": self.error}

    def __repr__(self) -> str:
        reason = "" if self.reason is None else f", reason={self.reason!r}"
        return f"PushRulesError({self.kind}, {self.errcode}, {self.status}, {self.error!r}{reason})"
