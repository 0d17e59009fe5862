//! Capsules: deterministic layers and hashes, size limits, the docs' worked example, and
//! verification that refuses any manifest changed after signing (canonical JSON itself:
//! tests/canonical.rs).

use std::collections::BTreeMap;
use std::io::{Cursor, Write};

use proptest::prelude::*;
use relay_core::capsule::jws::{KeySet, Signer};
use relay_core::capsule::layer::{
    build_layer, check_deps_layer, check_path, read_layer, read_layer_with_limit, DEPS_ROOTS,
};
use relay_core::capsule::limits::{check_sizes, CODE_LAYER_MAX, DEPS_LAYER_MAX, TOTAL_MAX};
use relay_core::capsule::manifest::{Language, PYODIDE_RUNTIME, QUICKJS_RUNTIME};
use relay_core::capsule::memo::{MEMO_BYTES, MEMO_ENTRIES};
use relay_core::capsule::{
    build_capsule, canonical_json, capsule_hash, inline_files, layer_entry, verify_layer, verify_manifest,
    CapsuleError, CapsuleMemo, CapsuleSpec, Deps, INLINE_MAX,
};
use relay_core::policy::Policy;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const MIB: u64 = 1024 * 1024;

fn signer() -> Signer {
    Signer::from_seed(&[7; 32])
}

fn files(list: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
    list.iter().map(|(p, c)| (p.to_string(), c.as_bytes().to_vec())).collect()
}

fn spec(code: &str) -> CapsuleSpec {
    let mut policy = Policy::default();
    policy.network.allowed_domains = vec!["api.github.com".into()];
    CapsuleSpec {
        language: Language::Js,
        code: code.into(),
        entry_argv: vec!["--flag".into()],
        env: BTreeMap::from([("B".into(), "2".into()), ("A".into(), "1".into())]),
        stdin: Some("input".into()),
        cwd: "/".into(),
        policy,
        deps: Deps::None,
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

// ---- layers ---------------------------------------------------------------------------------

#[test]
fn layer_bytes_do_not_depend_on_input_order() {
    let a = files(&[("b.txt", "bee"), ("a/x.js", "x"), ("a/y.js", "y")]);
    let mut b = a.clone();
    b.reverse();
    let (za, zb) = (build_layer(&a).unwrap(), build_layer(&b).unwrap());
    assert_eq!(za, zb);
    assert_eq!(sha256_hex(&za), sha256_hex(&zb));
}

#[test]
fn different_content_gives_a_different_layer_hash() {
    let one = build_layer(&files(&[("a.js", "1")])).unwrap();
    let two = build_layer(&files(&[("a.js", "2")])).unwrap();
    let renamed = build_layer(&files(&[("b.js", "1")])).unwrap();
    assert_ne!(sha256_hex(&one), sha256_hex(&two));
    assert_ne!(sha256_hex(&one), sha256_hex(&renamed));
}

#[test]
fn layer_entries_are_sorted_deflated_dated_1980_mode_0644_without_extra_fields() {
    let zip_bytes = build_layer(&files(&[("z.txt", "zzz"), ("a.txt", "aaa")])).unwrap();
    // First local file header (APPNOTE 4.3.7): it must be the alphabetically first entry.
    let u16_at = |at: usize| u16::from_le_bytes([zip_bytes[at], zip_bytes[at + 1]]);
    assert_eq!(&zip_bytes[..4], b"PK\x03\x04");
    assert_eq!(u16_at(8), 8, "deflate");
    assert_eq!(u16_at(10), 0, "time 00:00:00");
    assert_eq!(u16_at(12), (1 << 5) | 1, "date 1980-01-01");
    assert_eq!(u16_at(28), 0, "no extra field");
    assert_eq!(&zip_bytes[30..35], b"a.txt");
    let mut archive = zip::ZipArchive::new(Cursor::new(&zip_bytes)).unwrap();
    for i in 0..archive.len() {
        let entry = archive.by_index(i).unwrap();
        assert_eq!(entry.unix_mode(), Some(0o100644));
        assert!(entry.extra_data().is_none_or(|d| d.is_empty()));
    }
}

#[test]
fn layers_round_trip_through_read_layer() {
    let input = files(&[("pkg/mod.py", "x = 1\n"), ("entry.py", "import pkg.mod"), ("empty", "")]);
    let read = read_layer(&build_layer(&input).unwrap()).unwrap();
    let mut expected = input.clone();
    expected.sort();
    assert_eq!(read, expected);
}

#[test]
fn bad_layer_paths_are_refused_with_the_reason() {
    let cases = [
        ("", "it is empty"),
        ("/etc/passwd", "starts with \"/\""),
        ("../escape.js", "\"..\" segment"),
        ("a/../../b", "\"..\" segment"),
        ("a/./b", "\".\" segment"),
        ("a//b", "empty segment"),
        ("dir/", "empty segment"),
        ("a\\b", "backslash"),
        ("..\\windows", "backslash"),
        ("nul\0byte", "NUL byte"),
    ];
    for (path, reason) in cases {
        let err = build_layer(&files(&[("ok.js", ""), (path, "x")])).unwrap_err();
        assert!(matches!(&err, CapsuleError::BadPath { path: p, .. } if p == path), "{path:?}: {err:?}");
        assert!(err.to_string().contains(reason), "{path:?}: {err}");
        assert_eq!(err.error_name(), "ValidationError");
    }
    for path in ["a", "a/b/c.js", "..a", "a..", ".hidden/x", "with space/ü.txt"] {
        assert_eq!(check_path(path), Ok(()), "{path:?}");
    }
}

#[test]
fn duplicate_layer_paths_are_refused() {
    let err = build_layer(&files(&[("a.js", "1"), ("b.js", ""), ("a.js", "2")])).unwrap_err();
    assert_eq!(err, CapsuleError::DuplicatePath("a.js".into()));
    assert!(err.to_string().contains("more than once"));
}

/// A zip written by someone else, with entries exactly as given.
fn raw_zip(entries: &[(&str, &[u8])], symlink: bool) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::DEFAULT;
    for (name, content) in entries {
        if symlink {
            zip.add_symlink(*name, "/etc/passwd", options).unwrap();
        } else {
            zip.start_file(*name, options).unwrap();
            zip.write_all(content).unwrap();
        }
    }
    zip.finish().unwrap().into_inner()
}

#[test]
fn read_layer_refuses_escaping_paths_symlinks_duplicates_and_garbage() {
    let escaping = raw_zip(&[("../../evil.sh", b"rm -rf /")], false);
    assert!(matches!(read_layer(&escaping), Err(CapsuleError::BadPath { .. })));
    let absolute = raw_zip(&[("/etc/cron.d/x", b"")], false);
    assert!(matches!(read_layer(&absolute), Err(CapsuleError::BadPath { .. })));
    let link = raw_zip(&[("link", b"")], true);
    assert_eq!(read_layer(&link), Err(CapsuleError::NotAFile("link".into())));
    let err = read_layer(b"definitely not a zip").unwrap_err();
    assert!(matches!(err, CapsuleError::BadZip(_)), "{err:?}");
    assert_eq!(err.error_name(), "ValidationError");
}

#[test]
fn read_layer_caps_inflation_by_the_bytes_actually_inflated() {
    let limit = 64 * 1024;
    let exact = build_layer(&[("zeros".into(), vec![0; limit as usize])]).unwrap();
    assert_eq!(read_layer_with_limit(&exact, limit).unwrap()[0].1.len(), limit as usize);
    let one_over = build_layer(&[("zeros".into(), vec![0; limit as usize + 1])]).unwrap();
    assert_eq!(read_layer_with_limit(&one_over, limit), Err(CapsuleError::UnpackedTooLarge { limit }));
    // A bomb: 8 MiB of zeros is a few KiB zipped; the cap counts across entries.
    let bomb =
        build_layer(&[("a".into(), vec![0; 4 * MIB as usize]), ("b".into(), vec![0; 4 * MIB as usize])]).unwrap();
    assert!(bomb.len() < 64 * 1024);
    let err = read_layer_with_limit(&bomb, 6 * MIB).unwrap_err();
    assert!(err.to_string().contains("more than 6 MiB"), "{err}");
}

// ---- deps layers ----------------------------------------------------------------------------

/// An entry of a hand-written zip: what a hostile tab can put in a central directory.
struct RawEntry<'a> {
    name: &'a [u8],
    extra: Vec<u8>,
    /// Made on Unix with this mode in the high half of the external attributes.
    unix_mode: Option<u32>,
}

fn entry(name: &str) -> RawEntry<'_> {
    RawEntry { name: name.as_bytes(), extra: Vec::new(), unix_mode: None }
}

/// A stored (uncompressed) zip with exactly these entries, each holding its own name, built by
/// hand: no zip library would write most of them.
fn hand_zip(entries: &[RawEntry]) -> Vec<u8> {
    let (mut out, mut central) = (Vec::new(), Vec::new());
    for e in entries {
        let offset = out.len() as u32;
        let header = |signature: u32, central: bool| {
            let mut h = signature.to_le_bytes().to_vec();
            if central {
                let made_by: u16 = if e.unix_mode.is_some() { 0x031e } else { 20 };
                h.extend(made_by.to_le_bytes());
            }
            h.extend([20, 0, 0, 0, 0, 0, 0, 0, 0x21, 0]); // version, flags, stored, time, date
            h.extend(crc32(e.name).to_le_bytes());
            h.extend((e.name.len() as u32).to_le_bytes()); // compressed: the name is the content
            h.extend((e.name.len() as u32).to_le_bytes());
            h.extend((e.name.len() as u16).to_le_bytes());
            h.extend((e.extra.len() as u16).to_le_bytes());
            if central {
                h.extend([0, 0, 0, 0, 0, 0]); // comment length, disk, internal attributes
                h.extend((e.unix_mode.unwrap_or(0) << 16).to_le_bytes());
                h.extend(offset.to_le_bytes());
            }
            h.extend(e.name);
            h.extend(&e.extra);
            h
        };
        out.extend(header(0x0403_4b50, false));
        out.extend(e.name);
        central.extend(header(0x0201_4b50, true));
    }
    let (at, size, count) = (out.len() as u32, central.len() as u32, entries.len() as u16);
    out.extend(central);
    out.extend(0x0605_4b50u32.to_le_bytes());
    out.extend([0, 0, 0, 0]);
    out.extend(count.to_le_bytes());
    out.extend(count.to_le_bytes());
    out.extend(size.to_le_bytes());
    out.extend(at.to_le_bytes());
    out.extend([0, 0]);
    out
}

fn crc32(bytes: &[u8]) -> u32 {
    !bytes.iter().fold(!0u32, |crc, &b| {
        (0..8).fold(crc ^ u32::from(b), |c, _| (c >> 1) ^ (0xedb8_8320 & (c & 1).wrapping_neg()))
    })
}

/// An Info-ZIP Unicode Path extra field (0x7075) naming `name` for an entry called `original`.
fn unicode_path(original: &str, name: &str) -> Vec<u8> {
    let mut field = 0x7075u16.to_le_bytes().to_vec();
    field.extend((5 + name.len() as u16).to_le_bytes());
    field.push(1);
    field.extend(crc32(original.as_bytes()).to_le_bytes());
    field.extend(name.as_bytes());
    field
}

#[test]
fn a_deps_layer_holds_node_modules_and_wheels_only() {
    let packages = build_layer(&files(&[
        ("node_modules/lodash/index.js", "module.exports = {}"),
        ("node_modules/@scope/pkg/index.js", ""),
        ("wheels/six-1.16.0-py2.py3-none-any.whl", "PK"),
    ]))
    .unwrap();
    assert_eq!(check_deps_layer(&packages), Ok(()));
    assert_eq!(check_deps_layer(&hand_zip(&[entry("node_modules/"), entry("wheels/a/")])), Ok(()));
    assert_eq!(DEPS_ROOTS, ["node_modules/", "wheels/"]);

    // The layer: a `main.js` that would stand in for the call's own code.
    let main = build_layer(&files(&[("main.js", "steal()"), ("node_modules/a/index.js", "")])).unwrap();
    let err = check_deps_layer(&main).unwrap_err();
    assert_eq!(err, CapsuleError::OutsideDeps("main.js".into()));
    assert_eq!(err.error_name(), "ValidationError");
    let message = err.to_string();
    assert!(message.contains("\"main.js\", outside node_modules/ and wheels/"), "{message}");
    assert!(message.contains("the tab that built it must leave them out and build again"), "{message}");
    for name in
        ["node_modules", "node_modulesX/a.js", "Node_modules/a.js", "wheels", "wheel/a.whl", "src/", "a/node_modules/b"]
    {
        assert_eq!(check_deps_layer(&hand_zip(&[entry(name)])), Err(CapsuleError::OutsideDeps(name.into())), "{name}");
    }
}

#[test]
fn a_deps_layer_entry_must_be_a_normal_relative_path() {
    let cases = [
        ("node_modules/../main.js", "\"..\" segment"),
        ("node_modules/a/../../main.js", "\"..\" segment"),
        ("/node_modules/a.js", "starts with \"/\""),
        ("node_modules\\..\\main.js", "backslash"),
        ("node_modules//a.js", "empty segment"),
        ("node_modules/./a.js", "\".\" segment"),
        ("node_modules/a\0.js", "NUL byte"),
        ("node_modules/../", "\"..\" segment"),
    ];
    for (name, reason) in cases {
        let err = check_deps_layer(&hand_zip(&[entry("node_modules/ok.js"), entry(name)])).unwrap_err();
        assert!(matches!(&err, CapsuleError::BadPath { .. }), "{name:?}: {err:?}");
        assert!(err.to_string().contains(reason), "{name:?}: {err}");
    }
    let latin1 = RawEntry { name: b"node_modules/caf\xe9.js", extra: Vec::new(), unix_mode: None };
    assert!(check_deps_layer(&hand_zip(&[latin1])).unwrap_err().to_string().contains("not UTF-8"));
    let link = RawEntry { unix_mode: Some(0o120_777), ..entry("node_modules/link") };
    assert_eq!(check_deps_layer(&hand_zip(&[link])), Err(CapsuleError::NotAFile("node_modules/link".into())));
    let file = RawEntry { unix_mode: Some(0o100_644), ..entry("node_modules/file") };
    assert_eq!(check_deps_layer(&hand_zip(&[file])), Ok(()));
    let twice = hand_zip(&[entry("node_modules/a.js"), entry("wheels/b"), entry("node_modules/a.js")]);
    assert_eq!(check_deps_layer(&twice), Err(CapsuleError::DuplicatePath("node_modules/a.js".into())));
}

#[test]
fn a_deps_layer_is_judged_by_the_names_the_page_reads_not_by_extra_fields() {
    // The zip crate takes an Info-ZIP Unicode Path field over the entry's name; the executor
    // page (public/lib/zip.js) reads the name itself, and would run `main.js`.
    let disguised = RawEntry { extra: unicode_path("main.js", "node_modules/a.js"), ..entry("main.js") };
    let zip_bytes = hand_zip(&[disguised]);
    assert_eq!(read_layer(&zip_bytes).unwrap()[0].0, "node_modules/a.js", "what a general zip reader sees");
    assert_eq!(check_deps_layer(&zip_bytes), Err(CapsuleError::OutsideDeps("main.js".into())));
}

#[test]
fn a_deps_layer_that_is_not_a_readable_zip_is_refused() {
    let good = hand_zip(&[entry("node_modules/a.js")]);
    let end = good.len() - 22;
    let mut zip64 = good.clone();
    zip64[end + 10..end + 12].copy_from_slice(&[0xff, 0xff]);
    let mut misplaced = good.clone();
    misplaced[end + 16..end + 20].copy_from_slice(&1u32.to_le_bytes());
    let mut overcounted = good.clone();
    overcounted[end + 10..end + 12].copy_from_slice(&2u16.to_le_bytes());
    let cases: [(&str, &[u8]); 6] = [
        ("empty", b""),
        ("not a zip", b"the deps layer as plain text, long enough to hold an end record"),
        ("zip64", &zip64),
        ("central directory offset wrong", &misplaced),
        ("more entries than written", &overcounted),
        ("cut short", &good[..good.len() - 1]),
    ];
    for (what, bytes) in cases {
        let err = check_deps_layer(bytes).unwrap_err();
        assert!(matches!(err, CapsuleError::BadZip(_)), "{what}: {err:?}");
        assert_eq!(err.error_name(), "ValidationError", "{what}");
    }
}

proptest! {
    /// One entry of any name made of the characters paths break on: accepted exactly when it is
    /// a normal path (a directory's without its `/`) under node_modules/ or wheels/.
    #[test]
    fn a_deps_layer_entry_is_accepted_exactly_when_it_is_a_normal_path_under_a_root(
        root in prop::sample::select(vec!["node_modules/", "wheels/", "", "/", "node_modules", "src/"]),
        rest in "[a./\\\\]{0,8}",
    ) {
        let name = format!("{root}{rest}");
        let expected = check_path(name.strip_suffix('/').unwrap_or(&name)).is_ok() && DEPS_ROOTS.iter().any(|r| name.starts_with(r));
        prop_assert_eq!(check_deps_layer(&hand_zip(&[entry(&name)])).is_ok(), expected, "{:?}", name);
    }

    /// Any bytes, or a valid layer with a few bytes changed: an answer, never a panic.
    #[test]
    fn a_deps_layer_of_any_bytes_gets_an_answer(
        bytes in prop::collection::vec(any::<u8>(), 0..200),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let _ = check_deps_layer(&bytes);
        let mut layer = hand_zip(&[entry("node_modules/a.js"), entry("wheels/b.whl")]);
        for (at, byte) in flips {
            let i = at.index(layer.len());
            layer[i] = byte;
        }
        let _ = check_deps_layer(&layer);
    }
}

// ---- limits ---------------------------------------------------------------------------------

#[test]
fn size_limits_pass_at_the_boundary_and_fail_one_byte_over() {
    assert_eq!((CODE_LAYER_MAX, DEPS_LAYER_MAX, TOTAL_MAX), (2 * MIB, 20 * MIB, 22 * MIB));
    assert_eq!(check_sizes(CODE_LAYER_MAX, DEPS_LAYER_MAX), Ok(()));
    let code = check_sizes(CODE_LAYER_MAX + 1, 0).unwrap_err();
    assert_eq!(code.to_string(), "code layer is 2.0 MiB (2097153 bytes); the limit is 2 MiB (2097152 bytes)");
    let deps = check_sizes(0, DEPS_LAYER_MAX + 1).unwrap_err();
    assert!(deps.to_string().starts_with("deps layer is"), "{deps}");
    assert!(deps.to_string().contains("the limit is 20 MiB (20971520 bytes)"), "{deps}");
    assert_eq!(deps.error_name(), "ValidationError");
}

#[test]
fn size_messages_read_naturally() {
    let err = check_sizes(2 * MIB + MIB / 2, 0).unwrap_err();
    assert_eq!(err.to_string(), "code layer is 2.5 MiB (2621440 bytes); the limit is 2 MiB (2097152 bytes)");
}

#[test]
fn build_capsule_refuses_a_code_layer_over_the_limit() {
    // Pseudo-random text barely compresses, so 3 MiB of it zips to more than 2 MiB.
    let mut state = 1u32;
    let code: String = (0..3 * MIB)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            char::from(b' ' + (state >> 24) as u8 % 94)
        })
        .collect();
    let err = build_capsule(spec(&code), &signer()).unwrap_err();
    assert!(matches!(err, CapsuleError::TooLarge { what: "code layer", .. }), "{err:?}");
    assert!(err.to_string().contains("the limit is 2 MiB"), "{err}");
}

/// The worked example of docs/CAPSULE.md: the doc must show these exact bytes and hash.
#[test]
fn docs_worked_example_matches_the_code() {
    let manifest: relay_core::capsule::Manifest = serde_json::from_value(json!({
        "version": "1",
        "language": "js",
        "runtime": { "id": "quickjs@0.32" },
        "entry": { "path": "/entry.js", "argv": [], "env": { "GREETING": "héllo" }, "cwd": "/" },
        "fsLayers": [{
            "id": "code",
            "sha256": "0000000000000000000000000000000000000000000000000000000000000000",
            "path": "fs.code.zip",
            "size": 128
        }],
        "policy": {
            "network": { "allowedDomains": ["api.github.com"], "deniedDomains": [],
                         "denyIpLiterals": true, "blockPrivateRanges": true,
                         "maxBodyBytes": 5242880, "maxRedirects": 5 },
            "filesystem": { "readonly": ["/"], "writable": ["/tmp", "/out"] },
            "limits": { "timeoutMs": 60000, "memMb": 256, "stdoutBytes": 1048576 }
        },
        "sig": "ignored.for.hashing"
    }))
    .unwrap();
    let unsigned = relay_core::capsule::Manifest { sig: None, ..manifest.clone() };
    let canonical = String::from_utf8(canonical_json(&unsigned).unwrap()).unwrap();
    let hash = capsule_hash(&manifest).unwrap();
    assert_eq!(hash, sha256_hex(canonical.as_bytes()));
    let doc = include_str!("../docs/CAPSULE.md");
    assert!(doc.contains(&canonical), "docs/CAPSULE.md should show:\n{canonical}");
    assert!(doc.contains(&hash), "docs/CAPSULE.md should show the hash {hash}");
}

// ---- building -------------------------------------------------------------------------------

#[test]
fn the_same_spec_builds_byte_identical_capsules() {
    let (a, b) =
        (build_capsule(spec("print()"), &signer()).unwrap(), build_capsule(spec("print()"), &signer()).unwrap());
    assert_eq!(a, b);
    let other = build_capsule(spec("print(2)"), &signer()).unwrap();
    assert_ne!(a.hash, other.hash);
    // The hash names content, not the signing key.
    let other_key = build_capsule(spec("print()"), &Signer::from_seed(&[8; 32])).unwrap();
    assert_eq!(a.hash, other_key.hash);
    assert_ne!(a.manifest_json, other_key.manifest_json);
}

#[test]
fn a_js_capsule_has_the_documented_layout() {
    let capsule = build_capsule(spec("console.log('hi')"), &signer()).unwrap();
    let m = &capsule.manifest;
    assert_eq!((m.version.as_str(), m.language, m.runtime.id.as_str()), ("1", Language::Js, QUICKJS_RUNTIME));
    assert_eq!(QUICKJS_RUNTIME, "quickjs@0.32");
    assert_eq!((m.entry.path.as_str(), m.entry.cwd.as_str()), ("/entry.js", "/"));
    assert_eq!(m.entry.stdin.as_deref(), Some("input"));
    assert_eq!(capsule.layers.len(), 1, "no deps asked for, no deps layer");
    let (code, bytes) = &capsule.layers[0];
    assert_eq!((code.id.as_str(), code.path.as_str(), code.size), ("code", "fs.code.zip", bytes.len() as u64));
    assert_eq!(code.sha256, sha256_hex(bytes));
    assert_eq!(m.fs_layers, vec![code.clone()]);
    assert_eq!(read_layer(bytes).unwrap(), files(&[("entry.js", "console.log('hi')")]));
}

#[test]
fn a_py_capsule_with_deps_has_both_layers() {
    let mut s = spec("import lib");
    s.language = Language::Py;
    s.deps = Deps::Files(files(&[("lib/__init__.py", "X = 1")]));
    let capsule = build_capsule(s, &signer()).unwrap();
    let m = &capsule.manifest;
    assert_eq!((m.runtime.id.as_str(), m.entry.path.as_str()), (PYODIDE_RUNTIME, "/entry.py"));
    assert_eq!(PYODIDE_RUNTIME, "pyodide@314");
    let paths: Vec<_> = m.fs_layers.iter().map(|l| (l.id.as_str(), l.path.as_str())).collect();
    assert_eq!(paths, [("code", "fs.code.zip"), ("deps", "fs.deps.zip")]);
    assert_eq!(read_layer(&capsule.layers[1].1).unwrap(), files(&[("lib/__init__.py", "X = 1")]));
}

#[test]
fn an_uploaded_deps_layer_is_named_in_the_manifest_but_not_stored_again() {
    let uploaded = layer_entry("deps", &"ab".repeat(32), 1234);
    let mut s = spec("import _ from 'lodash'");
    s.deps = Deps::Uploaded(uploaded.clone());
    let capsule = build_capsule(s, &signer()).unwrap();
    assert_eq!(capsule.manifest.fs_layers[1], uploaded);
    assert_eq!(uploaded.path, "fs.deps.zip");
    assert_eq!(capsule.layers.len(), 1, "only the code layer is zipped here");
    let keys = KeySet::from_signers(&[&signer()]);
    assert_eq!(verify_manifest(&capsule.manifest_json, &keys).unwrap(), capsule.manifest);

    let mut s = spec("x");
    s.deps = Deps::Uploaded(layer_entry("deps", &"ab".repeat(32), DEPS_LAYER_MAX + 1));
    let err = build_capsule(s, &signer()).unwrap_err();
    assert!(err.to_string().starts_with("deps layer is"), "{err}");
}

#[test]
fn build_refuses_deps_that_shadow_the_entry_bad_cwd_and_bad_policy() {
    let mut s = spec("x");
    s.deps = Deps::Files(files(&[("entry.js", "evil")]));
    assert!(matches!(build_capsule(s, &signer()), Err(CapsuleError::BadPath { .. })));
    let mut s = spec("x");
    s.cwd = "/tmp/../etc".into();
    assert_eq!(build_capsule(s, &signer()).unwrap_err(), CapsuleError::BadCwd("/tmp/../etc".into()));
    let mut s = spec("x");
    s.policy.network.allowed_domains = vec!["https://api.github.com".into()];
    let err = build_capsule(s, &signer()).unwrap_err();
    assert!(err.to_string().contains("\"https://api.github.com\""), "{err}");
    assert_eq!(err.error_name(), "ValidationError");
}

#[test]
fn the_hash_is_sha256_of_the_signed_payload_and_manifest_json_is_canonical() {
    let capsule = build_capsule(spec("1"), &signer()).unwrap();
    assert_eq!(capsule.hash, capsule_hash(&capsule.manifest).unwrap());
    assert_eq!(capsule.hash.len(), 64);
    let keys = KeySet::from_signers(&[&signer()]);
    let verified = relay_core::capsule::jws::verify(capsule.manifest.sig.as_deref().unwrap(), &keys).unwrap();
    assert_eq!(sha256_hex(&verified.payload), capsule.hash);
    assert_eq!(verified.header["typ"], "relay-capsule+jws");
    let document: Value = serde_json::from_slice(&capsule.manifest_json).unwrap();
    assert_eq!(canonical_json(&document).unwrap(), capsule.manifest_json);
    assert!(document["sig"].is_string());
}

// ---- files inline in the capsule command -----------------------------------------------------

#[test]
fn a_small_capsule_travels_whole_in_its_command() {
    use base64::{engine::general_purpose::STANDARD, Engine};
    let capsule = build_capsule(spec("console.log('inline')"), &signer()).unwrap();
    let inline = inline_files(&capsule).unwrap();
    assert_eq!(inline["manifest"].as_str().unwrap().as_bytes(), capsule.manifest_json.as_slice());
    let (layer, zip) = &capsule.layers[0];
    assert_eq!(STANDARD.decode(inline["layers"][&layer.path].as_str().unwrap()).unwrap(), *zip);
    assert_eq!(inline["layers"].as_object().unwrap().len(), 1);
}

#[test]
fn layers_past_the_inline_budget_are_left_to_fetch() {
    // Random-looking code: its zip is about as big as the code.
    let mut x: u64 = 1;
    let code: String = (0..2 * INLINE_MAX)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            char::from(b'a' + (x >> 59) as u8)
        })
        .collect();
    let capsule = build_capsule(spec(&code), &signer()).unwrap();
    assert!(capsule.layers[0].1.len() > INLINE_MAX);
    let inline = inline_files(&capsule).unwrap();
    assert_eq!(inline["manifest"].as_str().unwrap().as_bytes(), capsule.manifest_json.as_slice());
    assert!(inline["layers"].as_object().unwrap().is_empty(), "the code layer is fetched");
}

// ---- the memo of built capsules --------------------------------------------------------------

#[test]
fn the_memo_gives_what_a_build_gives_for_every_input_and_key() {
    let mut memo = CapsuleMemo::default();
    let other_key = Signer::from_seed(&[8; 32]);
    let mut env_changed = spec("print()");
    env_changed.env.insert("A".into(), "changed".into());
    let mut policy_changed = spec("print()");
    policy_changed.policy.network.allowed_domains.push("example.com".into());
    let inputs = [spec("print()"), spec("print(2)"), env_changed, policy_changed];
    for round in 0..2 {
        for input in &inputs {
            for key in [&signer(), &other_key] {
                let remembered = memo.build(input.clone(), key).unwrap();
                assert_eq!(remembered, build_capsule(input.clone(), key).unwrap(), "round {round}");
            }
        }
    }
    assert_eq!(memo.len(), inputs.len() * 2, "each input and key built once, then remembered");
}

#[test]
fn the_memo_forgets_the_least_recently_used_and_never_an_error() {
    let mut memo = CapsuleMemo::default();
    let first = memo.build(spec("first"), &signer()).unwrap();
    for i in 0..MEMO_ENTRIES {
        memo.build(spec(&format!("f({i})")), &signer()).unwrap();
        memo.build(spec("first"), &signer()).unwrap(); // used again: never the oldest
    }
    assert_eq!(memo.len(), MEMO_ENTRIES);
    assert_eq!(memo.build(spec("first"), &signer()).unwrap(), first);
    assert_eq!(memo.len(), MEMO_ENTRIES);
    let mut bad = spec("x");
    bad.cwd = "relative".into();
    assert!(memo.build(bad.clone(), &signer()).is_err());
    assert!(memo.build(bad, &signer()).is_err());
    assert_eq!(memo.len(), MEMO_ENTRIES);
}

#[test]
fn the_memo_keeps_within_its_byte_budget() {
    let mut memo = CapsuleMemo::default();
    // Random-looking code (no repeats deflate can fold): with its zip, over a fourth of the
    // budget each.
    let big = |seed: u64| {
        let mut x = seed;
        (0..MEMO_BYTES / 6)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                char::from(b'a' + (x >> 59) as u8)
            })
            .collect::<String>()
    };
    for seed in 0..6 {
        memo.build(spec(&big(seed)), &signer()).unwrap();
    }
    assert!((2..=3).contains(&memo.len()), "{} capsules of over a fourth of the budget kept", memo.len());
}

// ---- verification ---------------------------------------------------------------------------

#[test]
fn verify_manifest_accepts_what_build_signed() {
    let capsule = build_capsule(spec("ok"), &signer()).unwrap();
    let keys = KeySet::from_signers(&[&signer()]);
    assert_eq!(verify_manifest(&capsule.manifest_json, &keys).unwrap(), capsule.manifest);
    // Key order and whitespace do not matter: the comparison is on canonical JSON.
    let pretty = serde_json::to_vec_pretty(&capsule.manifest).unwrap();
    assert_eq!(verify_manifest(&pretty, &keys).unwrap(), capsule.manifest);
}

#[test]
fn any_change_to_a_signed_manifest_fails_verification() {
    let capsule = build_capsule(spec("ok"), &signer()).unwrap();
    let keys = KeySet::from_signers(&[&signer()]);
    let original: Value = serde_json::from_slice(&capsule.manifest_json).unwrap();
    type Tamper = fn(&mut Value);
    let tampers: Vec<(&str, Tamper)> = vec![
        ("version", |m| m["version"] = json!("2")),
        ("language", |m| m["language"] = json!("py")),
        ("runtime", |m| m["runtime"]["id"] = json!("quickjs@0.31")),
        ("entry path", |m| m["entry"]["path"] = json!("/other.js")),
        ("argv", |m| m["entry"]["argv"] = json!(["--evil"])),
        ("env", |m| m["entry"]["env"]["A"] = json!("changed")),
        ("cwd", |m| m["entry"]["cwd"] = json!("/tmp")),
        ("stdin removed", |m| drop(m["entry"].as_object_mut().unwrap().remove("stdin"))),
        ("layer sha256", |m| m["fsLayers"][0]["sha256"] = json!("0".repeat(64))),
        ("layer size", |m| m["fsLayers"][0]["size"] = json!(1)),
        ("allowed domain added", |m| {
            m["policy"]["network"]["allowedDomains"].as_array_mut().unwrap().push(json!("evil.com"))
        }),
        ("ip literals allowed", |m| m["policy"]["network"]["denyIpLiterals"] = json!(false)),
        ("writable widened", |m| m["policy"]["filesystem"]["writable"] = json!(["/"])),
        ("timeout raised", |m| m["policy"]["limits"]["timeoutMs"] = json!(600000)),
        ("field added", |m| m["extra"] = json!(1)),
    ];
    for (what, tamper) in tampers {
        let mut document = original.clone();
        tamper(&mut document);
        let err = verify_manifest(&serde_json::to_vec(&document).unwrap(), &keys).unwrap_err();
        assert_eq!(err, CapsuleError::SigMismatch, "{what}");
        assert!(err.to_string().contains("changed after signing"));
    }
}

#[test]
fn verify_manifest_refuses_unknown_keys_missing_sig_and_foreign_tokens() {
    let capsule = build_capsule(spec("ok"), &signer()).unwrap();
    let stranger = Signer::from_seed(&[9; 32]);
    let err = verify_manifest(&capsule.manifest_json, &KeySet::from_signers(&[&stranger])).unwrap_err();
    assert!(matches!(err, CapsuleError::Jws(relay_core::capsule::jws::JwsError::UnknownKid(_))), "{err:?}");

    let keys = KeySet::from_signers(&[&signer()]);
    let mut document: Value = serde_json::from_slice(&capsule.manifest_json).unwrap();
    document.as_object_mut().unwrap().remove("sig");
    let unsigned = serde_json::to_vec(&document).unwrap();
    assert_eq!(verify_manifest(&unsigned, &keys), Err(CapsuleError::MissingSig));

    // The right payload signed as some other kind of token (an attach-token JWT, say).
    let payload = canonical_json(&document).unwrap();
    document["sig"] = json!(signer().sign(&payload, Some("JWT")));
    let err = verify_manifest(&serde_json::to_vec(&document).unwrap(), &keys).unwrap_err();
    assert_eq!(err, CapsuleError::WrongSigType(Some("JWT".into())));

    assert!(matches!(verify_manifest(b"[]", &keys), Err(CapsuleError::BadManifest(_))));
    assert!(matches!(verify_manifest(b"{", &keys), Err(CapsuleError::BadManifest(_))));
}

#[test]
fn verify_layer_checks_size_and_digest() {
    let capsule = build_capsule(spec("ok"), &signer()).unwrap();
    let (layer, bytes) = &capsule.layers[0];
    assert_eq!(verify_layer(layer, bytes), Ok(()));
    let short = &bytes[..bytes.len() - 1];
    assert!(matches!(verify_layer(layer, short), Err(CapsuleError::LayerSize { .. })));
    let mut flipped = bytes.clone();
    flipped[40] ^= 1;
    let err = verify_layer(layer, &flipped).unwrap_err();
    assert!(matches!(err, CapsuleError::LayerDigest { .. }), "{err:?}");
    assert!(err.to_string().contains(&layer.sha256), "{err}");
}

#[test]
fn only_a_zip_writer_failure_is_internal() {
    assert_eq!(CapsuleError::ZipWrite("disk".into()).error_name(), "Internal");
    assert_eq!(CapsuleError::SigMismatch.error_name(), "ValidationError");
}
