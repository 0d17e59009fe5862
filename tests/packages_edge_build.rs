//! Builds at the edge (issue 27 item 5): which builds may go there, the caps named in the error
//! past each, and what the Worker's entry answers for a build mapped to the run's outcome.

use proptest::prelude::*;
use relay_core::capsule::Language;
use relay_core::error::ErrorName;
use relay_core::packages::edge_build::{build_outcome, build_unstarted, edge_build_refusal, over_cap, EDGE_BUILD_CAPS};
use serde_json::json;

/// The caps the job carries, by the names edge-build.js reads: each one a guest may stop at.
const CAPS: [&str; 7] = ["downloadBytes", "listBytes", "treeBytes", "treeFiles", "bundleBytes", "layerBytes", "wallMs"];

#[test]
fn the_job_names_each_cap_the_guest_reads() {
    let json = serde_json::to_value(EDGE_BUILD_CAPS).unwrap();
    for cap in CAPS {
        assert!(json[cap].is_u64(), "the job names cap {cap}: {json}");
    }
}

#[test]
fn python_builds_never_go_to_the_edge_and_npm_builds_one_at_a_time() {
    let never = || panic!("a Python build claims nothing");
    assert!(edge_build_refusal(Language::Py, never)
        .unwrap()
        .contains("Python dependencies are built in a browser tab"));
    assert_eq!(edge_build_refusal(Language::Js, || true), None);
    let busy = edge_build_refusal(Language::Js, || false).unwrap();
    assert!(busy.contains("one at a time") && busy.contains("a browser tab can build it"), "{busy}");
    assert!(
        busy.contains("its build stops within 15 s, then uploads the layer it built"),
        "the refusal says how long to wait, upload included: {busy}"
    );
}

#[test]
fn past_each_cap_the_message_names_it_its_limit_and_the_tab() {
    let message = over_cap("treeFiles", 2_101, None).unwrap();
    assert!(message.contains("2101 files, past the edge's cap of 2000 files (edge build cap treeFiles)"), "{message}");
    let message = over_cap("wallMs", 15_020, None).unwrap();
    assert!(message.contains("it ran for 15020 ms, past the edge's cap of 15000 ms"), "{message}");
    let message = over_cap("downloadBytes", 9_000_000, None).unwrap();
    assert!(
        message.contains(
            "its packages' archives (compressed, as downloaded) reached 9000000 bytes, past the edge's cap of 8388608"
        ),
        "{message}"
    );
    assert!(!message.contains("unpacked"), "compressed downloads are not the unpacked tree: {message}");
    let message = over_cap("listBytes", 17_000_000, None).unwrap();
    assert!(
        message.contains("its package lists (as decoded) reached 17000000 bytes, past the edge's cap of 16777216"),
        "{message}"
    );
    let message = over_cap("bundleBytes", 70_000_000, None).unwrap();
    assert!(
        message.contains(
            "bundles and their source maps (before the zip) reached 70000000 bytes, past the edge's cap of 67108864"
        ),
        "{message}"
    );
    let message = over_cap("layerBytes", 21_000_000, None).unwrap();
    assert!(message.contains("the deps layer it built (its zip) reached 21000000 bytes"), "{message}");
    assert_eq!(over_cap("cpuMs", 1, None), None, "the isolate's CPU wall ends it as a crash, not a cap");
}

#[test]
fn a_caps_message_names_the_package_past_it() {
    let answer = json!({ "cap": "treeBytes", "value": 9_000_000, "what": "bomb@1.0.0" });
    let (name, message) = build_outcome(&answer).unwrap_err();
    assert_eq!(name, ErrorName::DepsResolutionFailed);
    assert!(
        message.starts_with(
            "the dependency build at the edge stopped at bomb@1.0.0: its unpacked packages reached 9000000 bytes"
        ),
        "{message}"
    );
    let long = "x".repeat(10_000);
    let message = over_cap("treeFiles", 2_001, Some(&long)).unwrap();
    assert!(message.len() < 1_000, "a guest's long name is cut: {} bytes", message.len());
}

#[test]
fn the_entrys_answers_become_the_runs_outcome() {
    assert_eq!(build_outcome(&json!({ "ok": true })), Ok(()));
    let (name, message) = build_outcome(&json!({ "cap": "treeBytes", "value": 9_000_000 })).unwrap_err();
    assert_eq!(name, ErrorName::DepsResolutionFailed);
    assert!(message.contains("edge build cap treeBytes"), "{message}");
    let refused = json!({ "error": { "name": "QuotaExceeded", "message": "storedBytes is full" } });
    let (name, message) = build_outcome(&refused).unwrap_err();
    assert_eq!(name, ErrorName::QuotaExceeded);
    assert!(message.ends_with("storedBytes is full"), "{message}");
    for odd in [
        json!(null),
        json!({ "ok": "true" }),
        json!({ "cap": "nope", "value": 1 }),
        json!({ "error": { "name": "Nope" } }),
    ] {
        assert_eq!(build_outcome(&odd).unwrap_err().0, ErrorName::DepsResolutionFailed, "{odd}");
    }
}

proptest! {
    /// Whatever a guest's isolate or the entry answers, the run gets a known error name and a
    /// message, never a panic; a cap's message always says a tab can build it.
    #[test]
    fn any_answer_maps_to_an_outcome(cap in prop::sample::select(CAPS.to_vec()), value: u64, name in ".{0,20}", text in ".{0,40}") {
        let (error, message) = build_outcome(&json!({ "cap": cap, "value": value })).unwrap_err();
        prop_assert_eq!(error, ErrorName::DepsResolutionFailed);
        prop_assert!(message.contains(cap) && message.contains("a browser tab can build it"));
        let answer = json!({ "error": { "name": name, "message": text } });
        let (error, message) = build_outcome(&answer).unwrap_err();
        prop_assert!(ErrorName::from_name(error.as_str()).is_some());
        prop_assert!(message.contains(&text));
    }
}

#[test]
fn a_build_whose_entry_failed_says_why_and_names_the_tab() {
    let why = "the asset builder.js is sha384-a, not sha384-b as this Worker was built with: deploy the page's assets \
               and the Worker from one build";
    let (name, message) = build_unstarted(why);
    assert_eq!(name, ErrorName::DepsResolutionFailed);
    assert!(message.contains(why), "the operator's fix is in the entry's own words: {message}");
    assert!(message.contains("open the relay page"), "what mends it when calling again does not: {message}");
    assert!(build_unstarted("").1.contains("(it gave no reason)"));
}
