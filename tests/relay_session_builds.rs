//! A packaged run's build in the relay session (`relay_session::builds`), on the test platform:
//! the `build` command, presign, spend and finalize with their bookkeeping (grants spent once,
//! nothing signed or recorded before every check passed, the audit row naming the capsule), and
//! the next identical call reusing the build.

// Each test crate uses part of the test backends.
#[allow(dead_code)]
#[path = "support/platform.rs"]
mod platform;
#[allow(dead_code)]
mod support;

use platform::{call_of, caller, run, signer, start, tool_call, with_tabs, Session};
use relay_core::capsule::canonical::sha256_hex;
use relay_core::capsule::jws::KeySet;
use relay_core::capsule::layer::build_layer;
use relay_core::error::ErrorName;
use relay_core::keys;
use relay_core::mcp::{Era, Tool};
use relay_core::packages::grant::UPLOAD_PATH;
use relay_core::packages::UploadGrant;
use relay_core::quota::{answer, Charge, LedgerRequest};
use relay_core::relay_session::runs::{Call, Job};
use relay_core::relay_session::Sql;
use relay_core::run::machine::Input;
use relay_core::stores::put_layer;
use serde_json::{json, Value};

/// A relay session with a tab, and run `run` of a `run_js` call that needs lodash, prepared.
fn packaged(session: &Session, run_id: &str) -> Call {
    let arguments = json!({ "code": "require('lodash')", "npm": { "dependencies": { "lodash": "4.17.21" } } });
    let call = call_of(&**session, run_id, tool_call(Tool::RunJs, arguments, Era::Modern, None));
    start(session, &call);
    call
}

fn layer(files: &[(&str, &str)]) -> Vec<u8> {
    let files: Vec<(String, Vec<u8>)> = files.iter().map(|(p, c)| ((*p).to_owned(), c.as_bytes().to_vec())).collect();
    build_layer(&files).unwrap()
}

fn claim(bytes: &[u8]) -> Value {
    json!({ "id": "deps", "sha256": sha256_hex(bytes), "size": bytes.len() })
}

fn capsule_hash_of(session: &Session, run: &str) -> String {
    let rows = session.platform.sql.rows::<Value>("SELECT capsule_hash FROM runs WHERE run_id = ?", &[run.into()]);
    rows.unwrap()[0]["capsule_hash"].as_str().unwrap().to_owned()
}

/// Presigns `bytes` for run `run` and spends the grant, as the Worker's upload does, storing
/// the bytes; returns the grant.
fn upload(session: &Session, run: &str, bytes: &[u8]) -> UploadGrant {
    let ask = json!({ "layers": [claim(bytes)] }).to_string();
    let grants = session.presign(&caller(), run, ask.as_bytes(), &signer()).expect("grants");
    assert_eq!(grants["grants"][0]["url"], UPLOAD_PATH);
    let token = grants["grants"][0]["grant"].as_str().unwrap();
    let now_s = session.now_ms() / 1000;
    let grant = UploadGrant::verify(token, &KeySet::from_signers(&[&signer()]), now_s).expect("a grant of this key");
    session.spend(&grant).expect("spent once");
    run_ok(put_layer(&session.platform.blobs, &grant.sha256, bytes.to_vec(), Some("t_1"), session.now_ms()));
    grant
}

fn run_ok<E: std::fmt::Debug>(future: impl std::future::Future<Output = Result<(), E>>) {
    run(future).unwrap();
}

#[test]
fn a_build_goes_from_its_command_through_presign_spend_and_finalize_to_a_signed_capsule_and_a_record() {
    let session = with_tabs(&["tab_1"]);
    let call = packaged(&session, "r_1");
    assert_eq!(session.platform.tabs.commands("tab_1"), ["tabs", "build"]);
    let Job::Packaged(job) = call.job.as_ref() else { panic!("a packaged job") };
    assert_eq!(capsule_hash_of(&session, "r_1"), format!("build:{}", job.key));

    let bytes = layer(&[("node_modules/lodash/index.js", "module.exports = 1")]);
    let grant = upload(&session, "r_1", &bytes);
    assert_eq!(session.spend(&grant).unwrap_err().name, ErrorName::GrantSpent);

    let proposal = json!({ "layers": [claim(&bytes)], "resolved": ["lodash@4.17.21"] }).to_string();
    let answer = run(session.finalize(&caller(), "r_1", proposal.as_bytes(), &signer())).expect("finalized");
    assert_eq!(answer["capsuleUrl"], answer["manifestUrl"]);
    let hash = capsule_hash_of(&session, "r_1");
    assert!(answer["manifestUrl"].as_str().unwrap().contains(&hash), "the audit row names the signed capsule");
    let objects = session.platform.blobs.objects.borrow();
    assert!(objects.contains_key(&keys::manifest("t_1", &hash)));
    let record: Value = serde_json::from_slice(&objects[&keys::build_record("t_1", &job.key)]).unwrap();
    assert_eq!(record["resolved"], json!(["lodash@4.17.21"]));
    drop(objects);
    // The build is over: a second finalize finds none.
    let again = run(session.finalize(&caller(), "r_1", proposal.as_bytes(), &signer())).unwrap_err();
    assert_eq!(again.name, ErrorName::NotFound);
}

#[test]
fn presign_spend_and_finalize_refuse_what_the_build_did_not_grant_or_store() {
    let session = with_tabs(&["tab_1"]);
    packaged(&session, "r_1");
    let bytes = layer(&[("node_modules/lodash/index.js", "1")]);
    let ask = json!({ "layers": [claim(&bytes)] }).to_string();
    let nobody = session.presign(&caller(), "r_9", ask.as_bytes(), &signer()).unwrap_err();
    assert_eq!(nobody.name, ErrorName::NotFound);
    assert!(nobody.message.contains("r_9"), "{}", nobody.message);
    let malformed = session.presign(&caller(), "r_1", b"{\"layer\": []}", &signer()).unwrap_err();
    assert_eq!(malformed.name, ErrorName::ValidationError);
    assert!(malformed.message.starts_with("presign: "), "{}", malformed.message);
    // Granted, never spent: finalize does not take the layer.
    session.presign(&caller(), "r_1", ask.as_bytes(), &signer()).unwrap();
    let proposal = json!({ "layers": [claim(&bytes)] }).to_string();
    let unspent = run(session.finalize(&caller(), "r_1", proposal.as_bytes(), &signer())).unwrap_err();
    assert_eq!(unspent.name, ErrorName::LayerNotUploaded);
    // Spent, but the bytes never reached R2.
    let grants = session.presign(&caller(), "r_1", ask.as_bytes(), &signer()).unwrap();
    let token = grants["grants"][0]["grant"].as_str().unwrap();
    let grant = UploadGrant::verify(token, &KeySet::from_signers(&[&signer()]), session.now_ms() / 1000).unwrap();
    session.spend(&grant).unwrap();
    let missing = run(session.finalize(&caller(), "r_1", proposal.as_bytes(), &signer())).unwrap_err();
    assert_eq!(missing.name, ErrorName::LayerNotUploaded);
    assert!(missing.message.contains("not in storage"), "{}", missing.message);
    // R2 failing is a 503 that passes.
    run_ok(put_layer(&session.platform.blobs, &grant.sha256, bytes.clone(), Some("t_1"), session.now_ms()));
    session.platform.blobs.failing.set(true);
    let failing = run(session.finalize(&caller(), "r_1", proposal.as_bytes(), &signer())).unwrap_err();
    assert_eq!((failing.name, failing.status()), (ErrorName::StorageUnavailable, 503));
}

#[test]
fn a_layer_the_page_would_refuse_is_never_signed_nor_recorded_and_the_build_may_try_again() {
    let session = with_tabs(&["tab_1"]);
    let call = packaged(&session, "r_1");
    let Job::Packaged(job) = call.job.as_ref() else { panic!() };
    let bad = layer(&[("app.js", "steal()"), ("node_modules/lodash/index.js", "1")]);
    upload(&session, "r_1", &bad);
    let stored_before = session.platform.blobs.objects.borrow().len();
    let proposal = json!({ "layers": [claim(&bad)] }).to_string();
    let refused = run(session.finalize(&caller(), "r_1", proposal.as_bytes(), &signer())).unwrap_err();
    assert_eq!(refused.name, ErrorName::ValidationError);
    assert!(refused.message.contains("app.js"), "{}", refused.message);
    assert_eq!(session.platform.blobs.objects.borrow().len(), stored_before, "no capsule, no record");
    assert!(!session.platform.blobs.objects.borrow().contains_key(&keys::build_record("t_1", &job.key)));
    assert_eq!(capsule_hash_of(&session, "r_1"), format!("build:{}", job.key));
    // The build is still open: a good layer finalizes it.
    let good = layer(&[("node_modules/lodash/index.js", "1")]);
    upload(&session, "r_1", &good);
    let proposal = json!({ "layers": [claim(&good)] }).to_string();
    assert!(run(session.finalize(&caller(), "r_1", proposal.as_bytes(), &signer())).is_ok());
}

#[test]
fn the_next_identical_call_reuses_the_build_while_its_layer_is_stored() {
    let session = with_tabs(&["tab_1"]);
    let first = packaged(&session, "r_1");
    let Job::Packaged(job) = first.job.as_ref() else { panic!("a packaged job") };
    let bytes = layer(&[("node_modules/lodash/index.js", "1")]);
    upload(&session, "r_1", &bytes);
    let proposal = json!({ "layers": [claim(&bytes)], "resolved": ["lodash@4.17.21"] }).to_string();
    run(session.finalize(&caller(), "r_1", proposal.as_bytes(), &signer())).unwrap();
    session.feed(Input::Cancel { run: "r_1".into(), why: relay_core::run::machine::Cancel::ByClient });

    let record = keys::build_record("t_1", &job.key);
    let recorded = || session.platform.blobs.uploaded.borrow()[&record];
    session.platform.advance(1_000);
    packaged(&session, "r_2");
    assert_eq!(recorded(), session.now_ms(), "reused: recorded again, R2 shows it in use (retention)");
    assert_eq!(session.platform.tabs.commands("tab_1").last().map(String::as_str), Some("capsule"));
    assert!(!capsule_hash_of(&session, "r_2").starts_with("build:"), "the row names the capsule at once");
    let presign = json!({ "layers": [claim(&bytes)] }).to_string();
    assert_eq!(session.presign(&caller(), "r_2", presign.as_bytes(), &signer()).unwrap_err().name, ErrorName::NotFound);
    session.feed(Input::Cancel { run: "r_2".into(), why: relay_core::run::machine::Cancel::ByClient });

    // Its layer gone, the request is built again.
    session.platform.blobs.objects.borrow_mut().remove(&keys::layer(&sha256_hex(&bytes)));
    packaged(&session, "r_3");
    assert_eq!(session.platform.tabs.commands("tab_1").last().map(String::as_str), Some("build"));
}

#[test]
fn a_finalize_whose_capsule_would_pass_the_stored_bytes_is_refused_with_retry_after_and_stores_nothing() {
    let session = with_tabs(&["tab_1"]);
    packaged(&session, "r_1");
    let bytes = layer(&[("node_modules/lodash/index.js", "module.exports = 1")]);
    upload(&session, "r_1", &bytes);
    let mut small = caller();
    small.tenant.defaults.quotas.stored_bytes = 1 << 20;
    let filled = Charge::Store { bytes: (1 << 20) - 10 };
    let request = LedgerRequest { quotas: small.tenant.defaults.quotas, charge: filled };
    answer(&session.platform.ledger, &request, session.now_ms()).unwrap();
    let proposal = json!({ "layers": [claim(&bytes)], "resolved": ["lodash@4.17.21"] }).to_string();
    let refused = run(session.finalize(&small, "r_1", proposal.as_bytes(), &signer())).unwrap_err();
    assert_eq!((refused.name, refused.status()), (ErrorName::QuotaExceeded, 429), "{}", refused.message);
    assert_eq!(refused.retry_after_s, Some(3600), "the 429 says when to retry");
    assert!(refused.message.contains("defaults.quotas.storedBytes"), "{}", refused.message);
    assert!(!session.platform.blobs.objects.borrow().keys().any(|k| k.starts_with("capsules/")), "nothing stored");
}
