//! evaluate() coalesced: calls made together against a real worker, each answered on its own.

use std::future::IntoFuture;

use futures_util::future::join_all;
use matrix_push_worker_client::{
    ClientOptions, ErrorKind, EvaluateCoalescing, PushRulesClient, Recipient,
};

use crate::evaluate::{message, notified, room};
use crate::support::{new_user, options, shared_broker};

/// 100 calls at once, the 50th naming a recipient the worker refuses: each gets its own event's
/// answer, whether coalesced or each alone.
async fn calls_at_once_each_get_their_own_answer(client: PushRulesClient) {
    let sender = new_user("sender");
    let room = room(10);
    let users: Vec<String> = (0..100).map(|i| new_user(&format!("c{i}"))).collect();
    let recipients: Vec<[Recipient; 1]> = users
        .iter()
        .enumerate()
        .map(|(i, user)| [Recipient::new(if i == 50 { "not a user" } else { user })])
        .collect();
    let events: Vec<_> = (0..100)
        .map(|i| message(&sender, &format!("event {i}")))
        .collect();

    let answers = join_all(
        events
            .iter()
            .zip(&recipients)
            .map(|(event, recipients)| client.evaluate(event, &room, recipients).into_future()),
    )
    .await;

    for (i, (answer, user)) in answers.iter().zip(&users).enumerate() {
        if i == 50 {
            let refused = answer.as_ref().unwrap_err();
            assert_eq!(refused.kind(), ErrorKind::BadJson);
            assert!(refused.error().contains("recipients.0.user_id"));
        } else {
            let answer = answer.as_ref().unwrap();
            assert_eq!(answer.notify, notified(std::slice::from_ref(user)), "{i}");
        }
    }
}

#[tokio::test]
async fn calls_made_together_are_coalesced_and_each_answered_on_its_own() {
    let _broker = shared_broker().await;
    calls_at_once_each_get_their_own_answer(PushRulesClient::new(options()).unwrap()).await;
}

#[tokio::test]
async fn with_coalescing_off_each_call_goes_alone_and_is_answered_the_same() {
    let _broker = shared_broker().await;
    let off = ClientOptions {
        evaluate_coalescing: None,
        ..options()
    };
    calls_at_once_each_get_their_own_answer(PushRulesClient::new(off).unwrap()).await;
}

#[tokio::test]
async fn a_coalesced_batch_the_worker_refuses_as_too_large_is_answered_event_by_event() {
    let _broker = shared_broker().await;
    // The client's cap above the workers' 20,000 recipients per message: the two crowds, waiting
    // behind the first call, go as one batch the worker refuses, then each alone.
    let client = PushRulesClient::new(ClientOptions {
        evaluate_coalescing: Some(EvaluateCoalescing {
            max_recipients: 100_000,
            ..EvaluateCoalescing::default()
        }),
        ..options()
    })
    .unwrap();
    let sender = new_user("sender");
    let room = room(20_000);
    let tag = fastrand::u32(..);
    let crowds: Vec<Vec<Recipient>> = (0..3)
        .map(|crowd| {
            (0..15_000)
                .map(|i| Recipient::new(format!("@k{i}-{crowd}-{tag:08x}:example.org")))
                .collect()
        })
        .collect();
    let events: Vec<_> = (0..3)
        .map(|i| message(&sender, &format!("crowd {i}")))
        .collect();

    let answers = join_all(
        events
            .iter()
            .zip(&crowds)
            .map(|(event, crowd)| client.evaluate(event, &room, crowd).into_future()),
    )
    .await;

    for (answer, crowd) in answers.iter().zip(&crowds) {
        let answer = answer.as_ref().unwrap();
        assert_eq!(answer.evaluated, 15_000);
        assert!(answer.notify.contains_key(&crowd[14_999].user_id));
    }
}
