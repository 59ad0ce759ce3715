//! Unit tests of the route writer: batching, the routes to save, the unregistration cap, a panicking batch.
use super::*;

fn registration(name: &str) -> BrokerRegistration {
    let topics = [format!("{name}-a"), format!("{name}-b")];
    crate::route::builder::test_registration(name, 0, &format!("{name}:1"), 0, &[&topics[0], &topics[1]])
}

/// Mutations waiting together become one snapshot, and every registration is answered after it is visible.
#[tokio::test]
async fn queued_mutations_are_published_as_one_snapshot() {
    let (handle, writer) = route_table(RouteSnapshot::default(), None, 64);
    let mut replies = Vec::new();
    for i in 0..10 {
        let (tx, rx) = oneshot::channel();
        handle
            .submit(RouteMutation::Register(Box::new(registration(&format!("b{i}"))), tx, Default::default()))
            .await
            .unwrap();
        replies.push(rx);
    }
    tokio::spawn(writer.run());
    for rx in replies {
        assert!(rx.await.unwrap().is_ok());
    }
    let snapshot = handle.load();
    assert_eq!(snapshot.version, 1, "ten registrations, one publish");
    assert_eq!(snapshot.topics.len(), 20);
}

/// The routes to save see every mutation queued before the request, routes and live entries alike.
#[tokio::test]
async fn routes_to_save_agree_with_what_was_queued_before() {
    let (handle, writer) = route_table(RouteSnapshot::default(), None, 64);
    let (tx, _reply) = oneshot::channel();
    handle.submit(RouteMutation::Register(Box::new(registration("a")), tx, Default::default())).await.unwrap();
    handle
        .submit_unregister(UnregisterRequest {
            cluster: "c".into(),
            broker_addr: "a:1".into(),
            broker_name: "a".into(),
            broker_id: 0,
        })
        .unwrap();
    let (tx, _reply) = oneshot::channel();
    handle.submit(RouteMutation::Register(Box::new(registration("b")), tx, Default::default())).await.unwrap();
    tokio::spawn(writer.run());
    let saved = handle.routes_to_save().await.unwrap();
    let brokers: Vec<&str> = saved.snapshot.brokers.values().map(|b| &*b.broker_name).collect();
    assert_eq!(brokers, ["b"]);
    let live: Vec<&str> = saved.live.iter().map(|(k, _)| &*k.addr).collect();
    assert_eq!(live, ["b:1"]);
}

/// A batch that panics half-way publishes nothing of itself: not the routes of the registration applied
/// before the fault, not its live entry. The writer task ends with the panic (the server's supervisor
/// then stops the server); until then readers see the state from before the batch.
#[tokio::test]
async fn a_batch_that_panics_leaves_the_published_state_as_it_was() {
    let (handle, writer) = route_table(RouteSnapshot::default(), None, 64);
    let task = tokio::spawn(writer.run());
    assert!(handle.register(registration("a")).await.unwrap().is_ok());
    let before = handle.load_full();
    // Both are queued before the writer task runs again (this runtime has one thread): one batch.
    let (tx, reply) = oneshot::channel();
    handle.submit(RouteMutation::Register(Box::new(registration("b")), tx, Default::default())).await.unwrap();
    handle.submit(RouteMutation::Panic).await.unwrap();
    let ended = task.await.expect_err("the writer panics");
    assert!(ended.is_panic());
    assert!(reply.await.is_err(), "the registration in the failed batch is not acknowledged");
    let after = handle.load_full();
    assert!(Arc::ptr_eq(&before, &after), "no snapshot published");
    assert!(after.topic("b-a").is_none());
    assert!(handle.liveness.get(&BrokerAddrKey::new("c", "b:1")).is_none(), "b's live entry was not committed");
    assert!(handle.liveness.get(&BrokerAddrKey::new("c", "a:1")).is_some());
}

#[tokio::test]
async fn unregistrations_beyond_the_cap_are_refused_without_waiting() {
    let (handle, writer) = route_table(RouteSnapshot::default(), None, 2);
    let unregister =
        || UnregisterRequest { cluster: "c".into(), broker_addr: "a:1".into(), broker_name: "b".into(), broker_id: 0 };
    assert!(handle.submit_unregister(unregister()).is_ok());
    assert!(handle.submit_unregister(unregister()).is_ok());
    assert!(matches!(handle.submit_unregister(unregister()), Err(SubmitError::QueueFull)));
    // Registrations still get in, and once the writer drains the queue unregistrations do too.
    let (tx, rx) = oneshot::channel();
    handle.submit(RouteMutation::Register(Box::new(registration("b")), tx, Default::default())).await.unwrap();
    tokio::spawn(writer.run());
    assert!(rx.await.unwrap().is_ok());
    assert!(handle.submit_unregister(unregister()).is_ok());
}
