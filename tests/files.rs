//! A run's `/out` files: which paths may be published, where they are kept, and the signed,
//! expiring download URLs.

use relay_core::capsule::jws::{KeySet, Signer};
use relay_core::files::{
    content_type, download_path, download_url, object_key, out_path, sign_download, verify_download, PathError,
    DOWNLOAD_URL_TTL_S,
};

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
    let cases: [&[&str]; 10] = [
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

#[test]
fn files_are_kept_per_tenant_and_run() {
    assert_eq!(object_key("t_1", "r_1", "/out/a.txt"), "files/t_1/r_1/out/a.txt");
    assert_eq!(object_key("t_1", "r_1", ""), "files/t_1/r_1/", "the run's prefix");
    assert_eq!(download_path("t_1", "r_1", "/out/two words+é.txt"), "/files/t_1/r_1/out/two%20words%2B%C3%A9.txt");
}

// ---- signed URLs ----

#[test]
fn a_signed_url_verifies_until_it_expires() {
    let link = download_url(&signer(), "t_1", "r_1", "/out/a b.txt", NOW);
    assert_eq!(link.expires_at, NOW + DOWNLOAD_URL_TTL_S);
    assert_eq!(DOWNLOAD_URL_TTL_S, 3600);
    let (path, exp, sig) = parts(&link.url);
    assert_eq!(path, "/files/t_1/r_1/out/a%20b.txt");
    assert_eq!(exp, NOW + 3600);
    assert_eq!(verify_download(&keys(), &path, exp, &sig, NOW), Ok(()));
    assert_eq!(verify_download(&keys(), &path, exp, &sig, exp - 1), Ok(()));
    let expired = verify_download(&keys(), &path, exp, &sig, exp).unwrap_err();
    assert!(expired.contains("expired") && expired.contains("run the code again"), "{expired}");
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
