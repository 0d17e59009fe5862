//! The retention sweep's rules (`relay_core::retention`): an `/out` file goes only once every
//! download URL its run can have signed has expired plus the grace; nothing that is no `/out`
//! file is ever judged deletable as one. A capsule or build record goes once unused for its
//! tenant's days, never while a run uses it (its relay session stores it again); a layer only
//! once nothing standing names it and its grace is over.

// Each test crate uses part of the test backends.
#[allow(dead_code)]
#[path = "support/platform.rs"]
mod platform;
#[allow(dead_code)]
mod support;

use platform::{call_of, start, tool_call, with_tabs};
use proptest::prelude::*;
use relay_core::auth::admin::from_admin_json;
use relay_core::files::DOWNLOAD_URL_TTL_S;
use relay_core::keys;
use relay_core::mcp::{Era, Tool};
use relay_core::retention::{
    layers_meta, layers_named, out_file_expired, out_file_tenant, stored_owner, unused, StoredSweep, Sweep, DAY_MS,
    DEFAULT_UNUSED_DAYS, IN_USE_MAX_MS, LAYER_GRACE_MS, LAYER_REFRESH_MS, MIN_UNUSED_DAYS, OUT_GRACE_S,
    RUN_END_AFTER_UPLOAD_S, STORED_REFRESH_MS,
};
use relay_core::run::backchannel::parse_batch;
use relay_core::run::machine::Input;
use relay_core::stores::put_layer;
use serde_json::json;

const HOUR_MS: u64 = 3_600_000;

#[test]
fn an_out_file_goes_at_its_last_urls_end_plus_the_grace_and_not_a_second_before() {
    let uploaded = 1_700_000_000_000;
    let gone_at = uploaded + (RUN_END_AFTER_UPLOAD_S + DOWNLOAD_URL_TTL_S + OUT_GRACE_S) * 1000;
    assert!(!out_file_expired(uploaded, gone_at - 1_000));
    assert!(out_file_expired(uploaded, gone_at));
    // A run of the longest timeout: over two hours after upload, plus the grace's hour.
    assert_eq!(RUN_END_AFTER_UPLOAD_S, 120 + 3_600 + 10);
    assert!(!out_file_expired(uploaded, uploaded + 3 * HOUR_MS));
    assert!(out_file_expired(uploaded, uploaded + 4 * HOUR_MS));
    assert!(!out_file_expired(uploaded, uploaded - HOUR_MS), "a clock behind the upload keeps it");
}

#[test]
fn only_out_files_have_a_tenant_to_sweep() {
    assert_eq!(out_file_tenant(&keys::out_file("t_1", "r_1", "/out/a/b.txt")), Some("t_1"));
    for key in [
        keys::layer(&"ab".repeat(32)),
        keys::manifest("t_1", &"ab".repeat(32)),
        keys::build_record("t_1", "k"),
        keys::workspace_body("t_1", &"ab".repeat(32)),
        "files/".into(),
        "files/t_1".into(),
        "files/t_1/r_1".into(),
        "files/t_1/r_1/".into(),
        "files//r_1/out/a".into(),
        "files/t_1//out/a".into(),
        "xfiles/t_1/r_1/out/a".into(),
    ] {
        assert_eq!(out_file_tenant(&key), None, "{key}");
    }
}

#[test]
fn a_sweep_counts_what_it_looked_at_and_deleted_by_tenant() {
    let now = 10 * 24 * HOUR_MS;
    let mut sweep = Sweep::default();
    assert!(sweep.judge("files/t_1/r_1/out/old.txt", 0, now));
    assert!(sweep.judge("files/t_2/r_9/out/old.txt", 0, now));
    assert!(!sweep.judge("files/t_1/r_2/out/new.txt", now, now));
    assert!(!sweep.judge("files/odd", 0, now));
    assert_eq!((sweep.scanned, sweep.deleted, sweep.kept), (4, 2, 2));
    let line: serde_json::Value = serde_json::from_str(&sweep.log_line("out files", now, 12)).unwrap();
    assert_eq!(line["asOfMs"].as_u64(), Some(now));
    assert_eq!(line["kind"], "retention");
    assert_eq!(line["deletedByTenant"], serde_json::json!({ "t_1": 1, "t_2": 1 }));
    assert_eq!((line["deleted"].as_u64(), line["durationMs"].as_u64()), (Some(2), Some(12)));
}

proptest! {
    /// No file is deleted while a URL its run may have signed (at any moment from its upload to
    /// the run's latest end) still works, nor within the grace after.
    #[test]
    fn no_url_a_run_signed_outlives_its_file(uploaded_s in 0u64..4_000_000_000, signed_after in 0..=RUN_END_AFTER_UPLOAD_S, used_after in 0..DOWNLOAD_URL_TTL_S + OUT_GRACE_S) {
        let used_at_s = uploaded_s + signed_after + used_after;
        prop_assert!(!out_file_expired(uploaded_s * 1000, used_at_s * 1000 + 999));
    }

    /// Any key outside `files/<tenant>/<run>/<path>` is kept, however old.
    #[test]
    fn nothing_but_an_out_file_is_deleted(key in "\\PC{0,40}", uploaded in 0u64..1_000) {
        prop_assume!(out_file_tenant(&key).is_none());
        let mut sweep = Sweep::default();
        prop_assert!(!sweep.judge(&key, uploaded, u64::MAX / 2));
    }
}

const SHA_A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const SHA_B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const SHA_C: &str = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";

#[test]
fn only_a_capsule_json_or_a_build_record_of_their_shape_has_an_owner() {
    assert_eq!(stored_owner(&keys::manifest("t_1", SHA_A)), Some("t_1"));
    assert_eq!(stored_owner(&keys::build_record("t_1", "npm-abc")), Some("t_1"));
    for key in [
        keys::layer(SHA_A),
        keys::out_file("t_1", "r_1", "/out/a"),
        keys::workspace_body("t_1", SHA_A),
        format!("capsules/t_1/{SHA_A}/fs.code.zip"),
        format!("capsules/t_1/{SHA_A}/capsule.json/x"),
        format!("capsules//{SHA_A}/capsule.json"),
        format!("capsules/t_1/{}/capsule.json", SHA_A.to_uppercase()),
        format!("capsules/t_1/{}/capsule.json", &SHA_A[1..]),
        "capsules/t_1/../capsule.json".into(),
        "builds/t_1/.json".into(),
        "builds//k.json".into(),
        "builds/t_1/k".into(),
        "builds/t_1/a/b.json".into(),
        "xbuilds/t_1/k.json".into(),
    ] {
        assert_eq!(stored_owner(&key), None, "{key}");
    }
}

#[test]
fn unused_means_not_stored_for_the_days_not_a_millisecond_less_and_a_clock_behind_keeps_it() {
    let stored = 1_800_000_000_000;
    assert!(!unused(stored, stored + 7 * DAY_MS - 1, 7));
    assert!(unused(stored, stored + 7 * DAY_MS, 7));
    assert!(!unused(stored, stored - DAY_MS, 1), "an object stored 'after' the sweep's time stays");
}

#[test]
fn storing_a_layer_that_is_there_stores_it_again_only_past_half_its_grace() {
    let blobs = platform::MemoryBlobs::default();
    let (bytes, t0) = (b"zip".to_vec(), 1_800_000_000_000);
    let sha = relay_core::capsule::canonical::sha256_hex(&bytes);
    let put = |at: u64| {
        blobs.clock_ms.set(at);
        platform::run(put_layer(&blobs, &sha, bytes.clone(), None, at)).unwrap();
        blobs.uploaded.borrow()[&keys::layer(&sha)]
    };
    assert_eq!(put(t0), t0);
    assert_eq!(put(t0 + LAYER_REFRESH_MS - 1), t0, "recent: not stored again");
    assert_eq!(
        put(t0 + LAYER_REFRESH_MS),
        t0 + LAYER_REFRESH_MS,
        "older: stored again, so no sweep under way takes it"
    );
}

#[test]
fn layer_lists_round_trip_and_a_malformed_one_names_nothing() {
    assert_eq!(layers_named(&layers_meta([SHA_A, SHA_B])), Some(vec![SHA_A, SHA_B]));
    assert_eq!(layers_named(""), Some(vec![]));
    for bad in [format!("{SHA_A},x"), SHA_A.to_uppercase(), format!("{SHA_A};{SHA_B}"), format!(" {SHA_A}")] {
        assert_eq!(layers_named(&bad), None, "{bad}");
    }
}

#[test]
fn a_sweep_deletes_unused_capsules_and_records_then_the_layers_nothing_standing_names() {
    let now = 1_800_000_000_000 + 100 * DAY_MS;
    let mut sweep = StoredSweep::default();
    let (old, recent) = (now - 8 * DAY_MS, now - DAY_MS);
    // Unused for 8 days, the tenant keeps 7: gone, and its layer A is named by nothing else.
    assert!(sweep.judge_stored(&keys::manifest("t_1", SHA_A), old, Some(SHA_A), 7, now));
    // The same age, a tenant keeping 30: stays, and names B.
    assert!(!sweep.judge_stored(&keys::manifest("t_2", SHA_A), old, Some(SHA_B), 30, now));
    // A build record stored a day ago names C.
    assert!(!sweep.judge_stored(&keys::build_record("t_1", "k"), recent, Some(SHA_C), 7, now));
    // An old key of no capsule's shape stays.
    assert!(!sweep.judge_stored("capsules/t_1/odd", old, Some(""), 1, now));
    assert_eq!((sweep.capsules.deleted, sweep.capsules.kept, sweep.builds.kept), (1, 2, 1));
    assert_eq!(sweep.unnamed(), 0);

    assert!(sweep.judge_layer(&keys::layer(SHA_A), old, now), "named by the deleted capsule only");
    assert!(!sweep.judge_layer(&keys::layer(SHA_B), old, now), "named by a standing capsule");
    assert!(!sweep.judge_layer(&keys::layer(SHA_C), old, now), "named by a standing build record");
    let fresh = "d".repeat(64);
    assert!(!sweep.judge_layer(&keys::layer(&fresh), now - LAYER_GRACE_MS + 1, now), "an upload within its grace");
    assert!(sweep.judge_layer(&keys::layer(&fresh), now - LAYER_GRACE_MS, now), "its grace over");
    assert!(!sweep.judge_layer("layers/not-a-sha", old, now), "a key of no layer's shape");
    assert_eq!(sweep.layers.deleted_by_tenant["layers"], 2);
    let line: serde_json::Value = serde_json::from_str(&sweep.capsules.log_line("capsules", now, 5)).unwrap();
    assert_eq!((line["what"].as_str(), line["deletedByTenant"]["t_1"].as_u64()), (Some("capsules"), Some(1)));
}

#[test]
fn no_layer_goes_while_a_standing_capsule_does_not_name_its_layers() {
    let now = 1_800_000_000_000 + 100 * DAY_MS;
    let mut sweep = StoredSweep::default();
    assert!(!sweep.judge_stored(&keys::manifest("t_1", SHA_A), now, None, 7, now), "stored before it named them");
    assert!(!sweep.judge_stored(&keys::build_record("t_1", "k"), now, Some("garbage"), 7, now));
    assert_eq!(sweep.unnamed(), 2);
    assert!(!sweep.judge_layer(&keys::layer(SHA_B), 0, now));
    // One that is deleted names nothing that matters.
    let mut sweep = StoredSweep::default();
    assert!(sweep.judge_stored(&keys::manifest("t_1", SHA_A), 0, None, 7, now));
    assert_eq!(sweep.unnamed(), 0);
}

#[test]
fn retention_days_are_a_validated_tenant_setting_default_seven() {
    let tenant = |retention: serde_json::Value| {
        from_admin_json(json!({ "id": "t_1", "name": "n", "defaults": { "retention": retention } }))
    };
    assert_eq!(tenant(json!({})).unwrap().defaults.retention.unused_days, DEFAULT_UNUSED_DAYS);
    assert_eq!(DEFAULT_UNUSED_DAYS, 7);
    assert_eq!(tenant(json!({ "unusedDays": 1 })).unwrap().defaults.retention.unused_days, 1);
    for (bad, says) in [
        (json!({ "unusedDays": 0 }), "defaults.retention.unusedDays is 0; it must be between 1 and 3650"),
        (json!({ "unusedDays": 3651 }), "defaults.retention.unusedDays is 3651"),
        (json!({ "unusedDays": -1 }), "invalid value"),
        (json!({ "unusedDays": 1.5 }), "invalid type"),
        (json!({ "unusedHours": 1 }), "unknown field"),
    ] {
        let refused = tenant(bad.clone()).unwrap_err();
        assert!(refused.contains(says), "{bad}: {refused}");
    }
}

fn exit(session: &platform::Session, run: &str) {
    let line = json!({ "runId": run, "seq": 0, "type": "exit", "exitCode": 0, "usage": { "wallMs": 1 } });
    let events = parse_batch(line.to_string().as_bytes()).unwrap();
    session.feed(Input::Heard { tab: Some("tab_1".into()), events });
}

/// What makes "in use" visible in R2: the relay session stores a capsule again once its memory
/// of storing it is [`STORED_REFRESH_MS`] old, and a put renews `uploaded`.
#[test]
fn a_relay_session_stores_a_capsule_again_once_its_memory_of_storing_it_is_an_hour_old() {
    let session = with_tabs(&["tab_1"]);
    let call = |run: &str| {
        let call = call_of(&*session, run, tool_call(Tool::RunJs, json!({ "code": "1" }), Era::Modern, None));
        start(&session, &call);
        exit(&session, run);
    };
    call("r_1");
    let stored = session.now_ms();
    let manifest = session.platform.blobs.objects.borrow().keys().find(|k| k.starts_with("capsules/")).cloned();
    let manifest = manifest.expect("its capsule.json is stored");
    let uploaded = || session.platform.blobs.uploaded.borrow()[&manifest];
    assert_eq!(uploaded(), stored);
    let named = session.platform.blobs.layers.borrow()[&manifest].clone();
    assert_eq!(layers_named(&named).map(|l| l.len()), Some(1), "it names its code layer: {named}");

    session.platform.advance(STORED_REFRESH_MS - 1);
    call("r_2");
    assert_eq!(uploaded(), stored, "remembered: not stored again");
    session.platform.advance(1);
    call("r_3");
    assert_eq!(uploaded(), stored + STORED_REFRESH_MS, "stored again: R2 shows it in use");
    // A sweep as of a run's longest life later keeps it, whatever the tenant's setting.
    let mut sweep = StoredSweep::default();
    let as_of = uploaded() + IN_USE_MAX_MS - STORED_REFRESH_MS;
    assert!(!sweep.judge_stored(&manifest, uploaded(), Some(&named), MIN_UNUSED_DAYS, as_of));
}

proptest! {
    /// Whatever the key, a layer named by a standing capsule, or one within its grace, stays.
    #[test]
    fn a_named_or_recent_layer_stays(key in "\\PC{0,80}", age in 0..LAYER_GRACE_MS) {
        let now = 10 * LAYER_GRACE_MS;
        let mut sweep = StoredSweep::default();
        sweep.judge_stored(&keys::manifest("t_1", SHA_A), now, Some(SHA_A), 7, now);
        prop_assert!(!sweep.judge_layer(&keys::layer(SHA_A), 0, now));
        prop_assert!(!sweep.judge_layer(&key, now - age, now));
    }
}
