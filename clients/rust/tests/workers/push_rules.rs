//! Every push-rule method, and the Matrix errors the workers answer with.

use matrix_push_worker_client::{
    ErrorKind, NewPushRule, PushAction, PushCondition, PushRule, PushRulesError, RuleKind,
};
use serde_json::json;

use crate::support::{client, known_user, new_user, shared_broker};

fn rule(pattern: &str, actions: Vec<PushAction>) -> NewPushRule {
    NewPushRule {
        pattern: Some(pattern.into()),
        actions,
        ..NewPushRule::default()
    }
}

#[tokio::test]
async fn get_push_rules_answers_the_server_defaults_of_a_new_user() {
    let _broker = shared_broker().await;
    let client = client();

    let rules = client.get_push_rules(&new_user("defaults")).await.unwrap();

    let master = &rules.global.r#override[0];
    assert_eq!(master.rule_id, ".m.rule.master");
    assert!(master.default && !master.enabled);
    assert_eq!(master.conditions.as_deref(), Some(&[][..]));
    assert!(rules.global.content.is_empty());
    assert!(rules
        .global
        .underride
        .iter()
        .any(|rule| rule.rule_id == ".m.rule.message"));
    // Typed, and nothing of the reply lost on the way.
    let as_sent = serde_json::to_value(&rules).unwrap();
    assert!(as_sent["global"]["sender"].is_array());
    assert!(rules.extra.is_empty() && rules.global.extra.is_empty());
}

#[tokio::test]
async fn a_rule_is_set_read_changed_and_deleted() {
    let _broker = shared_broker().await;
    let client = client();
    let user = known_user(&client, "rules").await;
    let actions = vec![PushAction::Notify, PushAction::highlight(true)];

    client
        .set_push_rule(
            &user,
            "global",
            RuleKind::Content,
            "kw-pizza",
            &rule("pizza", actions.clone()),
        )
        .await
        .unwrap();
    let stored = client
        .get_push_rule(&user, "global", "content", "kw-pizza")
        .await
        .unwrap();
    assert_eq!(
        stored,
        PushRule {
            rule_id: "kw-pizza".into(),
            default: false,
            enabled: true,
            actions,
            conditions: None,
            pattern: Some("pizza".into()),
            extra: Default::default(),
        }
    );

    client
        .set_push_rule_actions(
            &user,
            "global",
            "content",
            "kw-pizza",
            &[PushAction::sound("ping")],
        )
        .await
        .unwrap();
    let actions = client
        .get_push_rule_actions(&user, "global", "content", "kw-pizza")
        .await
        .unwrap();
    assert_eq!(actions.actions, [PushAction::sound("ping")]);

    client
        .set_push_rule_enabled(&user, "global", "content", "kw-pizza", false)
        .await
        .unwrap();
    let enabled = client
        .get_push_rule_enabled(&user, "global", "content", "kw-pizza")
        .await
        .unwrap();
    assert!(!enabled.enabled);

    client
        .delete_push_rule(&user, "global", "content", "kw-pizza")
        .await
        .unwrap();
    let missing = client
        .get_push_rule(&user, "global", "content", "kw-pizza")
        .await
        .unwrap_err();
    assert_eq!(
        (
            missing.kind(),
            missing.errcode(),
            missing.status(),
            missing.reason()
        ),
        (ErrorKind::NotFound, "M_NOT_FOUND", 404, None)
    );
    assert!(matches!(missing, PushRulesError::Worker(_)));
    assert_eq!(
        serde_json::to_value(missing.to_matrix_body()).unwrap(),
        json!({"errcode": "M_NOT_FOUND", "error": missing.error()})
    );
}

#[tokio::test]
async fn conditions_and_tweaks_are_stored_and_read_back_typed() {
    let _broker = shared_broker().await;
    let client = client();
    let user = known_user(&client, "conditions").await;
    let conditions = vec![
        PushCondition::EventMatch {
            key: "type".into(),
            pattern: "m.room.message".into(),
        },
        PushCondition::RoomMemberCount { is: "<10".into() },
        PushCondition::SenderNotificationPermission { key: "room".into() },
        PushCondition::EventPropertyIs {
            key: "content.flag".into(),
            value: json!(true),
        },
    ];
    let new = NewPushRule {
        conditions: Some(conditions.clone()),
        actions: vec![PushAction::Notify, PushAction::sound("bell")],
        ..NewPushRule::default()
    };

    client
        .set_push_rule(&user, "global", "override", "small-rooms", &new)
        .await
        .unwrap();

    let stored = client
        .get_push_rule(&user, "global", "override", "small-rooms")
        .await
        .unwrap();
    assert_eq!(stored.conditions, Some(conditions));
    assert_eq!(stored.actions, new.actions);
}

#[tokio::test]
async fn before_and_after_place_a_rule() {
    let _broker = shared_broker().await;
    let client = client();
    let user = known_user(&client, "placement").await;
    // A new rule without a placement goes first in its kind, as in Synapse.
    for id in ["c", "b"] {
        client
            .set_push_rule(&user, "global", "content", id, &rule(id, vec![]))
            .await
            .unwrap();
    }

    client
        .set_push_rule(&user, "global", "content", "a", &rule("a", vec![]))
        .before("b")
        .await
        .unwrap();
    client
        .set_push_rule(&user, "global", "content", "d", &rule("d", vec![]))
        .after("c")
        .await
        .unwrap();

    let rules = client.get_push_rules(&user).await.unwrap();
    let ids: Vec<&str> = rules
        .global
        .content
        .iter()
        .map(|rule| rule.rule_id.as_str())
        .collect();
    assert_eq!(ids, ["a", "b", "c", "d"]);
}

#[tokio::test]
async fn a_write_sent_again_with_its_message_id_is_applied_once() {
    let _broker = shared_broker().await;
    let client = client();
    let user = known_user(&client, "idempotent").await;
    let once = rule("x", vec![]);
    let message_id = format!("write-{user}");
    client
        .set_push_rule(&user, "global", "content", "once", &once)
        .message_id(&message_id)
        .await
        .unwrap();
    client
        .delete_push_rule(&user, "global", "content", "once")
        .await
        .unwrap();

    // The recorded reply, not a second application: the rule stays deleted.
    client
        .set_push_rule(&user, "global", "content", "once", &once)
        .message_id(&message_id)
        .await
        .unwrap();
    let missing = client
        .get_push_rule(&user, "global", "content", "once")
        .await
        .unwrap_err();
    assert_eq!(missing.errcode(), "M_NOT_FOUND");

    // Without one, each write is its own: applied again.
    client
        .set_push_rule(&user, "global", "content", "once", &once)
        .await
        .unwrap();
    client
        .get_push_rule(&user, "global", "content", "once")
        .await
        .unwrap();
}

#[tokio::test]
async fn a_bad_address_is_the_workers_matrix_error() {
    let _broker = shared_broker().await;
    let client = client();
    let user = known_user(&client, "bad").await;
    let cases = [
        (
            "device",
            "content",
            ErrorKind::InvalidParam,
            "M_INVALID_PARAM",
            400,
        ),
        ("global", "nonsense", ErrorKind::BadJson, "M_BAD_JSON", 400),
    ];
    for (scope, kind, expected_kind, errcode, status) in cases {
        let refused = client
            .set_push_rule(&user, scope, kind, "r", &rule("p", vec![]))
            .await
            .unwrap_err();
        assert_eq!(
            (refused.kind(), refused.errcode(), refused.status()),
            (expected_kind, errcode, status),
            "{scope}/{kind}"
        );
    }
    let not_a_user = client.get_push_rules("alice").await.unwrap_err();
    assert_eq!(
        (not_a_user.kind(), not_a_user.status()),
        (ErrorKind::BadJson, 400)
    );
}
