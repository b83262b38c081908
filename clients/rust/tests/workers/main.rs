//! The Rust client against real workers: every op, the errors, deadlines, many calls on one
//! connection, the evaluate forms, notify with its reply, a node lost and a broker restarted, and
//! the wire adapter.

mod broker_restart;
mod evaluate;
mod evaluate_coalesced;
mod node_loss;
mod notify;
mod push_rules;
mod pushers;
mod support;
mod transport;
mod wire;
