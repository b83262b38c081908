//! Push rules as the Matrix client-server API has them, and the bodies of the push-rule ops.

use serde::{Deserialize, Serialize};

use crate::json::{present, JsonObject};
use crate::push_action::PushAction;
use crate::push_condition::PushCondition;

/// The five kinds of rules, in the order they are evaluated. Any `AsRef<str>` names a kind in the
/// client's methods; the workers answer an unknown one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleKind {
    Override,
    Content,
    Room,
    Sender,
    Underride,
}

impl RuleKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Override => "override",
            Self::Content => "content",
            Self::Room => "room",
            Self::Sender => "sender",
            Self::Underride => "underride",
        }
    }
}

impl AsRef<str> for RuleKind {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

/// A rule as the workers answer it: `get_pushrule`, and each rule of `get_pushrules`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PushRule {
    pub rule_id: String,
    pub default: bool,
    pub enabled: bool,
    pub actions: Vec<PushAction>,
    /// Override and underride rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<PushCondition>>,
    /// Content rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// Fields the contract does not name (a newer worker's), kept.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A user's rules of one scope, each kind in evaluation order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ruleset {
    pub r#override: Vec<PushRule>,
    pub content: Vec<PushRule>,
    pub room: Vec<PushRule>,
    pub sender: Vec<PushRule>,
    pub underride: Vec<PushRule>,
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `get_pushrules`: the body of `GET /pushrules/`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PushRules {
    pub global: Ruleset,
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A new or replaced rule: the body of `PUT /pushrules/{scope}/{kind}/{ruleId}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NewPushRule {
    pub actions: Vec<PushAction>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub conditions: Option<Vec<PushCondition>>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub pattern: Option<String>,
    /// Sent as given; the workers ignore what they do not know.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `get_pushrule_actions`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PushRuleActions {
    pub actions: Vec<PushAction>,
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `get_pushrule_enabled`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PushRuleEnabled {
    pub enabled: bool,
    #[serde(flatten)]
    pub extra: JsonObject,
}
