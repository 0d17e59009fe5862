//! The deploy check (`relay_core::deploy`) on wrangler's real dry-run output
//! (`wrangler_dry_run.txt`, wrangler 4.164 on this repository's wrangler.toml) and on output
//! where a binding is missing, of another kind, or the size line is gone or garbled.

use proptest::prelude::*;
use relay_core::deploy::{check, parse, BINDINGS, BUNDLE_MAX_GZIP_KIB};

const REAL: &str = include_str!("wrangler_dry_run.txt");

#[test]
fn the_real_dry_run_passes_and_its_sizes_are_read() {
    let run = parse(REAL).unwrap();
    assert_eq!((run.raw_kib, run.gzip_kib), (3427.03, 1244.33));
    assert!(run.bindings.contains(&("KV_CONFIG".into(), "KV Namespace".into())));
    assert!(run.bindings.contains(&("ASSETS".into(), "Assets".into())));
    assert!(run.bindings.contains(&("LOADER".into(), "Worker Loader".into())));
    // A variable is listed too, and is no binding the check asks for.
    assert!(run.bindings.contains(&("RELAY_VERSION".into(), "Environment Variable".into())));
    check(&run, BUNDLE_MAX_GZIP_KIB).unwrap();
}

#[test]
fn each_missing_binding_is_named() {
    for (name, kind) in BINDINGS {
        let output: String =
            REAL.lines().filter(|l| !l.trim().starts_with(&format!("env.{name} "))).collect::<Vec<_>>().join("\n");
        let problems = check(&parse(&output).unwrap(), BUNDLE_MAX_GZIP_KIB).unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains(name) && problems[0].contains(kind) && problems[0].contains("wrangler.toml"));
    }
}

#[test]
fn a_binding_of_another_kind_is_named() {
    let output = REAL.replace("R2 Bucket", "KV Namespace");
    let problems = check(&parse(&output).unwrap(), BUNDLE_MAX_GZIP_KIB).unwrap_err();
    assert_eq!(
        problems,
        vec!["binding R2_CAPSULES is a KV Namespace, the Worker reads a R2 Bucket: fix its section in wrangler.toml"]
    );
}

#[test]
fn a_bundle_past_the_bound_is_refused_and_at_it_passes() {
    let run = parse(REAL).unwrap();
    let problems = check(&run, 1000.0).unwrap_err();
    assert!(problems[0].contains("1244.33 KiB gzipped, over the bound of 1000 KiB"), "{problems:?}");
    check(&run, 1244.33).unwrap();
}

#[test]
fn output_without_sizes_fails_rather_than_passes() {
    for output in [
        "",
        "✘ [ERROR] Could not resolve \"./index.js\"",
        "Total Upload: lots / gzip: less",
        "Total Upload: 3110.37 KiB",
        "Total Upload: NaN KiB / gzip: NaN KiB",
        "Total Upload: -1 KiB / gzip: -1 KiB",
        "Total Upload: 3110 MiB / gzip: 1146 MiB",
    ] {
        assert!(parse(output).is_err(), "{output:?}");
    }
}

proptest! {
    /// Any text parses or is refused without panicking; what parses has sizes that are numbers.
    #[test]
    fn any_output_is_judged_without_panic(output in "\\PC{0,200}(\nenv\\.[A-Z_]{0,8} ?\\(?[^\n]{0,20}\\)? *[A-Za-z ]{0,12}){0,3}") {
        if let Ok(run) = parse(&output) {
            prop_assert!(run.gzip_kib.is_finite() && run.raw_kib.is_finite());
            let _ = check(&run, BUNDLE_MAX_GZIP_KIB);
        }
    }
}
