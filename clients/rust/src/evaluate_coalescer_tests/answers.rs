//! What each call gets: its own answer, its own error, its own deadline.

use super::*;

#[tokio::test]
async fn each_call_keeps_its_own_timeout_counted_from_the_call() {
    let mut queue = queue(settings());
    let (_first, out) = one_out(&mut queue).await;
    let start = Instant::now();
    let short = queue.call_within("$short", 1, Duration::from_millis(50));
    let long = queue.call_within("$long", 1, Duration::from_secs(30));
    let _other = queue.call_within("$other", 1, Duration::from_secs(20));
    assert_eq!(
        error_of(short).await,
        PushRulesError::Transport(TransportFailure::Timeout)
    );
    assert!(start.elapsed() >= Duration::from_millis(50));

    out.answer(evaluated("$first"));
    let batch = queue.next().await;
    assert_eq!(
        batch.events().0,
        ["$long", "$other"],
        "not the timed-out one"
    );
    let latest = start + Duration::from_secs(30);
    assert!(batch.deadline >= latest && batch.deadline < latest + Duration::from_secs(1));
    drop(long);
}

#[tokio::test]
async fn each_call_gets_its_own_events_error() {
    let mut queue = queue(settings());
    let (_first, out) = one_out(&mut queue).await;
    let good = queue.call("$good", 1);
    let bad = queue.call("$bad", 1);
    queue.nothing_sent().await;
    out.answer(evaluated("$first"));
    let refused =
        json!({"kind": "NotFound", "errcode": "M_NOT_FOUND", "error": "no", "status": 404});
    queue.next().await.answer(json!({"results": [
        {"ok": true, "body": evaluated("$good")},
        {"ok": false, "error": refused},
    ]}));
    assert_eq!(body_of(good).await, evaluated("$good"));
    assert_eq!(bad.await.unwrap().unwrap_err().kind(), ErrorKind::NotFound);
}

#[tokio::test]
async fn a_reply_without_one_result_per_event_fails_every_call_in_it() {
    let mut queue = queue(settings());
    let (_first, out) = one_out(&mut queue).await;
    let calls = [queue.call("$b", 1), queue.call("$c", 1)];
    queue.nothing_sent().await;
    out.answer(evaluated("$first"));
    queue
        .next()
        .await
        .answer(json!({"results": [{"ok": true, "body": {}}]}));
    for call in calls {
        assert_eq!(
            error_of(call).await,
            PushRulesError::Transport(TransportFailure::BadReply)
        );
    }
}

#[tokio::test]
async fn a_batch_refused_as_too_large_or_bad_json_is_sent_again_each_event_alone() {
    for kind in [ErrorKind::TooLarge, ErrorKind::BadJson] {
        let mut queue = queue(settings());
        let (_first, out) = one_out(&mut queue).await;
        let start = Instant::now();
        let b = queue.call_within("$b", 1, Duration::from_secs(20));
        let c = queue.call_within("$c", 1, Duration::from_secs(30));
        queue.nothing_sent().await;
        out.answer(evaluated("$first"));
        queue.next().await.fail(refusal(kind.clone()));

        let mut alone = [queue.next().await, queue.next().await];
        alone.sort_by_key(|sent| sent.events().0);
        let [for_b, for_c] = alone;
        assert_eq!(for_b.events(), (vec!["$b".into()], false), "{kind:?}");
        assert_eq!(for_c.events(), (vec!["$c".into()], false), "{kind:?}");
        // What is left of each call's own deadline.
        assert!(for_b.deadline < start + Duration::from_secs(21));
        assert!(for_c.deadline >= start + Duration::from_secs(30));
        for_b.answer(evaluated("$b"));
        for_c.fail(refusal(kind.clone()));
        assert_eq!(body_of(b).await, evaluated("$b"));
        assert_eq!(error_of(c).await, refusal(kind), "its own refusal alone");
    }
}

#[tokio::test]
async fn a_batch_refused_as_unavailable_or_unanswered_fails_every_event_in_it() {
    let failures = [
        refusal(ErrorKind::Unavailable),
        PushRulesError::Transport(TransportFailure::Timeout),
    ];
    for failure in failures {
        let mut queue = queue(settings());
        let (_first, out) = one_out(&mut queue).await;
        let calls = [queue.call("$b", 1), queue.call("$c", 1)];
        queue.nothing_sent().await;
        out.answer(evaluated("$first"));
        queue.next().await.fail(failure.clone());
        for call in calls {
            assert_eq!(error_of(call).await, failure.clone());
        }
        queue.nothing_sent().await;
    }
}

#[tokio::test]
async fn close_fails_the_waiting_calls_with_closed() {
    let mut queue = queue(settings());
    let (_first, _out) = one_out(&mut queue).await;
    let waiting = queue.call("$b", 1);
    queue.nothing_sent().await;
    queue.coalescer.close();
    assert_eq!(
        error_of(waiting).await,
        PushRulesError::Transport(TransportFailure::Closed)
    );
}

#[tokio::test]
async fn coalescing_is_on_by_default_and_can_be_switched_off() {
    use crate::{ClientOptions, PushRulesClient};
    let options = ClientOptions::new("amqp://localhost");
    assert_eq!(
        options.evaluate_coalescing,
        Some(EvaluateCoalescing::default())
    );
    assert!(PushRulesClient::new(options.clone())
        .unwrap()
        .coalescer()
        .is_some());
    let off = ClientOptions {
        evaluate_coalescing: None,
        ..options
    };
    assert!(PushRulesClient::new(off).unwrap().coalescer().is_none());
}
