use super::*;

const T: Duration = Duration::from_millis(1000);

fn cached(cache: &KeyCache, hash: &str, tenant: Uuid, at: Instant) {
    let start = cache.read_start(at);
    cache.insert(hash.to_owned(), tenant, start, at);
}

#[test]
fn an_entry_lives_exactly_the_time_to_live_counted_from_the_read() {
    let cache = KeyCache::new(T, 10);
    let t0 = Instant::now();
    let tenant = Uuid::new_v4();
    let start = cache.read_start(t0);
    // The answer arrives 300 ms after the read was sent: its age still counts from t0.
    cache.insert("h".into(), tenant, start, t0 + Duration::from_millis(300));
    assert_eq!(cache.get("h", t0), Some(tenant));
    assert_eq!(cache.get("h", t0 + T - Duration::from_nanos(1)), Some(tenant));
    assert_eq!(cache.get("h", t0 + T), None);
    assert_eq!(cache.len(), 0, "an expired entry is dropped when met");
    assert_eq!(cache.get("other", t0), None);
}

#[test]
fn forgetting_a_tenant_drops_its_entries_and_the_reads_under_way() {
    let cache = KeyCache::new(T, 10);
    let t0 = Instant::now();
    let (alice, bob) = (Uuid::new_v4(), Uuid::new_v4());
    cached(&cache, "alice-1", alice, t0);
    cached(&cache, "bob", bob, t0);
    let under_way = cache.read_start(t0);
    cache.forget_tenant(alice);
    assert_eq!(cache.get("alice-1", t0), None);
    assert_eq!(cache.get("bob", t0), Some(bob));
    // A read sent before the revocation committed may have seen the old key: not kept.
    cache.insert("alice-1".into(), alice, under_way, t0);
    assert_eq!(cache.get("alice-1", t0), None);
    // A read sent afterwards is kept.
    cached(&cache, "alice-2", alice, t0);
    assert_eq!(cache.get("alice-2", t0), Some(alice));
}

#[test]
fn a_zero_time_to_live_keeps_nothing() {
    let cache = KeyCache::new(Duration::ZERO, 10);
    let t0 = Instant::now();
    cached(&cache, "h", Uuid::new_v4(), t0);
    assert_eq!(cache.get("h", t0), None);
    assert_eq!(cache.len(), 0);
}

#[test]
fn a_full_cache_drops_expired_entries_and_otherwise_keeps_nothing_new() {
    let cache = KeyCache::new(T, 3);
    let t0 = Instant::now();
    let tenant = Uuid::new_v4();
    for hash in ["a", "b", "c"] {
        cached(&cache, hash, tenant, t0);
    }
    cached(&cache, "d", tenant, t0 + Duration::from_millis(10));
    assert_eq!(cache.len(), 3);
    assert_eq!(cache.get("d", t0), None);
    // A key already kept is refreshed even when full.
    cached(&cache, "a", tenant, t0 + Duration::from_millis(500));
    assert_eq!(cache.get("a", t0 + Duration::from_millis(1200)), Some(tenant));
    // Once "b" and "c" have expired, a new key takes their room.
    cached(&cache, "e", tenant, t0 + T);
    assert_eq!(cache.len(), 2);
    assert_eq!(cache.get("e", t0 + T), Some(tenant));
}
