//! API key rotation and revocation, and how long another replica may still accept a revoked key
//! (the key cache's time to live, `key_cache.rs`).

use std::time::{Duration, Instant};

use uuid::Uuid;

use super::super::Store;
use super::{fixture, replica};

/// The stored revocation time of the tenant whose key is `key`.
async fn revocation_time(store: &Store, key: &str) -> Option<String> {
    sqlx::query_scalar("SELECT key_revoked_at FROM tenants WHERE key_hash = $1")
        .bind(super::super::tenants::key_hash(key))
        .fetch_one(&store.pool)
        .await
        .expect("row")
}

/// `tenant`'s new key, after a rotation through `store`.
async fn rotated(store: &Store, tenant: Uuid) -> String {
    let (key, _) = store
        .rotate_api_key(tenant)
        .await
        .expect("rotate")
        .expect("the tenant exists");
    key
}

#[tokio::test(flavor = "multi_thread")]
async fn rotation_replaces_the_key_and_revocation_leaves_none() {
    let f = fixture().await;
    let (bob, old) = f.store.create_tenant("bob").await.expect("tenant");
    let (new, issued_at) = f
        .store
        .rotate_api_key(bob.id)
        .await
        .expect("rotate")
        .expect("bob exists");
    assert!(new.starts_with(super::super::API_KEY_PREFIX) && new != old);
    assert!(issued_at >= bob.created_at);
    assert_eq!(f.store.tenant_by_api_key(&old).await.expect("lookup"), None);
    assert_eq!(f.store.tenant_id_by_api_key(&old).await.expect("lookup"), None);
    assert_eq!(
        f.store.tenant_by_api_key(&new).await.expect("lookup"),
        Some(bob.clone())
    );
    assert_eq!(
        f.store.tenant_id_by_api_key(&new).await.expect("lookup"),
        Some(bob.id)
    );

    // Revoked (twice: the first time stands), the key is unknown, though cached a moment ago.
    assert!(f.store.revoke_api_key(bob.id).await.expect("revoke"));
    let revoked_at = revocation_time(&f.store, &new).await;
    assert!(f.store.revoke_api_key(bob.id).await.expect("revoke again"));
    let again = revocation_time(&f.store, &new).await;
    assert!(revoked_at.is_some() && again == revoked_at);
    assert_eq!(f.store.tenant_id_by_api_key(&new).await.expect("lookup"), None);
    assert_eq!(f.store.tenant_by_api_key(&new).await.expect("lookup"), None);

    // A rotation after a revocation issues a working key again; other tenants are untouched.
    let third = rotated(&f.store, bob.id).await;
    assert_eq!(
        f.store.tenant_id_by_api_key(&third).await.expect("lookup"),
        Some(bob.id)
    );
    assert_eq!(
        f.store.get_tenant(f.tenant).await.expect("get").map(|t| t.id),
        Some(f.tenant)
    );

    // Unknown tenants.
    let nobody = Uuid::new_v4();
    assert_eq!(f.store.rotate_api_key(nobody).await.expect("rotate"), None);
    assert!(!f.store.revoke_api_key(nobody).await.expect("revoke"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_key_revoked_on_another_replica_is_accepted_at_most_the_cache_time() {
    let f = fixture().await;
    let (bob, key) = f.store.create_tenant("bob").await.expect("tenant");
    let revoker = replica(&f, "revoker", Duration::from_secs(30)).await;

    // A long time to live: the revocation does not reach this replica's cache by itself.
    let long = f.store.clone().with_key_cache_ttl(Duration::from_secs(600));
    assert_eq!(
        long.tenant_id_by_api_key(&key).await.expect("lookup"),
        Some(bob.id)
    );
    assert!(revoker.revoke_api_key(bob.id).await.expect("revoke"));
    assert_eq!(revoker.tenant_id_by_api_key(&key).await.expect("lookup"), None);
    assert_eq!(
        long.tenant_id_by_api_key(&key).await.expect("cached"),
        Some(bob.id)
    );

    // A short one: the revoked key is refused once the time to live has passed.
    let ttl = Duration::from_millis(300);
    let short = f.store.clone().with_key_cache_ttl(ttl);
    let (key, _) = revoker
        .rotate_api_key(bob.id)
        .await
        .expect("rotate")
        .expect("bob");
    assert_eq!(
        short.tenant_id_by_api_key(&key).await.expect("lookup"),
        Some(bob.id)
    );
    assert!(revoker.revoke_api_key(bob.id).await.expect("revoke"));
    let revoked = Instant::now();
    loop {
        let asked = Instant::now();
        match short.tenant_id_by_api_key(&key).await.expect("lookup") {
            Some(_) => assert!(
                asked < revoked + ttl,
                "accepted {:?} after the revocation",
                asked - revoked
            ),
            None => break,
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(ttl).await;
    assert_eq!(short.tenant_id_by_api_key(&key).await.expect("lookup"), None);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_revoking_replica_refuses_at_once_and_unknown_keys_take_no_memory() {
    let f = fixture().await;
    let store = f.store.clone().with_key_cache_ttl(Duration::from_secs(600));
    let (bob, key) = store.create_tenant("bob").await.expect("tenant");
    assert_eq!(
        store.tenant_id_by_api_key(&key).await.expect("lookup"),
        Some(bob.id)
    );
    assert_eq!(store.api_keys.len(), 1);
    for i in 0..100 {
        let unknown = format!("ppk_{i:064x}");
        assert_eq!(store.tenant_id_by_api_key(&unknown).await.expect("lookup"), None);
    }
    assert_eq!(store.api_keys.len(), 1, "unknown keys are not kept");
    let new = rotated(&store, bob.id).await;
    assert_eq!(store.tenant_id_by_api_key(&key).await.expect("lookup"), None);
    assert_eq!(
        store.tenant_id_by_api_key(&new).await.expect("lookup"),
        Some(bob.id)
    );
    assert!(store.revoke_api_key(bob.id).await.expect("revoke"));
    assert_eq!(store.tenant_id_by_api_key(&new).await.expect("lookup"), None);
}
