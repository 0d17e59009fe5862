//! Pyodide's memory snapshot in R2 (`relay_core::runtime_snapshot`): its key follows what
//! shaped it and nothing else; its seal is an HMAC under a key of its own (a fixed vector,
//! computed apart from this code) that refuses a moved, altered or foreign snapshot; the sweep
//! deletes only other snapshots, and only once the current one and they are a day old, never a
//! key of another shape.

use proptest::prelude::*;
use relay_core::capsule::jws::Signer;
use relay_core::runtime_snapshot::{current_key, is_snapshot_key, stale, Seal, PREFIX, STALE_GRACE_MS};
use serde_json::json;

const NOW: u64 = 1_800_000_000_000;
const HEX_A: &str = "abababababababababababababababababababababababababababababababab";
const HEX_C: &str = "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd";

fn runtimes(pyodide_files: serde_json::Value) -> String {
    json!({
        "quickjs@0.32": {"files": {"emscripten-module.wasm": {"url": "q.wasm", "integrity": "sha384-q"}}},
        "pyodide@314": {"files": pyodide_files},
    })
    .to_string()
}

fn files() -> serde_json::Value {
    json!({
        "pyodide.asm.wasm": {"url": "vendor/pyodide.asm.wasm", "integrity": "sha384-wasm"},
        "python_stdlib.zip": {"url": "vendor/python_stdlib.zip", "integrity": "sha384-stdlib"},
        "pyodide-lock.json": {"url": "vendor/pyodide-lock.json", "integrity": "sha384-lock"},
        "policy.wasm": {"url": "policy.wasm", "integrity": "sha384-policy"},
    })
}

#[test]
fn the_current_key_names_the_runtime_and_what_shaped_it() {
    let key = current_key(&runtimes(files()), b"runner").unwrap();
    assert!(key.starts_with("runtime-snapshots/pyodide@314/"), "{key}");
    assert!(is_snapshot_key(&key), "{key}");
    assert_eq!(current_key(&runtimes(files()), b"runner").unwrap(), key, "the same build, the same key");
}

#[test]
fn any_file_the_edge_loads_or_the_runner_changes_the_key_and_nothing_else_does() {
    let key = current_key(&runtimes(files()), b"runner").unwrap();
    assert_ne!(current_key(&runtimes(files()), b"runner 2").unwrap(), key, "the runner");
    for name in relay_core::runtime_snapshot::EDGE_FILES {
        let mut changed = files();
        changed[name]["integrity"] = json!("sha384-other");
        assert_ne!(current_key(&runtimes(changed), b"runner").unwrap(), key, "{name}");
    }
    // The tab's runner, which the edge never loads, makes no new snapshot.
    let mut tab_runner = files();
    tab_runner["runner.js"] = json!({"url": "runner-pyodide.js", "integrity": "sha384-tab"});
    assert_eq!(current_key(&runtimes(tab_runner), b"runner").unwrap(), key, "the tab's runner");
    // The same files listed in another order (runtimes.json as another build writes it).
    let reordered = r#"{"pyodide@314": {"files": {
        "policy.wasm": {"url": "policy.wasm", "integrity": "sha384-policy"},
        "pyodide-lock.json": {"url": "vendor/pyodide-lock.json", "integrity": "sha384-lock"},
        "python_stdlib.zip": {"url": "vendor/python_stdlib.zip", "integrity": "sha384-stdlib"},
        "pyodide.asm.wasm": {"url": "vendor/pyodide.asm.wasm", "integrity": "sha384-wasm"}}}}"#;
    assert_eq!(current_key(reordered, b"runner").unwrap(), key);
    // QuickJS is not Python's: its files do not shape the snapshot.
    let other_quickjs = runtimes(files()).replace("sha384-q", "sha384-q2");
    assert_eq!(current_key(&other_quickjs, b"runner").unwrap(), key);
}

#[test]
fn a_page_built_wrong_is_an_error_saying_to_rebuild_it() {
    let cases = [
        ("not json".to_owned(), "not JSON"),
        (json!({"quickjs@1": {"files": {}}}).to_string(), "no pyodide@ runtime"),
        (json!({"pyodide@1/../x": {"files": {}}}).to_string(), "one segment"),
        (json!({"pyodide@314": {}}).to_string(), "no files"),
        (
            json!({"pyodide@314": {"files": {"pyodide.asm.wasm": {"url": "a"}}}}).to_string(),
            "pyodide.asm.wasm is not listed",
        ),
        (json!({"pyodide@314": {"files": {}}}).to_string(), "pyodide.asm.wasm is not listed"),
        (json!({"pyodide@314": {"files": {}}, "pyodide@315": {"files": {}}}).to_string(), "two pyodide@ runtimes"),
    ];
    for (json, says) in cases {
        let err = current_key(&json, b"runner").unwrap_err();
        assert!(err.contains(says) && err.contains("rebuild the page"), "{json}: {err}");
    }
}

#[test]
fn the_seal_matches_a_vector_computed_apart() {
    // HKDF-SHA256 (no salt, info "relay-edge runtime snapshot seal v1") of the seed [7; 32],
    // then HMAC-SHA256 of "<key>\n<sha256>", base64url: Python's hmac and hashlib.
    let seal = Seal::of(&Signer::from_seed(&[7; 32]));
    let key = format!("{PREFIX}pyodide@314/{HEX_A}");
    assert_eq!(seal.mac(&key, HEX_C), "5AgHaeiEwy6g21RVJdVc8MCrHHYCYZonS5wQkK76HRY");
}

#[test]
fn the_seal_refuses_what_it_did_not_seal() {
    let seal = Seal::of(&Signer::from_seed(&[7; 32]));
    let key = format!("{PREFIX}pyodide@314/{HEX_A}");
    let mac = seal.mac(&key, HEX_C);
    assert!(seal.verify(&key, HEX_C, &mac));
    let moved = format!("{PREFIX}pyodide@315/{HEX_A}");
    assert!(!seal.verify(&moved, HEX_C, &mac), "moved to another key");
    assert!(!seal.verify(&key, HEX_A, &mac), "other bytes");
    let other_secret = Seal::of(&Signer::from_seed(&[8; 32]));
    assert!(!other_secret.verify(&key, HEX_C, &mac), "another Worker's key");
    for forged in ["", "not base64!", &mac[..mac.len() - 1], &format!("{mac}A"), "AAAA"] {
        assert!(!seal.verify(&key, HEX_C, forged), "{forged:?}");
    }
    // Whoever can write the bucket but has no key writes some MAC: refused.
    assert!(!seal.verify(&key, HEX_C, &relay_core::capsule::jws::b64url(&[0; 32])));
}

fn snap(id: &str, hex: &str, uploaded_ms: u64) -> (String, u64) {
    (format!("{PREFIX}{id}/{hex}"), uploaded_ms)
}

#[test]
fn other_snapshots_go_a_day_after_the_current_one_was_stored() {
    let current = snap("pyodide@314", HEX_A, NOW - STALE_GRACE_MS);
    let old = snap("pyodide@314", HEX_C, NOW - 30 * STALE_GRACE_MS);
    let old_runtime = snap("pyodide@313", HEX_C, NOW - 30 * STALE_GRACE_MS);
    let young = snap("pyodide@313", HEX_A, NOW - STALE_GRACE_MS + 1);
    let listed = vec![current.clone(), old.clone(), old_runtime.clone(), young];
    let (doomed, sweep) = stale(&listed, &current.0, NOW);
    assert_eq!(doomed, vec![old.0.clone(), old_runtime.0.clone()]);
    assert_eq!((sweep.scanned, sweep.deleted, sweep.kept), (4, 2, 2));
    assert!(sweep.deleted_by_tenant.is_empty(), "no tenant's");

    // The current one stored less than a day ago (a rollout may be under way): all stay.
    let fresh = (current.0.clone(), NOW - STALE_GRACE_MS + 1);
    let (doomed, _) = stale(&[fresh, old.clone()], &current.0, NOW);
    assert!(doomed.is_empty());
    // No current one stored yet (no Python run since the deploy): all stay.
    let (doomed, sweep) = stale(std::slice::from_ref(&old), &current.0, NOW);
    assert!(doomed.is_empty() && sweep.kept == 1);
}

#[test]
fn hostile_keys_are_no_snapshots() {
    for key in [
        format!("{PREFIX}../{HEX_A}"),
        format!("{PREFIX}./{HEX_A}"),
        format!("{PREFIX}/{HEX_A}"),
        format!("{PREFIX}pyodide@314/{HEX_A}/"),
        format!("{PREFIX}pyodide@314/x/{HEX_A}"),
        format!("{PREFIX}pyodide@314/{}", HEX_A.to_uppercase()),
        format!("{PREFIX}pyodide@314/{}", &HEX_A[1..]),
        format!("{PREFIX}pyodide@314/{HEX_A}\n"),
        format!("{PREFIX}py odide/{HEX_A}"),
        format!("{PREFIX}py\\odide/{HEX_A}"),
        format!("runtime-snapshots-old/pyodide@314/{HEX_A}"),
        format!("x{PREFIX}pyodide@314/{HEX_A}"),
        format!("capsules/t/{HEX_A}/capsule.json"),
        format!("layers/{HEX_A}"),
        format!("{PREFIX}{}/{HEX_A}", "p".repeat(65)),
    ] {
        assert!(!is_snapshot_key(&key), "{key:?}");
        let current = snap("pyodide@314", HEX_A, 0);
        let (doomed, _) = stale(&[current.clone(), (key.clone(), 0)], &current.0, NOW);
        assert!(doomed.is_empty(), "{key:?} was to be deleted");
    }
}

proptest! {
    /// Whatever is listed: the current key stays, a key of no snapshot's shape stays, nothing
    /// younger than the grace goes, and the account adds up.
    #[test]
    fn the_sweep_deletes_only_old_snapshots_that_are_not_current(
        keys in prop::collection::vec(("(runtime-snapshots/)?[a-z@./\\\\ -]{0,12}(/[0-9a-fA-F]{62,65})?", 0u64..3 * STALE_GRACE_MS), 0..12),
        current_age in 0u64..3 * STALE_GRACE_MS,
    ) {
        let current = format!("{PREFIX}pyodide@314/{HEX_A}");
        let mut listed: Vec<(String, u64)> = keys.into_iter().map(|(k, age)| (k, NOW - age)).collect();
        listed.push((current.clone(), NOW - current_age));
        let (doomed, sweep) = stale(&listed, &current, NOW);
        prop_assert_eq!(sweep.deleted + sweep.kept, sweep.scanned);
        prop_assert_eq!(sweep.deleted as usize, doomed.len());
        if current_age < STALE_GRACE_MS {
            prop_assert!(doomed.is_empty());
        }
        for key in &doomed {
            prop_assert!(key != &current && is_snapshot_key(key) && key.starts_with(PREFIX));
            let (_, uploaded) = listed.iter().find(|(k, _)| k == key).unwrap();
            prop_assert!(NOW - uploaded >= STALE_GRACE_MS);
        }
    }
}
