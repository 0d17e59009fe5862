//! A run's `/out` files: which paths may be published, where they are kept, and the signed,
//! expiring download URLs.

use proptest::prelude::*;
use relay_core::capsule::jws::{KeySet, Signer};
use relay_core::files::{
    content_type, download_path, download_url, out_path, sign_download, slot, verify_download, PathError, Slot,
    DOWNLOAD_URL_TTL_S, MAX_FILES_PER_RUN,
};
use relay_core::protocol::public_origin;
use std::collections::HashSet;

const NOW: u64 = 1_800_000_000;

fn signer() -> Signer {
    Signer::from_seed(&[42; 32])
}

fn keys() -> KeySet {
    KeySet::from_signers(&[&signer()])
}

/// A signed URL split into (path, exp, sig).
fn parts(url: &str) -> (String, u64, String) {
    let (path, query) = url.split_once('?').unwrap();
    let (exp, sig) = query.strip_prefix("exp=").unwrap().split_once("&sig=").unwrap();
    (path.to_owned(), exp.parse().unwrap(), sig.to_owned())
}

// ---- paths ----

#[test]
fn clean_paths_under_out_are_published() {
    assert_eq!(out_path(&["out", "report.csv"]), Ok("/out/report.csv".into()));
    assert_eq!(out_path(&["out", "a", "b.json"]), Ok("/out/a/b.json".into()));
    assert_eq!(out_path(&["out", "two%20words.txt"]), Ok("/out/two words.txt".into()), "segments are decoded");
    assert_eq!(out_path(&["out", "caf%C3%A9.md"]), Ok("/out/caf\u{e9}.md".into()));
}

#[test]
fn paths_outside_out_are_policy_refusals() {
    for segments in [&["tmp", "x"][..], &["outside", "x"], &["etc", "passwd"], &["out"], &["Out", "x"]] {
        assert!(matches!(out_path(segments), Err(PathError::OutsideOut(_))), "{segments:?}");
    }
    let why = out_path(&["tmp", "x"]).unwrap_err().to_string();
    assert!(why.contains("\"/tmp/x\" is not under /out"), "{why}");
}

#[test]
fn malformed_paths_are_refused_before_anything_else() {
    let long = "a".repeat(256);
    let cases: [&[&str]; 16] = [
        &["out", "a%5c..%5cx"],
        &["out", "a%5C..%5Cx"],
        &["out", "a\\b"],
        &["out", "%0d%0a"],
        &["out", "a%252e%252e"],
        &["out", "x", ""],
        &["out", ".."],
        &["out", "..", "etc"],
        &["out", "."],
        &["out", ""],
        &["out", "a%2Fb"],
        &["out", "%2e%2e"],
        &["out", "a%00"],
        &["out", "bad%zz"],
        &["out", "%ff"],
        &["out", &long],
    ];
    for segments in cases {
        assert!(matches!(out_path(segments), Err(PathError::Malformed(_))), "{segments:?}");
    }
    let deep: Vec<&str> = std::iter::once("out").chain(std::iter::repeat_n("abcdefghij", 100)).collect();
    assert!(matches!(out_path(&deep), Err(PathError::Malformed(why)) if why.contains("1024")));
}

// ---- the count of a run's files ----

#[test]
fn a_new_path_takes_a_slot_until_the_cap_and_a_path_again_replaces() {
    assert_eq!(slot(false, 0), Slot::Take);
    assert_eq!(slot(false, MAX_FILES_PER_RUN - 1), Slot::Take);
    assert_eq!(slot(false, MAX_FILES_PER_RUN), Slot::Full);
    assert_eq!(slot(true, MAX_FILES_PER_RUN), Slot::Replace, "rewriting a published file counts once");
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    /// Uploads decided one at a time (as the relay session's DO decides them), in any order and
    /// with any repeats: never more than the cap published, and a path refused only when full.
    #[test]
    fn uploads_decided_one_at_a_time_never_pass_the_cap(paths in proptest::collection::vec(0u8..80, 0..300)) {
        let mut published = HashSet::new();
        for path in paths {
            match slot(published.contains(&path), published.len()) {
                Slot::Take => prop_assert!(published.insert(path)),
                Slot::Replace => prop_assert!(published.contains(&path)),
                Slot::Full => prop_assert_eq!(published.len(), MAX_FILES_PER_RUN),
            }
            prop_assert!(published.len() <= MAX_FILES_PER_RUN);
        }
    }
}

#[test]
fn files_are_kept_per_tenant_and_run() {
    assert_eq!(relay_core::keys::out_file("t_1", "r_1", "/out/a.txt"), "files/t_1/r_1/out/a.txt");
    assert_eq!(relay_core::keys::out_file("t_1", "r_1", ""), "files/t_1/r_1/", "the run's prefix");
    assert_eq!(download_path("t_1", "r_1", "/out/two words+é.txt"), "/files/t_1/r_1/out/two%20words%2B%C3%A9.txt");
}

// ---- signed URLs ----

#[test]
fn a_signed_url_verifies_until_it_expires() {
    let link = download_url(&signer(), "https://relay.example", "t_1", "r_1", "/out/a b.txt", NOW);
    assert_eq!(link.expires_at, NOW + DOWNLOAD_URL_TTL_S);
    assert_eq!(DOWNLOAD_URL_TTL_S, 3600);
    let relative = link.url.strip_prefix("https://relay.example").expect("absolute, on the origin given");
    let (path, exp, sig) = parts(relative);
    assert_eq!(path, "/files/t_1/r_1/out/a%20b.txt");
    assert_eq!(exp, NOW + 3600);
    assert_eq!(verify_download(&keys(), &path, exp, &sig, NOW), Ok(()));
    assert_eq!(verify_download(&keys(), &path, exp, &sig, exp - 1), Ok(()));
    let expired = verify_download(&keys(), &path, exp, &sig, exp).unwrap_err();
    assert!(expired.contains("expired") && expired.contains("run the code again"), "{expired}");
}

#[test]
fn a_download_url_is_absolute_on_the_origin_it_is_given() {
    for origin in ["http://127.0.0.1:8787", "https://relay.example", "https://relay.example/"] {
        let link = download_url(&signer(), origin, "t_1", "r_1", "/out/a.txt", NOW);
        let url = url::Url::parse(&link.url).expect("an absolute URL");
        assert_eq!(url.origin().ascii_serialization(), origin.trim_end_matches('/'), "{}", link.url);
        assert_eq!(url.path(), "/files/t_1/r_1/out/a.txt");
        let signed = sign_download(&signer(), "t_1", "r_1", "/out/a.txt", NOW + DOWNLOAD_URL_TTL_S);
        assert_eq!(&link.url[link.url.len() - signed.len()..], signed, "the same signed path and query");
    }
}

#[test]
fn a_url_signs_one_path_and_one_expiry() {
    let url = sign_download(&signer(), "t_1", "r_1", "/out/a.txt", NOW + 60);
    let (path, exp, sig) = parts(&url);
    let tampered = |path: &str, exp: u64, sig: &str| {
        let why = verify_download(&keys(), path, exp, sig, NOW).unwrap_err();
        assert!(why.contains("signature does not match"), "{why}");
    };
    tampered("/files/t_1/r_1/out/b.txt", exp, &sig);
    tampered("/files/t_2/r_1/out/a.txt", exp, &sig);
    tampered("/files/t_1/r_2/out/a.txt", exp, &sig);
    tampered(&path, exp + 1, &sig);
    tampered(&path, exp, "");
    tampered(&path, exp, "not base64url!");
    let mut flipped = sig.clone().into_bytes();
    flipped[5] = if flipped[5] == b'A' { b'B' } else { b'A' };
    tampered(&path, exp, std::str::from_utf8(&flipped).unwrap());
    let other_key = Signer::from_seed(&[9; 32]);
    let (_, _, foreign) = parts(&sign_download(&other_key, "t_1", "r_1", "/out/a.txt", NOW + 60));
    tampered(&path, exp, &foreign);
    // An expired URL whose signature was forged says "does not match", not "expired".
    tampered(&path, NOW - 1, &sig);
}

#[test]
fn another_token_signature_of_the_same_key_is_no_download_signature() {
    let jws = signer().sign(b"relay-download-v1\nGET\n/files/t/r/out/a\n9999999999", Some("JWT"));
    let sig = jws.rsplit('.').next().unwrap();
    assert!(verify_download(&keys(), "/files/t/r/out/a", 9_999_999_999, sig, NOW).is_err());
}

#[test]
fn a_rotated_key_set_still_verifies_urls_of_each_key() {
    let (old, new) = (Signer::from_seed(&[1; 32]), Signer::from_seed(&[2; 32]));
    let both = KeySet::from_signers(&[&old, &new]);
    for signer in [&old, &new] {
        let (path, exp, sig) = parts(&sign_download(signer, "t", "r", "/out/x", NOW + 5));
        assert_eq!(verify_download(&both, &path, exp, &sig, NOW), Ok(()));
    }
}

#[test]
fn files_are_served_with_a_type_by_extension() {
    assert_eq!(content_type("/out/a.CSV"), "text/csv; charset=utf-8");
    assert_eq!(content_type("/out/page.html"), "text/html; charset=utf-8");
    assert_eq!(content_type("/out/pic.svg"), "image/svg+xml");
    assert_eq!(content_type("/out/data.json"), "application/json");
    assert_eq!(content_type("/out/noext"), "application/octet-stream");
    assert_eq!(content_type("/out/dir.png/file"), "application/octet-stream", "the file's own name decides");
    assert_eq!(content_type("/out/x.exe"), "application/octet-stream");
}

// ---- the origin download URLs are made on ----

#[test]
fn urls_use_public_url_when_set_else_the_request_origin() {
    assert_eq!(public_origin(None, "http://127.0.0.1:8787"), Ok("http://127.0.0.1:8787".into()));
    assert_eq!(public_origin(Some(""), "http://127.0.0.1:8787"), Ok("http://127.0.0.1:8787".into()));
    for configured in ["https://relay.example.com", "https://relay.example.com/", "HTTPS://Relay.Example.com:443"] {
        assert_eq!(public_origin(Some(configured), "http://internal:8080"), Ok("https://relay.example.com".into()));
    }
    assert_eq!(public_origin(Some("http://10.0.0.1:8080"), "x"), Ok("http://10.0.0.1:8080".into()));
    for bad in [
        "relay.example.com",
        "ftp://relay.example.com",
        "https://relay.example.com/relay",
        "https://u:p@relay.example.com",
        "https://relay.example.com/?a=1",
        "https://relay.example.com/#x",
    ] {
        let why = public_origin(Some(bad), "http://internal").unwrap_err();
        assert!(why.contains("PUBLIC_URL") && why.contains(bad), "{bad}: {why}");
    }
}
