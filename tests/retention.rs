//! The retention sweep's rules (`relay_core::retention`): an `/out` file goes only once every
//! download URL its run can have signed has expired plus the grace; nothing that is no `/out`
//! file is ever judged deletable.

use proptest::prelude::*;
use relay_core::files::DOWNLOAD_URL_TTL_S;
use relay_core::keys;
use relay_core::retention::{out_file_expired, out_file_tenant, Sweep, OUT_GRACE_S, RUN_END_AFTER_UPLOAD_S};

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
    let line: serde_json::Value = serde_json::from_str(&sweep.log_line(now, 12)).unwrap();
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
