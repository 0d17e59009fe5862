//! Canonical JSON: the shared table of cases (tests/canonical_cases.json, which the page's
//! canonicalizer is held to as well in miniflare-tests/runner.test.mjs), its stability, and
//! what the rule on integers means for building a capsule.

use std::collections::BTreeMap;

use proptest::prelude::*;
use relay_core::capsule::canonical::MAX_SAFE_INTEGER;
use relay_core::capsule::jws::Signer;
use relay_core::capsule::{build_capsule, canonical_json, CapsuleError};
use relay_core::policy::Policy;
use relay_core::run::args::capsule_spec;
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Deserialize)]
struct Table {
    cases: Vec<Case>,
}

/// One case: `json` gives either exactly `canonical` or an error containing `refused`.
#[derive(Deserialize)]
struct Case {
    name: String,
    json: String,
    canonical: Option<String>,
    refused: Option<String>,
}

/// As verify_manifest reads capsule.json: parsed into a `Value`, then written canonically.
fn canonical_of_text(text: &str) -> Result<String, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let bytes = canonical_json(&value).map_err(|e| e.to_string())?;
    Ok(String::from_utf8(bytes).expect("canonical JSON is UTF-8"))
}

#[test]
fn the_shared_table_of_cases() {
    let table: Table = serde_json::from_str(include_str!("canonical_cases.json")).unwrap();
    assert!(table.cases.len() >= 20, "the table was not read whole");
    for case in &table.cases {
        match (canonical_of_text(&case.json), &case.canonical, &case.refused) {
            (Ok(out), Some(expected), None) => assert_eq!(&out, expected, "{}", case.name),
            (Err(why), None, Some(words)) => assert!(why.contains(words.as_str()), "{}: {why}", case.name),
            (got, _, _) => {
                panic!("{}: got {got:?}; the table says {:?} / {:?}", case.name, case.canonical, case.refused)
            }
        }
    }
}

#[test]
fn typed_values_follow_the_same_rule() {
    assert_eq!(canonical_json(&[MAX_SAFE_INTEGER]).unwrap(), b"[9007199254740991]");
    let err = canonical_json(&BTreeMap::from([("n", MAX_SAFE_INTEGER + 1)])).unwrap_err();
    assert!(err.to_string().contains("9007199254740992 is beyond ±(2^53 - 1), at /n"), "{err}");
}

/// A tenant stored before its limits were bounded can hold any u64: building from one past
/// 2^53 - 1 is an error naming the field, not a panic (the bound refuses it before canonical
/// JSON would).
#[test]
fn a_capsule_holding_an_integer_past_2_53_is_refused_when_built() {
    let mut tenant = Policy::default();
    tenant.network.max_body_bytes = 1 << 53;
    let spec = capsule_spec("js", &json!({ "code": "console.log(1)" }), &tenant).unwrap();
    let err = build_capsule(spec, &Signer::from_seed(&[7; 32])).unwrap_err();
    assert!(matches!(err, CapsuleError::BadPolicy(_)), "{err:?}");
    assert!(err.to_string().contains("network.maxBodyBytes is 9007199254740992"), "{err}");
}

proptest! {
    #[test]
    fn canonical_json_is_stable_under_reparsing(value in arb_json()) {
        let once = canonical_json(&value).unwrap();
        let reparsed: Value = serde_json::from_slice(&once).unwrap();
        prop_assert_eq!(&reparsed, &value);
        prop_assert_eq!(canonical_json(&reparsed).unwrap(), once);
    }
}

/// JSON that canonical JSON holds: integers within ±(2^53 - 1), any strings, nested.
fn arb_json() -> impl Strategy<Value = Value> {
    let max = MAX_SAFE_INTEGER as i64;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-max..=max).prop_map(Value::from),
        prop_oneof![Just(-max), Just(max), Just(0)].prop_map(Value::from),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(any::<String>(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}
