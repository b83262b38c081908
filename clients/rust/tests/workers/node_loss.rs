//! A node lost under the client: two "nodes" in front of the one broker (TCP proxies), the one
//! the client is on killed. Pending calls fail at once with `connection-lost`; the next call is
//! served through the other node. The broker itself is never touched.

use std::future::IntoFuture;
use std::time::Duration;

use matrix_push_worker_client::{
    ClientOptions, Event, JsonObject, PushRulesClient, Recipient, Room, TransportFailure,
};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use crate::support::{amqp_url, new_user, options, shared_broker, UnservedQueue};

/// Forwards every connection to the broker until killed; then refuses connections.
struct Node {
    port: u16,
    tasks: JoinSet<()>,
}

impl Node {
    async fn start(broker: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut tasks = JoinSet::new();
        tasks.spawn(async move {
            let mut connections = JoinSet::new();
            while let Ok((mut client, _)) = listener.accept().await {
                let broker = broker.clone();
                connections.spawn(async move {
                    if let Ok(mut upstream) = TcpStream::connect(broker).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                    }
                });
            }
        });
        Self { port, tasks }
    }

    fn url(&self) -> String {
        format!("amqp://guest:guest@127.0.0.1:{}", self.port)
    }

    fn label(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Its listener and every connection through it go at once, as with a node that died.
    async fn kill(&mut self) {
        self.tasks.shutdown().await;
    }
}

#[tokio::test]
async fn a_lost_node_fails_the_pending_calls_and_the_next_call_goes_to_the_other_node() {
    let _broker = shared_broker().await;
    let broker = url::Url::parse(&amqp_url()).unwrap();
    let address = format!(
        "{}:{}",
        broker.host_str().unwrap(),
        broker.port().unwrap_or(5672)
    );
    let mut nodes = [
        Node::start(address.clone()).await,
        Node::start(address).await,
    ];
    // Requests go to a queue nobody consumes (they stay pending); evaluate is served.
    let queue = UnservedQueue::declare().await;
    let client = PushRulesClient::new(ClientOptions {
        urls: nodes.iter().map(Node::url).collect(),
        queue: queue.name.clone(),
        read_queue: None,
        timeout: Duration::from_secs(60),
        ..options()
    })
    .unwrap();
    let sender = new_user("sender");
    let event = Event::new(
        "m.room.message",
        "!r:example.org",
        &sender,
        JsonObject::new(),
    );
    let room = Room {
        member_count: 10,
        ..Room::default()
    };
    let recipients = [Recipient::new(new_user("bob"))];
    client.evaluate(&event, &room, &recipients).await.unwrap();
    let first = client.broker().expect("connected");
    let lost = nodes.iter().position(|node| node.label() == first).unwrap();
    let pending: Vec<_> = (0..3)
        .map(|_| tokio::spawn(client.get_pushers(&sender).into_future()))
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;

    nodes[lost].kill().await;

    for call in pending {
        let failed = call.await.unwrap().unwrap_err();
        // Not `timeout`: they failed with the lost connection, not at their deadline.
        assert_eq!(failed.reason(), Some(TransportFailure::ConnectionLost));
    }
    let answer = client.evaluate(&event, &room, &recipients).await.unwrap();
    assert_eq!(answer.evaluated, 1);
    assert_eq!(client.broker(), Some(nodes[1 - lost].label()));
    queue.delete().await;
}
