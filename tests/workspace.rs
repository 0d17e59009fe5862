//! The workspace's pure rules (`relay_core::workspace`): the root hash as docs/ARCHITECTURE.md
//! defines it, which changes the workspace takes, and `read` / `write` answered as the tab
//! answered them (`public/lib/file-tools.js`).

use proptest::prelude::*;
use relay_core::capsule::canonical::sha256_hex;
use relay_core::error::ErrorName;
use relay_core::workspace::rules::{check_write, directories_above, file_path, Facts, MAX_FILES};
use relay_core::workspace::tools::{read_directory, read_file, written, Mode, ReadArgs, WriteArgs};
use relay_core::workspace::{root, root_of_listing, EMPTY_ROOT};
use serde_json::json;

#[test]
fn the_empty_root_is_the_hash_of_nothing() {
    assert_eq!(EMPTY_ROOT, sha256_hex(b""));
    assert_eq!(root([]), EMPTY_ROOT);
}

#[test]
fn the_root_hashes_one_line_per_file_sorted_by_path_bytes() {
    let (a, b) = (sha256_hex(b"a"), sha256_hex(b"b"));
    // "/tmp/Z" sorts before "/tmp/a" as bytes (a locale would say otherwise).
    let files = [("/tmp/a", a.as_str(), 1), ("/tmp/Z", b.as_str(), 1)];
    let expected = sha256_hex(format!("/tmp/Z\t{b}\t1\n/tmp/a\t{a}\t1\n").as_bytes());
    assert_eq!(root(files), expected);
}

proptest! {
    #[test]
    fn the_root_depends_on_the_files_not_their_order(
        files in proptest::collection::btree_map("/tmp/[a-c]{1,3}", (any::<[u8; 4]>(), 0u64..100), 0..8),
        seed in any::<u64>(),
    ) {
        let files: Vec<(String, String, u64)> =
            files.into_iter().map(|(path, (body, size))| (path, sha256_hex(&body), size)).collect();
        let as_refs = |files: &[(String, String, u64)]| -> String {
            root(files.iter().map(|(p, s, n)| (p.as_str(), s.as_str(), *n)))
        };
        let mut shuffled = files.clone();
        let n = shuffled.len().max(1);
        shuffled.rotate_left(seed as usize % n);
        shuffled.reverse();
        prop_assert_eq!(as_refs(&files), as_refs(&shuffled));
        // Any change of one file's hash, size or path changes the root.
        if let Some(first) = files.first() {
            let mut changed = files.clone();
            changed[0].2 = first.2 + 1;
            prop_assert_ne!(as_refs(&files), as_refs(&changed));
            changed = files.clone();
            changed[0].1 = sha256_hex(b"other");
            prop_assert_ne!(as_refs(&files), as_refs(&changed));
            changed = files.clone();
            changed.remove(0);
            prop_assert_ne!(as_refs(&files), as_refs(&changed));
        }
    }
}

#[test]
fn a_file_path_is_check_paths_shape_under_a_root_and_not_a_root() {
    for good in ["/tmp/a", "/out/x/y.txt", "/host/h", "/mcps/index.json"] {
        assert_eq!(file_path(good), Ok(()), "{good}");
    }
    for (bad, says) in [
        ("/tmp", "is a root"),
        ("/tmp/a/", "ends with \"/\""),
        ("/tmp/../etc", "\"..\""),
        ("/etc/passwd", "outside the workspace"),
        ("tmp/a", "not absolute"),
        ("/tmp/a\tb", "control character"),
        ("/tmp/a\nb", "control character"),
        ("/tmp/a\\b", "backslash"),
        ("/tmp/%2e%2e/x", "percent-encoded"),
        ("/tmp//a", "empty segment"),
    ] {
        let refusal = file_path(bad).expect_err(bad);
        assert_eq!(refusal.name, ErrorName::ValidationError, "{bad}");
        assert!(refusal.message.contains(says), "{bad}: {}", refusal.message);
    }
}

#[test]
fn the_directories_above_a_path_are_its_prefixes_below_the_root() {
    assert_eq!(directories_above("/tmp/a/b/c").collect::<Vec<_>>(), ["/tmp", "/tmp/a", "/tmp/a/b"]);
    assert_eq!(directories_above("/tmp/a").collect::<Vec<_>>(), ["/tmp"]);
}

#[test]
fn a_write_needs_no_file_above_no_files_below_and_room_under_the_cap() {
    let facts = Facts { total_bytes: 90, ..Facts::default() };
    assert_eq!(check_write("/tmp/a", 10, &facts, 100), Ok(()), "exactly at the cap");
    let over = check_write("/tmp/a", 11, &facts, 100).unwrap_err();
    assert_eq!(over.name, ErrorName::OutputLimitExceeded);
    assert!(over.message.contains("101 bytes") && over.message.contains("delete files"), "{}", over.message);
    assert!(over.message.contains("defaults.workspace.maxBytes"), "says who can raise it: {}", over.message);
    // Overwriting counts what the file has now.
    let replacing = Facts { existing: Some(50), total_bytes: 90, ..Facts::default() };
    assert_eq!(check_write("/tmp/a", 60, &replacing, 100), Ok(()));
    let above = Facts { file_above: Some("/tmp/a".into()), ..Facts::default() };
    let refusal = check_write("/tmp/a/b", 1, &above, 100).unwrap_err();
    assert_eq!((refusal.name, refusal.message.contains("/tmp/a is a file")), (ErrorName::ValidationError, true));
    let below = Facts { files_below: 2, ..Facts::default() };
    let refusal = check_write("/tmp/a", 1, &below, 100).unwrap_err();
    assert!(refusal.message.contains("it is a directory (it holds 2 files)"), "{}", refusal.message);
    assert_eq!(check_write("/tmp", 1, &Facts::default(), 100).unwrap_err().name, ErrorName::ValidationError);
}

#[test]
fn a_new_file_needs_room_under_the_count_of_files_an_overwrite_does_not() {
    let full = Facts { total_files: MAX_FILES, ..Facts::default() };
    let refusal = check_write("/tmp/new", 0, &full, 100).unwrap_err();
    assert_eq!(refusal.name, ErrorName::OutputLimitExceeded, "empty files count too");
    assert!(refusal.message.contains(&format!("holds {MAX_FILES} files")) && refusal.message.contains("delete files"));
    let replacing = Facts { existing: Some(0), ..full.clone() };
    assert_eq!(check_write("/tmp/old", 10, &replacing, 100), Ok(()));
    let room = Facts { total_files: MAX_FILES - 1, ..Facts::default() };
    assert_eq!(check_write("/tmp/new", 0, &room, 100), Ok(()));
}

fn read_args(value: serde_json::Value) -> ReadArgs {
    serde_json::from_value(value).unwrap()
}

#[test]
fn a_read_slices_the_file_and_never_cuts_a_character() {
    let bytes = "héllo".as_bytes(); // é is 2 bytes: h(0) é(1,2) l l o
    let whole = read_file(&read_args(json!({ "path": "/tmp/a" })), bytes).unwrap();
    assert_eq!(
        whole,
        json!({ "path": "/tmp/a", "encoding": "utf-8", "size": 6, "offset": 0, "bytesRead": 6, "truncated": false, "content": "héllo" })
    );
    let cut = read_file(&read_args(json!({ "path": "/tmp/a", "maxBytes": 2 })), bytes).unwrap();
    assert_eq!(
        (cut["content"].clone(), cut["bytesRead"].clone(), cut["truncated"].clone()),
        (json!("h"), json!(1), json!(true))
    );
    let b64 =
        read_file(&read_args(json!({ "path": "/tmp/a", "encoding": "base64", "offset": 1, "maxBytes": 2 })), bytes)
            .unwrap();
    assert_eq!(b64["content"], json!("w6k="), "base64 slices bytes exactly");
    let past = read_file(&read_args(json!({ "path": "/tmp/a", "offset": 7 })), bytes).unwrap_err();
    assert_eq!(past.message, "offset 7 is past the end of /tmp/a (6 bytes)");
    let binary = read_file(&read_args(json!({ "path": "/tmp/b" })), &[0xff, 0xfe]).unwrap_err();
    assert!(binary.message.contains("is not UTF-8 text; read it with encoding \"base64\""), "{}", binary.message);
}

#[test]
fn a_read_of_a_directory_lists_files_then_sizes_of_subdirectories() {
    let files = [("/tmp/d/b.txt".to_owned(), 3), ("/tmp/d/a/x".to_owned(), 2), ("/tmp/d/a/y/z".to_owned(), 5)];
    let listing = read_directory(&read_args(json!({ "path": "/tmp/d" })), &files).unwrap();
    assert_eq!(listing["content"], json!("a/\t7\nb.txt\t3"));
    assert_eq!(
        listing["entries"],
        json!([{ "name": "a/", "type": "directory", "size": 7 }, { "name": "b.txt", "type": "file", "size": 3 }])
    );
    let none = read_directory(&read_args(json!({ "path": "/tmp/nothing" })), &files).unwrap_err();
    assert!(none.message.starts_with("no file or directory /tmp/nothing"), "{}", none.message);
    // "/tmp/d2" is not below "/tmp/d".
    let sibling = [("/tmp/d2/x".to_owned(), 1)];
    assert!(read_directory(&read_args(json!({ "path": "/tmp/d" })), &sibling).is_err());
}

#[test]
fn a_write_creates_overwrites_or_appends() {
    let args = |mode: &str, content: &str, encoding: &str| -> WriteArgs {
        serde_json::from_value(json!({ "path": "/tmp/a", "content": content, "mode": mode, "encoding": encoding }))
            .unwrap()
    };
    assert_eq!(written(&args("create", "hi", "utf-8"), None).unwrap(), (b"hi".to_vec(), 2));
    let exists = written(&args("create", "hi", "utf-8"), Some(Vec::new())).unwrap_err();
    assert!(exists.message.contains("already exists; use mode \"overwrite\""), "{}", exists.message);
    assert_eq!(written(&args("overwrite", "aGk=", "base64"), Some(b"old".to_vec())).unwrap(), (b"hi".to_vec(), 2));
    assert_eq!(written(&args("append", "!", "utf-8"), Some(b"hi".to_vec())).unwrap(), (b"hi!".to_vec(), 1));
    assert_eq!(written(&args("append", "x", "utf-8"), None).unwrap(), (b"x".to_vec(), 1));
    assert!(written(&args("create", "***", "base64"), None).unwrap_err().message.contains("not valid base64"));
    let default: WriteArgs = serde_json::from_value(json!({ "path": "/tmp/a", "content": "" })).unwrap();
    assert_eq!(default.mode, Mode::Create);
}

#[test]
fn an_operator_recomputes_the_root_from_a_saved_listing() {
    let (a, b) = (sha256_hex(b"a"), sha256_hex(b"bb"));
    let expected = root([("/tmp/a", a.as_str(), 1), ("/out/b", b.as_str(), 2)]);
    let resource = json!({ "version": 2, "root": expected, "files": [
        { "path": "/tmp/a", "sha256": a, "size": 1, "mtimeMs": 5 }, { "path": "/out/b", "sha256": b, "size": 2 } ] });
    assert_eq!(root_of_listing(&resource.to_string()), Ok(expected.clone()));
    assert_eq!(root_of_listing(&resource["files"].to_string()), Ok(expected.clone()));
    let ndjson = format!("{}\n\n{}\n", resource["files"][1], resource["files"][0]);
    assert_eq!(root_of_listing(&ndjson), Ok(expected));
    assert_eq!(root_of_listing(""), Ok(EMPTY_ROOT.to_owned()));
    let twice = json!([{ "path": "/tmp/a", "sha256": a, "size": 1 }, { "path": "/tmp/a", "sha256": a, "size": 1 }]);
    assert!(root_of_listing(&twice.to_string()).unwrap_err().contains("/tmp/a is listed twice"));
    assert!(root_of_listing("{\"path\": 1}").unwrap_err().starts_with("line 1"));
}
