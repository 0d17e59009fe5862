//! `GET /capsules/<hash>/<file>`: the shapes of both path parts, checked before any storage
//! lookup, against hostile forms (wrong case and length, traversal, encodings, NUL).

use std::collections::BTreeMap;

use proptest::prelude::*;
use relay_core::capsule::address::{check_hash, layer_file, parse_file, CapsuleFile, FILE_RULE, HASH_RULE};
use relay_core::capsule::jws::Signer;
use relay_core::capsule::manifest::Language;
use relay_core::capsule::{build_capsule, CapsuleSpec, Deps};
use relay_core::policy::Policy;

const HASH: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

#[test]
fn a_hash_is_64_lowercase_hex_characters() {
    assert_eq!(check_hash(HASH), Ok(()));
    assert_eq!(check_hash(&"f".repeat(64)), Ok(()));
    let hostile = [
        String::new(),
        HASH.to_uppercase(),
        format!("{}A", &HASH[..63]),
        HASH[..63].to_string(),
        format!("{HASH}0"),
        "a".repeat(1024),
        format!("{}g", &HASH[..63]),
        format!("{}\0", &HASH[..63]),
        format!("{}/", &HASH[..63]),
        format!("..{}", &HASH[..62]),
        format!("%2e%2e{}", &HASH[..58]),
        format!("{}\\", &HASH[..63]),
        format!(" {}", &HASH[..63]),
        // 64 bytes but not 64 hex characters: two-byte letters.
        "é".repeat(32),
    ];
    for hash in hostile {
        assert_eq!(check_hash(&hash), Err(HASH_RULE), "{hash:?}");
    }
}

#[test]
fn a_file_is_the_manifest_or_a_layer_name() {
    assert_eq!(parse_file("capsule.json"), Ok(CapsuleFile::Manifest));
    for layer in ["fs.code.zip", "fs.deps.zip", "fs.a.zip", "fs.x-1.zip", &format!("fs.{}.zip", "a".repeat(32))] {
        assert_eq!(parse_file(layer), Ok(CapsuleFile::Layer(layer)), "{layer}");
    }
    let hostile = [
        "",
        ".",
        "..",
        "%2e%2e",
        "..%2fcapsule.json",
        "fs..zip",
        "fs...zip",
        "fs.../x.zip",
        "fs.%2e%2e.zip",
        "fs.code.zip\0",
        "fs.co\0de.zip",
        "fs.code\\..\\x.zip",
        "fs.code/x.zip",
        "fs.Code.zip",
        "FS.code.zip",
        "fs.code.ZIP",
        "fs.code.zip.json",
        "fs.code_1.zip",
        "fs.code",
        "code.zip",
        "capsule.JSON",
        "capsule.json ",
        "Capsule.json",
        "capsule.json/",
        "layers",
    ];
    for file in hostile {
        assert_eq!(parse_file(file), Err(FILE_RULE), "{file:?}");
    }
    assert_eq!(parse_file(&format!("fs.{}.zip", "a".repeat(33))), Err(FILE_RULE), "an id over 32 characters");
}

#[test]
fn the_rules_say_what_is_accepted() {
    for needle in ["64", "lowercase hex"] {
        assert!(HASH_RULE.contains(needle), "{needle}");
    }
    for needle in ["capsule.json", "fs.<id>.zip", "a-z 0-9"] {
        assert!(FILE_RULE.contains(needle), "{needle}");
    }
}

/// What the builder names is what the route accepts.
#[test]
fn every_built_layer_path_parses_as_a_layer() {
    let spec = CapsuleSpec {
        language: Language::Py,
        code: "import lib".into(),
        entry_argv: Vec::new(),
        env: BTreeMap::new(),
        stdin: None,
        cwd: "/".into(),
        policy: Policy::default(),
        deps: Deps::Files(vec![("lib/__init__.py".into(), b"X = 1".to_vec())]),
    };
    let capsule = build_capsule(spec, &Signer::from_seed(&[7; 32])).unwrap();
    assert_eq!(check_hash(&capsule.hash), Ok(()));
    assert_eq!(capsule.manifest.fs_layers.len(), 2);
    for layer in &capsule.manifest.fs_layers {
        assert_eq!(layer.path, layer_file(&layer.id));
        assert_eq!(parse_file(&layer.path), Ok(CapsuleFile::Layer(layer.path.as_str())));
    }
}

proptest! {
    /// No string with a byte outside the allowed alphabets passes either check.
    #[test]
    fn anything_outside_the_alphabets_is_refused(text in ".{0,80}") {
        let hash_alphabet = text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        prop_assert_eq!(check_hash(&text).is_ok(), hash_alphabet && text.len() == 64);
        let file_alphabet = text.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
        if !file_alphabet {
            prop_assert_eq!(parse_file(&text), Err(FILE_RULE));
        }
    }
}
