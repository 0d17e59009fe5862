//! The scheduled sweep's loops (`relay_core::retention::sweep`) over R2 in memory: a capsule or
//! layer stored again between the listing and the delete is kept; a tenant or relay session
//! that fails is skipped and the rest still swept; a capsule stored before it named its layers
//! in metadata names them from its own bytes, so it no longer holds back every layer's sweep;
//! what each tenant stores is summed across pages, kinds and relay sessions, and never in part.

// Each test crate uses part of the test backends.
#[allow(dead_code)]
#[path = "support/platform.rs"]
mod platform;
#[allow(dead_code)]
mod support;

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};

use futures::future::{FutureExt, LocalBoxFuture};
use platform::{call_of, edge_job, run, start, tool_call, with_tabs, MemoryBlobs, Session};
use relay_core::auth::admin::from_admin_json;
use relay_core::auth::Tenant;
use relay_core::keys;
use relay_core::mcp::{Era, Tool};
use relay_core::retention::sweep::{measure_stored, sweep_bodies, sweep_stored, Directory};
use relay_core::retention::{layers_named, Sweep, DAY_MS, LAYER_GRACE_MS};
use relay_core::run::backchannel::parse_batch;
use relay_core::run::machine::Input;
use relay_core::stores::{put_layer, Blobs, Head, Listing, Meta, StorageError};
use serde_json::json;

/// Tenants and relay sessions as KV and the Durable Objects would answer.
#[derive(Default)]
struct Scripted {
    tenants: HashMap<String, Tenant>,
    /// Tenants whose record cannot be read (KV failing).
    unreadable: HashSet<String>,
    listed: Vec<String>,
    /// Relay sessions whose sweep fails (the DO request throws).
    failing: HashSet<String>,
    asked: RefCell<Vec<String>>,
}

fn tenant(id: &str, unused_days: u32) -> Tenant {
    let record = json!({ "id": id, "name": "n", "defaults": { "retention": { "unusedDays": unused_days } } });
    from_admin_json(record).unwrap()
}

impl Directory for Scripted {
    async fn tenant(&self, tenant_id: &str) -> Result<Option<Tenant>, StorageError> {
        if self.unreadable.contains(tenant_id) {
            return Err(StorageError("KV is unavailable (a test said so)".into()));
        }
        Ok(self.tenants.get(tenant_id).cloned())
    }

    async fn relay_sessions(&self) -> Result<Vec<String>, StorageError> {
        Ok(self.listed.clone())
    }

    async fn sweep_bodies(&self, tenant: Tenant, session: &str, _as_of_ms: u64) -> Result<Sweep, String> {
        let name = format!("{}/{session}", tenant.id);
        self.asked.borrow_mut().push(name.clone());
        if self.failing.contains(&name) {
            return Err("the Durable Object threw (a test said so)".into());
        }
        let mut sweep = Sweep::default();
        sweep.count(Some(&tenant.id));
        Ok(sweep)
    }
}

/// R2 where, once `key` was listed, something else happens before the sweep's next call:
/// `meanwhile` (a relay session storing it again).
struct Interleaved<'a> {
    blobs: &'a MemoryBlobs,
    after_listing: &'a str,
    meanwhile: Box<dyn Fn(&'a MemoryBlobs) -> LocalBoxFuture<'a, ()> + 'a>,
    armed: Cell<bool>,
    done: Cell<bool>,
}

impl Interleaved<'_> {
    async fn interleave(&self) {
        if self.armed.get() && !self.done.replace(true) {
            (self.meanwhile)(self.blobs).await;
        }
    }
}

impl Blobs for Interleaved<'_> {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        self.interleave().await;
        self.blobs.get(key).await
    }

    async fn head(&self, key: &str) -> Result<Option<Head>, StorageError> {
        self.interleave().await;
        self.blobs.head(key).await
    }

    async fn put(&self, key: &str, bytes: Vec<u8>, sha256: Option<&str>, meta: Meta<'_>) -> Result<(), StorageError> {
        self.blobs.put(key, bytes, sha256, meta).await
    }

    async fn list(&self, prefix: &str, cursor: Option<String>) -> Result<Listing, StorageError> {
        self.interleave().await;
        let page = self.blobs.list(prefix, cursor).await?;
        if page.objects.iter().any(|(key, _)| key == self.after_listing) {
            self.armed.set(true);
        }
        Ok(page)
    }

    async fn delete(&self, keys: Vec<String>) -> Result<(), StorageError> {
        self.interleave().await;
        self.blobs.delete(keys).await
    }
}

fn exit(session: &Session, run: &str) {
    let line = json!({ "runId": run, "seq": 0, "type": "exit", "exitCode": 0, "usage": { "wallMs": 1 } });
    let events = parse_batch(line.to_string().as_bytes()).unwrap();
    session.feed(Input::Heard { tab: Some("tab_1".into()), events });
}

/// A relay session whose run_js call stored a capsule; the capsule.json's key.
fn stored_capsule() -> (Session, String) {
    let session = with_tabs(&["tab_1"]);
    let call = call_of(&*session, "r_1", tool_call(Tool::RunJs, json!({ "code": "1" }), Era::Modern, None));
    start(&session, &call);
    exit(&session, "r_1");
    let manifest = session.platform.blobs.objects.borrow().keys().find(|k| k.starts_with("capsules/")).cloned();
    (session, manifest.expect("its capsule.json is stored"))
}

fn directory_of(manifest: &str, unused_days: u32) -> Scripted {
    let owner = manifest.split('/').nth(1).unwrap();
    Scripted { tenants: HashMap::from([(owner.to_owned(), tenant(owner, unused_days))]), ..Scripted::default() }
}

#[test]
fn a_capsule_stored_again_between_the_listing_and_the_delete_is_kept() {
    let (session, manifest) = stored_capsule();
    let blobs = &session.platform.blobs;
    let named = blobs.layers.borrow()[&manifest].clone();
    session.platform.advance(8 * DAY_MS); // unused for 8 days: the tenant keeps 7
    let again = manifest.clone();
    let r2 = Interleaved {
        blobs,
        after_listing: &manifest,
        meanwhile: Box::new(move |blobs| {
            let (manifest, named) = (again.clone(), named.clone());
            async move {
                let bytes = blobs.objects.borrow()[&manifest].clone();
                let layers: Vec<&str> = named.split(',').collect();
                blobs.put(&manifest, bytes, None, Meta::naming(&layers)).await.unwrap();
            }
            .boxed_local()
        }),
        armed: Cell::new(false),
        done: Cell::new(false),
    };
    let (stored, problems) = run(sweep_stored(&r2, &directory_of(&manifest, 7), session.now_ms()));
    assert!(r2.done.get(), "the relay session stored it again after the listing");
    assert!(problems.is_empty(), "{problems:?}");
    assert!(blobs.objects.borrow().contains_key(&manifest), "the capsule stored again is still readable");
    assert_eq!((stored.capsules.deleted, stored.capsules.kept), (0, 1), "and counted kept");
    // Its layer too: the capsule stands, naming it.
    let layer = keys::layer(layers_named(&blobs.layers.borrow()[&manifest]).unwrap()[0]);
    assert!(blobs.objects.borrow().contains_key(&layer));
    assert_eq!(stored.layers.deleted, 0);
}

#[test]
fn a_layer_stored_again_between_the_listing_and_the_delete_is_kept() {
    let blobs = MemoryBlobs::default();
    let bytes = b"a layer".to_vec();
    let sha = relay_core::capsule::canonical::sha256_hex(&bytes);
    run(put_layer(&blobs, &sha, bytes.clone(), None, 0)).unwrap();
    let now = 2 * LAYER_GRACE_MS;
    blobs.clock_ms.set(now);
    let key = keys::layer(&sha);
    let r2 = Interleaved {
        blobs: &blobs,
        after_listing: &key,
        meanwhile: Box::new(move |blobs| {
            let (sha, bytes) = (sha.clone(), bytes.clone());
            async move { put_layer(blobs, &sha, bytes, None, now).await.unwrap() }.boxed_local()
        }),
        armed: Cell::new(false),
        done: Cell::new(false),
    };
    let (stored, _) = run(sweep_stored(&r2, &Scripted::default(), now));
    assert!(r2.done.get());
    assert!(blobs.objects.borrow().contains_key(&key), "a capsule made meanwhile may name it");
    assert_eq!((stored.layers.deleted, stored.layers.kept), (0, 1));
}

#[test]
fn a_capsule_unused_and_not_stored_again_is_deleted_with_its_layer() {
    let (session, manifest) = stored_capsule();
    session.platform.advance(8 * DAY_MS);
    let blobs = &session.platform.blobs;
    let (stored, problems) = run(sweep_stored(blobs, &directory_of(&manifest, 7), session.now_ms()));
    assert!(problems.is_empty(), "{problems:?}");
    assert!(!blobs.objects.borrow().contains_key(&manifest));
    assert_eq!((stored.capsules.deleted, stored.layers.deleted), (1, 1));
    assert!(blobs.objects.borrow().keys().all(|k| !k.starts_with("layers/")));
}

#[test]
fn a_tenant_whose_settings_cannot_be_read_keeps_its_capsules_and_the_sweep_goes_on() {
    let (session, manifest) = stored_capsule();
    session.platform.advance(8 * DAY_MS);
    let blobs = &session.platform.blobs;
    let mut directory = directory_of(&manifest, 7);
    directory.unreadable.insert(manifest.split('/').nth(1).unwrap().to_owned());
    let orphan = b"nobody names me".to_vec();
    let sha = relay_core::capsule::canonical::sha256_hex(&orphan);
    run(put_layer(blobs, &sha, orphan, None, 0)).unwrap();
    let (stored, problems) = run(sweep_stored(blobs, &directory, session.now_ms() + LAYER_GRACE_MS));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("its capsules and build records are kept"), "{problems:?}");
    assert!(blobs.objects.borrow().contains_key(&manifest));
    assert_eq!(stored.layers.deleted, 1, "the layers are still swept");
    assert!(!blobs.objects.borrow().contains_key(&keys::layer(&sha)));
}

#[test]
fn one_relay_session_or_tenant_that_fails_does_not_stop_the_others() {
    let directory = Scripted {
        tenants: HashMap::from([("t_1".into(), tenant("t_1", 7)), ("t_3".into(), tenant("t_3", 7))]),
        unreadable: HashSet::from(["t_2".into()]),
        listed: ["t_1:a", "t_1:b", "t_2:a", "t_2:b", "t_3:a"]
            .iter()
            .map(|s| format!("{}{s}", keys::RELAY_SESSION_PREFIX))
            .collect(),
        failing: HashSet::from(["t_1/a".into()]),
        ..Scripted::default()
    };
    let (sweep, problems) = run(sweep_bodies(&directory, 0));
    assert_eq!(*directory.asked.borrow(), ["t_1/a", "t_1/b", "t_3/a"], "t_2 read once, skipped");
    assert_eq!((sweep.scanned, sweep.deleted_by_tenant.len()), (2, 2), "t_1/b and t_3/a swept after t_1/a failed");
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].contains("relay session t_1/a did not sweep its bodies"), "{problems:?}");
    assert!(problems[1].contains("tenant t_2's record"), "{problems:?}");
}

/// A capsule.json stored before capsules named their layers in metadata: under a 3650-day
/// setting it stands for ten years; it no longer holds back the layer sweep.
#[test]
fn a_capsule_stored_before_it_named_its_layers_names_them_from_its_bytes() {
    let (session, manifest) = stored_capsule();
    let blobs = &session.platform.blobs;
    blobs.layers.borrow_mut().remove(&manifest); // as stored before this metadata
    let its_layers: Vec<String> = blobs.objects.borrow().keys().filter(|k| k.starts_with("layers/")).cloned().collect();
    assert!(!its_layers.is_empty());
    let orphan = b"nobody names me".to_vec();
    let orphan_sha = relay_core::capsule::canonical::sha256_hex(&orphan);
    run(put_layer(blobs, &orphan_sha, orphan, None, session.now_ms())).unwrap();
    let as_of = session.now_ms() + 2 * LAYER_GRACE_MS;
    let (stored, problems) = run(sweep_stored(blobs, &directory_of(&manifest, 3650), as_of));
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(stored.unnamed(), 0, "its layers read from its capsule.json");
    assert!(!blobs.objects.borrow().contains_key(&keys::layer(&orphan_sha)), "what nothing names goes");
    for layer in &its_layers {
        assert!(blobs.objects.borrow().contains_key(layer), "what it names stays: {layer}");
    }
    assert!(blobs.objects.borrow().contains_key(&manifest));
    // A capsule.json that cannot be read as one still holds the layers back (nothing is lost).
    blobs.objects.borrow_mut().insert(manifest.clone(), b"not json".to_vec());
    let (stored, _) = run(sweep_stored(blobs, &directory_of(&manifest, 3650), as_of));
    assert_eq!((stored.unnamed(), stored.layers.deleted), (1, 0));
}

/// Code too large and random to be sent inline in the capsule command (its layer is read
/// from R2), different for each `seed`.
fn large_code(seed: &str) -> String {
    let mut hex = relay_core::capsule::canonical::sha256_hex(seed.as_bytes());
    let mut code = String::from("// ");
    while code.len() < 200_000 {
        hex = relay_core::capsule::canonical::sha256_hex(hex.as_bytes());
        code.push_str(&hex);
    }
    code
}

/// The note that a capsule is stored repairs itself: an edge run that finds its capsule gone
/// (swept while the relay session remembered storing it) makes the next call store it again.
#[test]
fn a_capsule_found_missing_by_the_edge_is_stored_again_by_the_next_call() {
    let session = with_tabs(&["tab_1"]);
    let code = large_code("a");
    let call = |run: &str| {
        let call = call_of(&*session, run, tool_call(Tool::RunJs, json!({ "code": code }), Era::Modern, None));
        start(&session, &call);
    };
    call("r_1");
    exit(&session, "r_1");
    let blobs = &session.platform.blobs;
    let swept: Vec<String> = blobs
        .objects
        .borrow()
        .keys()
        .filter(|k| k.starts_with("capsules/") || k.starts_with("layers/"))
        .cloned()
        .collect();
    run(blobs.delete(swept.clone())).unwrap(); // the sweep, racing a store the note remembers
    call("r_2");
    let (name, message) = edge_job(&session, "r_2").expect_err("its capsule is gone");
    assert!(message.contains("is not in storage"), "{name:?}: {message}");
    exit(&session, "r_2");
    call("r_3");
    for key in &swept {
        assert!(blobs.objects.borrow().contains_key(key), "stored again: {key}");
    }
    edge_job(&session, "r_3").expect("the edge reads it");
}

/// The same for a tab: a run that ends `Internal` (the page's "could not fetch capsule") makes
/// the next call store its capsule again.
#[test]
fn a_capsule_a_tab_could_not_fetch_is_stored_again_by_the_next_call() {
    let session = with_tabs(&["tab_1"]);
    let call = |run: &str| {
        let call = call_of(&*session, run, tool_call(Tool::RunJs, json!({ "code": "1" }), Era::Modern, None));
        start(&session, &call);
    };
    call("r_1");
    exit(&session, "r_1");
    let blobs = &session.platform.blobs;
    let manifest = blobs.objects.borrow().keys().find(|k| k.starts_with("capsules/")).cloned().unwrap();
    run(blobs.delete(vec![manifest.clone()])).unwrap(); // the sweep, racing a store the note remembers
    call("r_2");
    let message = "could not fetch capsule: GET /capsules/…/capsule.json: NotFound: no capsule";
    let line = json!({ "runId": "r_2", "seq": 0, "type": "exit", "exitCode": 1, "usage": { "wallMs": 0 },
        "error": { "name": "Internal", "message": message } });
    session.feed(Input::Heard { tab: Some("tab_1".into()), events: parse_batch(line.to_string().as_bytes()).unwrap() });
    call("r_3");
    assert!(blobs.objects.borrow().contains_key(&manifest), "stored again");
}

/// The bytes `blobs` holds for each of `tenants`, as the sweep measures them (at R2's clock).
fn measured(blobs: &MemoryBlobs, tenants: &[&str]) -> Result<Vec<(String, u64)>, StorageError> {
    let ids: Vec<String> = tenants.iter().map(|id| id.to_string()).collect();
    Ok(futures::executor::block_on(measure_stored(blobs, &ids, blobs.clock_ms.get()))?.into_iter().collect())
}

#[test]
fn a_layer_uploaded_and_never_named_counts_to_its_uploader_while_the_sweep_keeps_it() {
    let blobs = MemoryBlobs::default();
    let layer = vec![7u8; 50_000];
    let sha = relay_core::capsule::canonical::sha256_hex(&layer);
    // Uploaded under a build grant whose finalize never comes: the sweep keeps it a day.
    run(put_layer(&blobs, &sha, layer, Some("ta"), 0)).unwrap();
    assert_eq!(measured(&blobs, &["ta", "tb"]).unwrap(), vec![("ta".to_string(), 50_000), ("tb".into(), 0)]);
    blobs.clock_ms.set(LAYER_GRACE_MS - 1);
    assert_eq!(measured(&blobs, &["ta"]).unwrap(), vec![("ta".to_string(), 50_000)], "kept, so counted");
    // Named by another tenant's build record: it pays, the uploader no longer does (once each).
    let record = "builds/tb/k.json".to_string();
    blobs.objects.borrow_mut().insert(record.clone(), vec![0; 20]);
    blobs.layers.borrow_mut().insert(record.clone(), sha.clone());
    assert_eq!(measured(&blobs, &["ta", "tb"]).unwrap(), vec![("ta".to_string(), 0), ("tb".into(), 20 + 50_000)]);
    // Unnamed past its grace, the sweep deletes it: nobody's.
    blobs.objects.borrow_mut().remove(&record);
    blobs.clock_ms.set(LAYER_GRACE_MS);
    assert_eq!(measured(&blobs, &["ta"]).unwrap(), vec![("ta".to_string(), 0)]);
}

#[test]
fn a_capsule_stored_before_it_named_its_layers_counts_them_from_its_bytes() {
    let (session, manifest) = stored_capsule();
    let blobs = &session.platform.blobs;
    let owner = manifest.split('/').nth(1).unwrap().to_owned();
    let all = measured(blobs, &[&owner]).unwrap();
    let layers: u64 =
        blobs.objects.borrow().iter().filter(|(k, _)| k.starts_with("layers/")).map(|(_, b)| b.len() as u64).sum();
    assert!(layers > 0);
    assert_eq!(all, vec![(owner.clone(), blobs.objects.borrow()[&manifest].len() as u64 + layers)]);
    blobs.layers.borrow_mut().remove(&manifest); // as stored before this metadata
    assert_eq!(measured(blobs, &[&owner]).unwrap(), all, "its layers read from its capsule.json");
    // One that cannot be read counts its own bytes and no layers: the measurement still stands.
    blobs.unreadable.borrow_mut().insert(manifest.clone());
    let own = blobs.objects.borrow()[&manifest].len() as u64;
    assert_eq!(measured(blobs, &[&owner]).unwrap(), vec![(owner.clone(), own)]);
}

#[test]
fn what_each_tenant_stores_is_summed_across_pages_and_kinds_and_layers_count_to_the_tenants_naming_them() {
    let blobs = MemoryBlobs::default();
    let hash = "a".repeat(64);
    let put = |key: String, size: usize| {
        blobs.objects.borrow_mut().insert(key, vec![0; size]);
    };
    put(format!("capsules/ta/{hash}/capsule.json"), 100);
    put("builds/ta/k1.json".into(), 20);
    for i in 0..7 {
        put(format!("files/ta/run_{i}/out/f.txt"), 1_000); // crosses pages of 3
    }
    put(format!("workspace/ta/s1/{hash}"), 5_000);
    put(format!("workspace/ta/s2/{hash}"), 5_000); // each relay session keeps its own bodies
    put(format!("workspace/tab/s1/{hash}"), 7); // a tenant whose id starts like another's
    put(format!("layers/{hash}"), 1 << 20); // named by no capsule nor build record: nobody's
    put("files/gone/run_1/out/f.txt".into(), 9); // a tenant being deleted: not asked for
    let expect = vec![("ta".to_string(), 100 + 20 + 7_000 + 10_000), ("tab".into(), 7), ("tb".into(), 0)];
    assert_eq!(measured(&blobs, &["ta", "tab", "tb"]).unwrap(), expect);
    // An object deleted is gone from the next measurement.
    blobs.objects.borrow_mut().retain(|key, _| !key.starts_with("files/ta/"));
    assert_eq!(measured(&blobs, &["ta"]).unwrap(), vec![("ta".to_string(), 10_120)]);
    // A layer counts once to each tenant whose capsules or build records name it: ta's capsule
    // and build record name the code and deps layers, tb's capsule the deps layer only.
    let (code, deps) = ("c".repeat(64), "d".repeat(64));
    put(format!("layers/{code}"), 300);
    put(format!("layers/{deps}"), 4_000);
    let named = |key: String, layers: &[&str]| {
        blobs.layers.borrow_mut().insert(key, layers.join(","));
    };
    named(format!("capsules/ta/{hash}/capsule.json"), &[&code, &deps]);
    named("builds/ta/k1.json".into(), &[&deps]);
    put(format!("capsules/tb/{hash}/capsule.json"), 50);
    named(format!("capsules/tb/{hash}/capsule.json"), &[&deps]);
    let expect = vec![("ta".to_string(), 10_120 + 300 + 4_000), ("tb".into(), 50 + 4_000)];
    assert_eq!(measured(&blobs, &["ta", "tb"]).unwrap(), expect);
    // A listing that fails gives no figure at all, rather than a part of one.
    blobs.failing.set(true);
    assert!(measured(&blobs, &["ta"]).is_err());
}
