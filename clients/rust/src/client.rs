//! `PushRulesClient`: one method per op of the RPC contract (docs/rpc-contract.md).

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tokio::time::Instant;

use crate::broker::Broker;
use crate::broker_urls::{parse_broker_urls, InvalidOptions};
use crate::calls::{request, with, DeletePushers, Read, SetPushRule, Write};
use crate::error::PushRulesError;
use crate::evaluate_calls::{Evaluate, EvaluateMany};
use crate::evaluate_coalescer::{EvaluateCoalescer, SendEvaluate};
use crate::evaluation::{EvaluateEvent, Event, Recipients, Room};
use crate::json::JsonObject;
use crate::notify::{Notification, NotifyRecipient};
use crate::notify_calls::Notify;
use crate::options::ClientOptions;
use crate::push_action::PushAction;
use crate::push_rules::{NewPushRule, PushRule, PushRuleActions, PushRuleEnabled, PushRules};
use crate::pushers::{DeletedPushers, PusherSelector, PusherSetAction, Pushers};
use crate::rpc::{Outgoing, Rpc, Target};
use crate::session::SessionSettings;

/// A homeserver's client for the worker pool.
///
/// Each method returns a call: set its options (`timeout`, a write's `message_id`, …), then
/// `.await` it for the Matrix response body of its endpoint, or a [`PushRulesError`]. `user_id` is
/// the user the homeserver authenticated: the workers act on that user's data and nothing else.
///
/// One connection for every call, to one node at a time, opened by the first call and replaced on
/// loss by one to the next node. Clones share it; it closes with [`close`](Self::close), or when
/// the last clone is dropped.
#[derive(Clone)]
pub struct PushRulesClient {
    inner: Arc<Inner>,
}

struct Inner {
    rpc: Arc<Rpc>,
    /// `None` when coalescing is off: each `evaluate` goes alone.
    coalescer: Option<Arc<EvaluateCoalescer>>,
    evaluate_queue: String,
    deliver_queue: String,
    timeout: Duration,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.rpc.broker().close_in_background();
    }
}

impl PushRulesClient {
    /// Checks the options; connects at the first call.
    pub fn new(options: ClientOptions) -> Result<Self, InvalidOptions> {
        let nodes = parse_broker_urls(&options.urls, options.heartbeat_seconds)?;
        if let Some(user) = &options.publisher_user_id {
            if user.is_empty() || user.len() > 255 {
                return Err(InvalidOptions(
                    "publisher_user_id must be 1 to 255 bytes".into(),
                ));
            }
        }
        let settings = SessionSettings {
            connection_name: format!(
                "matrix-push-worker rust client (pid {})",
                std::process::id()
            ),
            connect_timeout: options.connect_timeout,
            read_queue: options.read_queue.clone(),
            read_probe_interval: options.read_probe_interval,
        };
        let broker = Broker::new(nodes, settings, options.reconnect_backoff);
        let rpc = Arc::new(Rpc::new(
            broker,
            options.queue,
            options.read_queue,
            options.publisher_user_id,
        ));
        let coalescer = options.evaluate_coalescing.map(|settings| {
            EvaluateCoalescer::new(settings, send_evaluate(&rpc, &options.evaluate_queue))
        });
        Ok(Self {
            inner: Arc::new(Inner {
                rpc,
                coalescer,
                evaluate_queue: options.evaluate_queue,
                deliver_queue: options.deliver_queue,
                timeout: options.timeout,
            }),
        })
    }

    /// `host:port` of the node the client is connected to, if it is.
    pub fn broker(&self) -> Option<String> {
        self.inner.rpc.broker().label()
    }

    /// Fails pending calls (`closed`) and disconnects; later calls fail with `closed`. Idempotent.
    pub async fn close(&self) {
        if let Some(coalescer) = &self.inner.coalescer {
            coalescer.close();
        }
        self.inner.rpc.broker().close().await;
    }

    pub(crate) fn rpc(&self) -> &Rpc {
        &self.inner.rpc
    }

    pub(crate) fn coalescer(&self) -> Option<&Arc<EvaluateCoalescer>> {
        self.inner.coalescer.as_ref()
    }

    pub(crate) fn evaluate_queue(&self) -> &str {
        &self.inner.evaluate_queue
    }

    pub(crate) fn deliver_queue(&self) -> &str {
        &self.inner.deliver_queue
    }

    /// A call's deadline, from now.
    pub(crate) fn deadline(&self, timeout: Option<Duration>) -> Instant {
        Instant::now() + timeout.unwrap_or(self.inner.timeout)
    }

    // ---- push rules -------------------------------------------------------------------------

    /// `GET /pushrules/`: the user's rules, the server defaults for a user who never stored any.
    pub fn get_push_rules(&self, user_id: &str) -> Read<PushRules> {
        Read::new(self, Ok(request("get_pushrules", user_id)))
    }

    /// `GET /pushrules/{scope}/{kind}/{ruleId}`.
    pub fn get_push_rule(
        &self,
        user_id: &str,
        scope: &str,
        kind: impl AsRef<str>,
        rule_id: &str,
    ) -> Read<PushRule> {
        Read::new(
            self,
            Ok(address("get_pushrule", user_id, scope, kind, rule_id)),
        )
    }

    /// `PUT /pushrules/{scope}/{kind}/{ruleId}`; place it with `.before(…)` or `.after(…)`.
    pub fn set_push_rule(
        &self,
        user_id: &str,
        scope: &str,
        kind: impl AsRef<str>,
        rule_id: &str,
        rule: &NewPushRule,
    ) -> SetPushRule {
        let body = address("set_pushrule", user_id, scope, kind, rule_id);
        SetPushRule(Write::new(self, with(Ok(body), "rule", rule)))
    }

    /// `DELETE /pushrules/{scope}/{kind}/{ruleId}`.
    pub fn delete_push_rule(
        &self,
        user_id: &str,
        scope: &str,
        kind: impl AsRef<str>,
        rule_id: &str,
    ) -> Write<()> {
        Write::new(
            self,
            Ok(address("delete_pushrule", user_id, scope, kind, rule_id)),
        )
    }

    /// `GET /pushrules/{scope}/{kind}/{ruleId}/actions`.
    pub fn get_push_rule_actions(
        &self,
        user_id: &str,
        scope: &str,
        kind: impl AsRef<str>,
        rule_id: &str,
    ) -> Read<PushRuleActions> {
        let body = address("get_pushrule_actions", user_id, scope, kind, rule_id);
        Read::new(self, Ok(body))
    }

    /// `PUT /pushrules/{scope}/{kind}/{ruleId}/actions`.
    pub fn set_push_rule_actions(
        &self,
        user_id: &str,
        scope: &str,
        kind: impl AsRef<str>,
        rule_id: &str,
        actions: &[PushAction],
    ) -> Write<()> {
        let body = address("set_pushrule_actions", user_id, scope, kind, rule_id);
        Write::new(self, with(Ok(body), "actions", actions))
    }

    /// `GET /pushrules/{scope}/{kind}/{ruleId}/enabled`.
    pub fn get_push_rule_enabled(
        &self,
        user_id: &str,
        scope: &str,
        kind: impl AsRef<str>,
        rule_id: &str,
    ) -> Read<PushRuleEnabled> {
        let body = address("get_pushrule_enabled", user_id, scope, kind, rule_id);
        Read::new(self, Ok(body))
    }

    /// `PUT /pushrules/{scope}/{kind}/{ruleId}/enabled`.
    pub fn set_push_rule_enabled(
        &self,
        user_id: &str,
        scope: &str,
        kind: impl AsRef<str>,
        rule_id: &str,
        enabled: bool,
    ) -> Write<()> {
        let body = address("set_pushrule_enabled", user_id, scope, kind, rule_id);
        Write::new(self, with(Ok(body), "enabled", &enabled))
    }

    // ---- pushers ----------------------------------------------------------------------------

    /// `GET /pushers`.
    pub fn get_pushers(&self, user_id: &str) -> Read<Pushers> {
        Read::new(self, Ok(request("get_pushers", user_id)))
    }

    /// `POST /pushers/set`: `action` is the client's body as it came; `device_id` the device of the
    /// request's access token (what whoami answers), never a value from the client's body.
    pub fn set_pusher(
        &self,
        user_id: &str,
        action: &PusherSetAction,
        device_id: Option<&str>,
    ) -> Write<()> {
        let mut body = request("set_pusher", user_id);
        if let Some(device_id) = device_id {
            body.insert("device_id".into(), device_id.into());
        }
        Write::new(self, with(Ok(body), "action", action))
    }

    /// A homeserver op (trusted publishers only): the pushers the selector names; e-mail pushers
    /// only with `.include_email(true)`.
    pub fn delete_pushers(&self, user_id: &str, selector: PusherSelector) -> DeletePushers {
        let mut body = request("delete_pushers", user_id);
        match selector {
            PusherSelector::DeviceIds(ids) => {
                body.insert("device_ids".into(), ids.into());
            }
            PusherSelector::ExceptDeviceId(id) => {
                body.insert("except_device_id".into(), id.into());
            }
            PusherSelector::All => {
                body.insert("all".into(), Value::Bool(true));
            }
        }
        DeletePushers(Write::<DeletedPushers>::new(self, Ok(body)))
    }

    /// A homeserver op (trusted publishers only), on deactivation: the user's push rules and every
    /// pusher, e-mail ones included, go; the user then reads as a new one.
    pub fn delete_user_data(&self, user_id: &str) -> Write<()> {
        Write::new(self, Ok(request("delete_user_data", user_id)))
    }

    // ---- evaluate and notify ----------------------------------------------------------------

    /// Which of `recipients` the event notifies, with which actions (on the evaluate queue).
    /// `.explain(true)` adds every recipient's matched rule.
    pub fn evaluate<'a>(
        &self,
        event: &'a Event,
        room: &'a Room,
        recipients: impl Into<Recipients<'a>>,
    ) -> Evaluate<'a> {
        Evaluate {
            client: self.clone(),
            event,
            room,
            recipients: recipients.into(),
            explain: false,
            timeout: None,
        }
    }

    /// Several events in messages of the batch form (64 events or 1 MiB each), sent at once; one
    /// answer per event, in order.
    pub fn evaluate_many<'a>(&self, events: &'a [EvaluateEvent<'a>]) -> EvaluateMany<'a> {
        EvaluateMany {
            client: self.clone(),
            events,
            timeout: None,
        }
    }

    /// A homeserver op: hands one event's notification to the workers for delivery
    /// (docs/delivery.md), on the delivery queue, persistent. `.with_reply()` waits for a worker to
    /// have taken it in.
    pub fn notify(&self, notification: &Notification, recipients: &[NotifyRecipient]) -> Notify {
        #[derive(Serialize)]
        struct Body<'a> {
            op: &'static str,
            notification: &'a Notification,
            recipients: &'a [NotifyRecipient],
        }
        let body = Body {
            op: "notify",
            notification,
            recipients,
        };
        Notify {
            client: self.clone(),
            body: serde_json::to_vec(&body).map_err(|e| PushRulesError::unserializable(&e)),
            message_id: None,
            timeout: None,
        }
    }
}

/// The coalescer's way to the evaluate queue. It holds the RPC, not the client: the client's last
/// clone dropped still closes the connection.
fn send_evaluate(rpc: &Arc<Rpc>, queue: &str) -> SendEvaluate {
    let rpc = Arc::clone(rpc);
    let queue: Arc<str> = queue.into();
    Arc::new(move |body, deadline| {
        let rpc = Arc::clone(&rpc);
        let queue = Arc::clone(&queue);
        Box::pin(async move {
            let outgoing = Outgoing {
                body,
                deadline,
                message_id: None,
                persistent: false,
            };
            rpc.request(outgoing, Target::Queue(&queue)).await
        })
    })
}

fn address(
    op: &str,
    user_id: &str,
    scope: &str,
    kind: impl AsRef<str>,
    rule_id: &str,
) -> JsonObject {
    let mut body = request(op, user_id);
    body.insert("scope".into(), scope.into());
    body.insert("kind".into(), kind.as_ref().into());
    body.insert("rule_id".into(), rule_id.into());
    body
}
