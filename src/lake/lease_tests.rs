use std::time::Duration;

use deltalake::logstore::object_store::memory::InMemory;

use super::*;

const TTL: Duration = Duration::from_millis(600);

fn holder(name: &str) -> Holder {
    Holder {
        owner: name.into(),
        host: "test".into(),
        pid: 1,
        heartbeat_at: Utc::now(),
        writes: 0,
        ttl_ms: u64::try_from(TTL.as_millis()).unwrap(),
        released: false,
    }
}

async fn lease_holder(store: &Arc<dyn ObjectStore>) -> Holder {
    match look(store, &Path::from("lease")).await.unwrap() {
        Seen::Held(holder, _) => holder,
        Seen::Free => panic!("no lease object"),
    }
}

#[tokio::test]
async fn a_second_local_holder_fails_fast_and_the_first_release_frees_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let location =
        StorageLocation::parse(dir.path().to_str().expect("utf-8 path")).expect("location");
    let options = StorageOptions::default();
    let first = CheckpointLease::acquire(&location, &options, DEFAULT_LEASE_TTL)
        .await
        .expect("first lock");
    let second = CheckpointLease::acquire(&location, &options, DEFAULT_LEASE_TTL).await;
    let message = second.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        message.contains("in use by another mssql-cdc process")
            && message.contains(&format!("pid {}", std::process::id())),
        "{message}"
    );
    drop(first);
    CheckpointLease::acquire(&location, &options, DEFAULT_LEASE_TTL)
        .await
        .expect("lock after release");
}

#[tokio::test]
async fn a_live_holder_keeps_the_lease_and_a_taker_gives_up_after_waiting() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let first = lease_on(store.clone(), "mem://ckpt", holder("a"), TTL)
        .await
        .unwrap();
    let started = Instant::now();
    let second = lease_on(store.clone(), "mem://ckpt", holder("b"), TTL).await;
    assert!(matches!(second, Err(LeaseError::Held { .. })), "{second:?}");
    assert!(
        started.elapsed() >= TTL,
        "the taker waited {:?}",
        started.elapsed()
    );
    first.guard().check().expect("the holder still holds it");
    assert_eq!(lease_holder(&store).await.owner, "a");
}

#[tokio::test]
async fn a_holder_that_stopped_renewing_is_taken_over_after_its_ttl() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let first = lease_on(store.clone(), "mem://ckpt", holder("a"), TTL)
        .await
        .unwrap();
    // Killed: renewals stop, nothing is released.
    drop(first);
    let started = Instant::now();
    let second = lease_on(store.clone(), "mem://ckpt", holder("b"), TTL)
        .await
        .unwrap();
    assert!(
        started.elapsed() >= TTL,
        "taken after {:?}",
        started.elapsed()
    );
    second.guard().check().unwrap();
    assert_eq!(lease_holder(&store).await.owner, "b");
}

#[tokio::test]
async fn a_released_lease_is_taken_at_once_and_release_never_removes_a_successor() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let first = lease_on(store.clone(), "mem://ckpt", holder("a"), TTL)
        .await
        .unwrap();
    first.release().await;
    let started = Instant::now();
    let second = lease_on(store.clone(), "mem://ckpt", holder("b"), TTL)
        .await
        .unwrap();
    assert!(started.elapsed() < TTL / 2, "took {:?}", started.elapsed());

    // A stale holder's release is conditional on its own version: the
    // successor's lease stays.
    let stale = CheckpointLease {
        guard: first_guard_with_old_version(&store).await,
        hold: Hold::Remote {
            store: store.clone(),
            path: Path::from("lease"),
            me: holder("a"),
            renewal: Renewal(tokio::spawn(async {})),
        },
    };
    stale.release().await;
    let now = lease_holder(&store).await;
    assert_eq!((now.owner.as_str(), now.released), ("b", false));
    second.guard().check().unwrap();
}

/// A guard whose recorded version is not the lease's current one.
async fn first_guard_with_old_version(store: &Arc<dyn ObjectStore>) -> LeaseGuard {
    let Seen::Held(_, mut version) = look(store, &Path::from("lease")).await.unwrap() else {
        panic!("no lease");
    };
    version.e_tag = Some("an-older-version".into());
    version.version = None;
    LeaseGuard {
        location: "mem://ckpt".into(),
        state: Some(Arc::new(Mutex::new(Renewed {
            deadline: Instant::now() + TTL,
            at: Instant::now(),
            version,
            lost: false,
            last_error: None,
        }))),
    }
}

#[cfg(feature = "failpoints")]
mod faults {
    use super::*;
    use crate::lake::faults::{Call, Fault, FaultPlan, FaultyStore, Rule, install, remove};

    fn faulty(prefix: &str) -> Arc<dyn ObjectStore> {
        Arc::new(FaultyStore::new(
            Arc::new(InMemory::new()),
            format!("memory:///{prefix}/"),
        ))
    }

    fn plan(prefix: &str, fault: Fault, limit: Option<u64>) -> Arc<FaultPlan> {
        let plan = FaultPlan::new(&url::Url::parse(&format!("memory:///{prefix}/")).unwrap());
        plan.add(Rule {
            path: "lease".into(),
            calls: vec![Call::Put],
            fault,
            odds: 1.0,
            limit,
            after: 0,
        });
        plan
    }

    #[tokio::test]
    async fn a_holder_whose_renewals_fail_stops_writing_before_a_taker_may_start() {
        // One store, seen by the holder through faults and by the taker
        // without.
        let shared: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let through = |base: &str| -> Arc<dyn ObjectStore> {
            Arc::new(FaultyStore::new(
                shared.clone(),
                format!("memory:///{base}/"),
            ))
        };
        let first = lease_on(through("holder"), "mem://ckpt", holder("a"), TTL)
            .await
            .unwrap();
        let guard = first.guard();
        let faults = plan("holder", Fault::Unavailable, None);
        install(faults.clone());
        let taker = tokio::spawn(lease_on(through("taker"), "mem://ckpt", holder("b"), TTL));
        let fenced_at = loop {
            if guard.check().is_err() {
                break Instant::now();
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        let error = guard.check().unwrap_err();
        assert!(matches!(error, LeaseError::Expired { .. }), "{error}");
        assert!(error.to_string().contains("503"), "{error}");
        let second = taker.await.unwrap().unwrap();
        let taken_at = Instant::now();
        assert!(
            taken_at > fenced_at,
            "the taker started after the holder's deadline"
        );
        second.guard().check().unwrap();
        assert_eq!(lease_holder(&shared).await.owner, "b");
        // The first holder never writes again, even once its store recovers.
        remove(&faults);
        tokio::time::sleep(TTL).await;
        assert!(guard.check().is_err(), "the first holder stays fenced");
        assert_eq!(lease_holder(&shared).await.owner, "b");
        drop(first);
    }

    #[tokio::test]
    async fn a_renewal_that_succeeded_behind_an_error_keeps_the_lease() {
        let store = faulty("ambiguous");
        let first = lease_on(store.clone(), "mem://ckpt", holder("a"), TTL)
            .await
            .unwrap();
        let faults = plan("ambiguous", Fault::RetriedAfterSuccess, Some(2));
        install(faults.clone());
        tokio::time::sleep(TTL * 2).await;
        remove(&faults);
        assert_eq!(faults.injected(), 2);
        first
            .guard()
            .check()
            .expect("its own writes are recognised");
        assert_eq!(lease_holder(&store).await.owner, "a");
    }
}
