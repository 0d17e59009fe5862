//! A tenant's whole life in the core: its key ring (`auth::keyring`: rotation with a grace,
//! revocation, keys from before rings, the admin's view without hashes) and what a deletion
//! takes (`auth::lifecycle`, `keys::tenant_prefixes`).

use proptest::prelude::*;
use relay_core::auth::keyring::{
    key_id, rotation_grace_ms, KeyEntry, KeyRefused, KeyRing, KeyState, LEGACY_KEY_ID, ROTATION_GRACE_DEFAULT_S,
    ROTATION_GRACE_MAX_S,
};
use relay_core::auth::lifecycle::{kv_keys, unlisted_key_is_its, Deleted, KINDS};
use relay_core::auth::{key_hash, session_name_ok};
use relay_core::keys;

fn entry(n: u8, at: u64) -> KeyEntry {
    KeyEntry { id: key_id(&[n; 8]), hash: key_hash(&format!("key-{n}")), created_at_ms: at, state: KeyState::Active }
}

fn hash(n: u8) -> String {
    key_hash(&format!("key-{n}"))
}

#[test]
fn a_new_ring_admits_its_key_and_nothing_else() {
    let ring = KeyRing::new(entry(1, 0));
    assert_eq!(ring.admits(&hash(1), 5), Ok(()));
    assert_eq!(ring.admits(&hash(2), 5), Err(KeyRefused::Unknown));
    assert!(!ring.has_unlisted());
}

#[test]
fn a_rotated_key_works_within_the_grace_and_is_refused_from_its_end() {
    let mut ring = KeyRing::new(entry(1, 0));
    ring.rotate(entry(2, 1_000), 1_000, 500);
    assert_eq!(ring.admits(&hash(1), 1_499), Ok(()));
    assert_eq!(ring.admits(&hash(1), 1_500), Err(KeyRefused::Retired { at_ms: 1_500 }));
    assert_eq!(ring.admits(&hash(2), 1_000_000), Ok(()));
    let message = KeyRefused::Retired { at_ms: 1_500 }.to_string();
    assert!(message.contains("rotated") && message.contains("new key"), "{message}");
}

#[test]
fn a_second_rotation_never_lengthens_a_grace() {
    let mut ring = KeyRing::new(entry(1, 0));
    ring.rotate(entry(2, 0), 0, 1_000);
    ring.rotate(entry(3, 100), 100, 10_000);
    assert_eq!(ring.admits(&hash(1), 1_000), Err(KeyRefused::Retired { at_ms: 1_000 }));
    assert_eq!(ring.admits(&hash(2), 10_099), Ok(()));
    assert_eq!(ring.admits(&hash(2), 10_100), Err(KeyRefused::Retired { at_ms: 10_100 }));
}

#[test]
fn a_revoked_key_is_refused_at_once_and_keeps_its_first_time() {
    let mut ring = KeyRing::new(entry(1, 0));
    let id = ring.keys[0].id.clone();
    ring.revoke(&id, 10).unwrap();
    ring.revoke(&id, 20).unwrap();
    assert_eq!(ring.keys[0].state, KeyState::Revoked { at_ms: 10 });
    assert_eq!(ring.admits(&hash(1), 10), Err(KeyRefused::Revoked));
    // A rotation does not bring a revoked key back.
    ring.rotate(entry(2, 30), 30, 1_000);
    assert_eq!(ring.admits(&hash(1), 31), Err(KeyRefused::Revoked));
    let unknown = ring.revoke("k_nope", 40).unwrap_err();
    assert!(unknown.contains("k_nope") && unknown.contains("/keys"), "{unknown}");
    assert!(ring.revoke(LEGACY_KEY_ID, 40).is_err(), "a ring made with its keys has no legacy key");
}

#[test]
fn keys_from_before_rings_are_admitted_until_rotated_or_revoked() {
    let legacy = KeyRing::legacy();
    assert_eq!(legacy.admits(&hash(9), 0), Ok(()));
    assert!(legacy.has_unlisted());
    let mut rotated = legacy.clone();
    rotated.rotate(entry(1, 0), 0, 100);
    assert_eq!(rotated.admits(&hash(9), 99), Ok(()));
    assert_eq!(rotated.admits(&hash(9), 100), Err(KeyRefused::Retired { at_ms: 100 }));
    assert_eq!(rotated.admits(&hash(1), 100), Ok(()));
    let mut revoked = legacy;
    revoked.revoke(LEGACY_KEY_ID, 5).unwrap();
    assert_eq!(revoked.admits(&hash(9), 5), Err(KeyRefused::Revoked));
}

#[test]
fn a_tenant_made_again_keeps_its_keys_and_its_key_is_active_again() {
    let mut ring = KeyRing::new(entry(1, 0));
    ring.rotate(entry(2, 5), 5, 0);
    let again = ring.clone().admit(entry(1, 9));
    assert_eq!(again.keys.len(), 2);
    assert_eq!((again.keys[0].created_at_ms, again.keys[0].state), (0, KeyState::Active), "the same entry, active");
    assert_eq!(again.admits(&hash(1), 10), Ok(()));
    assert_eq!(again.admits(&hash(2), 10), Ok(()));
    let other = ring.admit(entry(3, 9));
    assert_eq!(other.keys.len(), 3);
    assert_eq!(other.admits(&hash(1), 10), Err(KeyRefused::Retired { at_ms: 5 }), "the others as they were");
    // A tenant from before rings, made again: its unlisted keys stay admitted.
    let legacy = KeyRing::legacy().admit(entry(4, 0));
    assert_eq!((legacy.admits(&hash(9), 0), legacy.admits(&hash(4), 0)), (Ok(()), Ok(())));
}

#[test]
fn revoke_all_refuses_every_key() {
    let mut ring = KeyRing::legacy();
    ring.rotate(entry(1, 0), 0, 1_000_000);
    ring.revoke_all(7);
    for n in [1, 9] {
        assert_eq!(ring.admits(&hash(n), 8), Err(KeyRefused::Revoked), "key {n}");
    }
}

#[test]
fn the_admins_view_names_states_and_never_a_hash() {
    let mut ring = KeyRing::legacy();
    ring.rotate(entry(1, 0), 0, 100);
    ring.rotate(entry(2, 50), 50, 1_000);
    let view = serde_json::to_string(&ring.view(200)).unwrap();
    for n in [1, 2] {
        assert!(!view.contains(&hash(n)), "{view}");
    }
    let states: Vec<&str> = ring.view(200).iter().map(|k| k.state).collect();
    assert_eq!(states, ["retired", "retiring", "active"]);
    assert_eq!(ring.view(200)[0].id, LEGACY_KEY_ID);
    let stored = serde_json::to_value(&ring).unwrap();
    assert_eq!(stored["keys"][0]["state"], "retiring");
    assert_eq!(stored["keys"][0]["untilMs"], 1_050);
    assert_eq!(serde_json::from_value::<KeyRing>(stored).unwrap(), ring, "the stored ring reads back");
}

#[test]
fn a_rotations_body_sets_the_grace_within_bounds() {
    assert_eq!(rotation_grace_ms(b""), Ok(ROTATION_GRACE_DEFAULT_S * 1000));
    assert_eq!(rotation_grace_ms(b"{}"), Ok(ROTATION_GRACE_DEFAULT_S * 1000));
    assert_eq!(rotation_grace_ms(b"{\"graceSeconds\": 0}"), Ok(0));
    assert_eq!(rotation_grace_ms(b"{\"graceSeconds\": 2}"), Ok(2_000));
    assert_eq!(
        rotation_grace_ms(format!("{{\"graceSeconds\": {ROTATION_GRACE_MAX_S}}}").as_bytes()),
        Ok(ROTATION_GRACE_MAX_S * 1000)
    );
    for bad in [
        format!("{{\"graceSeconds\": {}}}", ROTATION_GRACE_MAX_S + 1),
        "{\"graceSeconds\": -1}".into(),
        "{\"graceSeconds\": 1.5}".into(),
        "{\"graceSeconds\": \"2\"}".into(),
        "{\"grace\": 2}".into(),
        "[]".into(),
        "{".into(),
    ] {
        let why = rotation_grace_ms(bad.as_bytes()).unwrap_err();
        assert!(why.contains("graceSeconds"), "{bad}: {why}");
    }
}

#[test]
fn a_deletion_takes_the_keys_records_first_and_the_tenants_record_last() {
    let mut ring = KeyRing::new(entry(1, 0));
    ring.rotate(entry(2, 0), 0, 0);
    let kv = kv_keys("t_1", &ring);
    assert_eq!(kv[0], ("keys", format!("tenant:{}", hash(1))));
    assert_eq!(kv[1], ("keys", format!("tenant:{}", hash(2))));
    assert_eq!(kv.last().unwrap(), &("tenantRecords", "tenant-id:t_1".to_owned()));
    assert!(kv.contains(&("upstreams", "upstreams:t_1".to_owned())));
    assert!(kv.contains(&("tenantRecords", "tenant-keys:t_1".to_owned())));
    // A key record found by a scan is the tenant's only when it names it and the ring lacks it.
    let other = format!("tenant:{}", hash(7));
    assert!(unlisted_key_is_its(&ring, "t_1", "t_1", &other));
    assert!(!unlisted_key_is_its(&ring, "t_2", "t_1", &other));
    assert!(!unlisted_key_is_its(&ring, "t_1", "t_1", &kv[0].1));
}

#[test]
fn layers_are_shared_and_no_tenants_prefix_holds_them() {
    for (_, prefix) in keys::tenant_prefixes("t_1") {
        assert!(!keys::layer(&"ab".repeat(32)).starts_with(&prefix), "{prefix}");
    }
}

#[test]
fn a_deletion_counts_every_kind() {
    let mut deleted = Deleted::default();
    deleted.add("capsules", 3);
    deleted.add("capsules", 2);
    let shown = serde_json::to_value(&deleted).unwrap();
    assert_eq!(shown.as_object().unwrap().len(), KINDS.len());
    assert_eq!((deleted.count("capsules"), deleted.count("keys")), (5, 0));
}

proptest! {
    /// Each prefix of a tenant holds every object of that tenant's kind (keys as `keys` makes
    /// them) and none of any other tenant: `t_1` never takes `t_10`'s.
    #[test]
    fn a_tenants_prefixes_hold_its_objects_and_no_one_elses(a in "[A-Za-z0-9_-]{1,12}", b in "[A-Za-z0-9_-]{1,12}", run in "r_[0-9a-f]{4}") {
        prop_assume!(a != b && session_name_ok(&a) && session_name_ok(&b));
        let sha = "cd".repeat(32);
        let objects = |t: &str| [
            keys::manifest(t, &sha),
            keys::build_record(t, "k"),
            keys::out_file(t, &run, "/out/x.txt"),
            keys::workspace_body(&format!("{t}/default"), &sha),
            keys::tenant_workspace_body(t, &sha),
        ];
        let prefixes = keys::tenant_prefixes(&a);
        for (object, (_, prefix)) in objects(&a).iter().zip(&prefixes) {
            prop_assert!(object.starts_with(prefix.as_str()), "{object} under {prefix}");
        }
        for object in objects(&b) {
            prop_assert!(!prefixes.iter().any(|(_, p)| object.starts_with(p.as_str())), "{object} of {b} under {a}'s prefixes");
        }
    }

    /// Whatever rotations and revocations happen, a revoked key is never admitted again and
    /// a retired one never after its grace; the newest key of a rotation is admitted until revoked.
    #[test]
    fn no_sequence_of_changes_admits_a_revoked_or_expired_key(ops in proptest::collection::vec((0u8..3, 0u64..1_000, 0u8..6), 1..20)) {
        let mut ring = KeyRing::new(entry(0, 0));
        let mut now = 0;
        let mut next = 1u8;
        for (op, step, target) in ops {
            now += step;
            match op {
                0 => { ring.rotate(entry(next, now), now, step); next += 1; }
                1 => { let id = key_id(&[target; 8]); let _ = ring.revoke(&id, now); }
                _ => {}
            }
            for key in &ring.keys {
                let admitted = ring.admits(&key.hash, now).is_ok();
                match key.state {
                    KeyState::Revoked { .. } => prop_assert!(!admitted),
                    KeyState::Retiring { until_ms } => prop_assert_eq!(admitted, now < until_ms),
                    KeyState::Active => prop_assert!(admitted),
                }
            }
        }
    }
}
