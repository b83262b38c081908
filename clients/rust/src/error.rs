//! `PushRulesError`, the one error every call returns.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The kinds of the contract's error table (docs/rpc-contract.md, reply body).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    NotFound,
    InvalidParam,
    MissingParam,
    BadJson,
    Unrecognized,
    Forbidden,
    TooLarge,
    Database,
    Internal,
    Unavailable,
    /// A kind this client does not know, as a newer worker sent it.
    Other(String),
}

impl ErrorKind {
    pub fn as_str(&self) -> &str {
        match self {
            Self::NotFound => "NotFound",
            Self::InvalidParam => "InvalidParam",
            Self::MissingParam => "MissingParam",
            Self::BadJson => "BadJson",
            Self::Unrecognized => "Unrecognized",
            Self::Forbidden => "Forbidden",
            Self::TooLarge => "TooLarge",
            Self::Database => "Database",
            Self::Internal => "Internal",
            Self::Unavailable => "Unavailable",
            Self::Other(kind) => kind,
        }
    }

    fn from_wire(kind: String) -> Self {
        match kind.as_str() {
            "NotFound" => Self::NotFound,
            "InvalidParam" => Self::InvalidParam,
            "MissingParam" => Self::MissingParam,
            "BadJson" => Self::BadJson,
            "Unrecognized" => Self::Unrecognized,
            "Forbidden" => Self::Forbidden,
            "TooLarge" => Self::TooLarge,
            "Database" => Self::Database,
            "Internal" => Self::Internal,
            "Unavailable" => Self::Unavailable,
            _ => Self::Other(kind),
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self::from_wire)
    }
}

/// Why no reply stands behind an error: the request may or may not have been applied (send a write
/// again with the same `message_id`; it is applied at most once).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransportFailure {
    /// No reply before the call's deadline, which runs from the call (a wait for a connection
    /// included).
    Timeout,
    /// The broker connection went before the reply (direct reply-to belongs to the connection: the
    /// reply can never come).
    ConnectionLost,
    /// The broker did not take the request (a nack: a quorum queue between two leaders); it
    /// reached no worker.
    Refused,
    /// No queue took the request: no worker has declared it.
    Unroutable,
    /// The client was closed.
    Closed,
    /// The reply is not what the contract says (not JSON, not an envelope, a body of another shape).
    BadReply,
}

impl TransportFailure {
    /// As the TypeScript and Python clients name it: `timeout`, `connection-lost`, …
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::ConnectionLost => "connection-lost",
            Self::Refused => "refused",
            Self::Unroutable => "unroutable",
            Self::Closed => "closed",
            Self::BadReply => "bad-reply",
        }
    }

    fn message(self) -> &'static str {
        match self {
            Self::Timeout => "The push rules service did not answer in time; try again.",
            Self::ConnectionLost => "The connection to the push rules service was lost; try again.",
            Self::Refused => "The push rules service did not take the request; try again.",
            Self::Unroutable => "No push rules worker is taking requests; try again.",
            Self::Closed => "The push rules client is closed.",
            Self::BadReply => "The push rules service sent a reply the client cannot read.",
        }
    }
}

impl fmt::Display for TransportFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure reply's error: `{"kind", "errcode", "error", "status"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub kind: ErrorKind,
    pub errcode: String,
    pub error: String,
    pub status: u16,
}

/// The standard Matrix error body, `{"errcode", "error"}`, that a front answers `status` with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatrixErrorBody {
    pub errcode: String,
    pub error: String,
}

/// What a call fails with. Whatever the variant, it has the contract's `kind`, `errcode`, `error`
/// and `status`, and [`to_matrix_body`](Self::to_matrix_body) is what to answer the Matrix client.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PushRulesError {
    /// A worker answered with this error.
    Worker(ErrorBody),
    /// No reply: `Unavailable` (503, `M_UNKNOWN`), with the reason.
    Transport(TransportFailure),
    /// The call's arguments cannot be sent as a request (not serializable as JSON): `BadJson`
    /// (400). Nothing was sent; the connection and the other calls carry on.
    Invalid(String),
}

impl PushRulesError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Worker(body) => body.kind.clone(),
            Self::Transport(_) => ErrorKind::Unavailable,
            Self::Invalid(_) => ErrorKind::BadJson,
        }
    }

    pub fn errcode(&self) -> &str {
        match self {
            Self::Worker(body) => &body.errcode,
            Self::Transport(_) => "M_UNKNOWN",
            Self::Invalid(_) => "M_BAD_JSON",
        }
    }

    /// The human-readable message.
    pub fn error(&self) -> &str {
        match self {
            Self::Worker(body) => &body.error,
            Self::Transport(reason) => reason.message(),
            Self::Invalid(message) => message,
        }
    }

    /// The HTTP status to answer with.
    pub fn status(&self) -> u16 {
        match self {
            Self::Worker(body) => body.status,
            Self::Transport(_) => 503,
            Self::Invalid(_) => 400,
        }
    }

    /// Set when no reply came: a write may or may not have been applied.
    pub fn reason(&self) -> Option<TransportFailure> {
        match self {
            Self::Transport(reason) => Some(*reason),
            _ => None,
        }
    }

    /// The `{"kind", "errcode", "error", "status"}` of a failure reply.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            kind: self.kind(),
            errcode: self.errcode().to_owned(),
            error: self.error().to_owned(),
            status: self.status(),
        }
    }

    /// The Matrix error body `{"errcode", "error"}` to answer [`status`](Self::status) with.
    pub fn to_matrix_body(&self) -> MatrixErrorBody {
        MatrixErrorBody {
            errcode: self.errcode().to_owned(),
            error: self.error().to_owned(),
        }
    }

    pub(crate) fn unserializable(error: &serde_json::Error) -> Self {
        Self::Invalid(format!("The request cannot be sent as JSON: {error}"))
    }
}

impl fmt::Display for PushRulesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}, {}): {}",
            self.kind(),
            self.errcode(),
            self.status(),
            self.error()
        )?;
        if let Some(reason) = self.reason() {
            write!(f, " [{reason}]")?;
        }
        Ok(())
    }
}

impl std::error::Error for PushRulesError {}

impl From<ErrorBody> for PushRulesError {
    fn from(body: ErrorBody) -> Self {
        Self::Worker(body)
    }
}
