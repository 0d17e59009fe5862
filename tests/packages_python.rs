//! The rules of a Python dependency build (`relay_core::packages::python`): PEP 440 versions
//! and specifiers, PEP 508 requirements and markers, wheel tags for the Pyodide runtime (checked
//! against what `packaging` and Pyodide itself report), the Pyodide lock, and the resolver,
//! driven here over made-up indexes as the build worker drives it over real ones.

use std::collections::BTreeMap;

use proptest::prelude::*;
use relay_core::packages::python::lock::Lock;
use relay_core::packages::python::marker::Marker;
use relay_core::packages::python::metadata::CoreMetadata;
use relay_core::packages::python::resolve::{resolve, Known, Step, MAX_DEPTH};
use relay_core::packages::python::{LockInfo, Requirement, Runtime, SpecifierSet, Version, WheelName};
use serde_json::{json, Value};

fn v(text: &str) -> Version {
    Version::parse(text).unwrap_or_else(|e| panic!("{e}"))
}

fn info() -> LockInfo {
    LockInfo {
        python: "3.14.2".into(),
        abi_version: "2026_0".into(),
        platform: "emscripten_5_0_3".into(),
        arch: "wasm32".into(),
    }
}

fn runtime() -> Runtime {
    Runtime::new(info()).unwrap()
}

// ---- versions -------------------------------------------------------------------------------

#[test]
fn versions_normalize_as_pep_440_says() {
    for (written, normal) in [
        ("1.0", "1.0"),
        ("v1.0", "1.0"),
        ("1.0-RC_1", "1.0rc1"),
        ("1.0.alpha.2", "1.0a2"),
        ("1.0c1", "1.0rc1"),
        ("1.0preview3", "1.0rc3"),
        ("1.0-1", "1.0.post1"),
        ("1.0.rev", "1.0.post0"),
        ("1.0-r4", "1.0.post4"),
        ("1.0dev", "1.0.dev0"),
        ("2!1.0.post2.dev3+Ubuntu-1", "2!1.0.post2.dev3+ubuntu.1"),
        (" 2.9.0.post0\n", "2.9.0.post0"),
    ] {
        assert_eq!(v(written).to_string(), normal, "{written:?}");
    }
    for bad in ["", "1.", ".1", "1..0", "a1", "1.0+", "1.0+a..b", "1 .0", "1.0-", "1.0.post-", &"9".repeat(200)] {
        assert!(Version::parse(bad).is_err(), "{bad:?} parsed");
    }
}

#[test]
fn versions_order_as_pep_440_says() {
    // From PEP 440's "Summary of permitted suffixes and relative ordering", one sorted list.
    let sorted = [
        "1.0.dev456",
        "1.0a1",
        "1.0a2.dev456",
        "1.0a12.dev456",
        "1.0a12",
        "1.0b1.dev456",
        "1.0b2",
        "1.0b2.post345.dev456",
        "1.0b2.post345",
        "1.0rc1.dev456",
        "1.0rc1",
        "1.0",
        "1.0+abc.5",
        "1.0+abc.7",
        "1.0+5",
        "1.0.post456.dev34",
        "1.0.post456",
        "1.0.15",
        "1.1.dev1",
        "1!0.1",
    ];
    for pair in sorted.windows(2) {
        assert!(v(pair[0]) < v(pair[1]), "{} < {}", pair[0], pair[1]);
    }
    assert_eq!(v("1.0"), v("1.0.0.0"));
    assert_ne!(v("1.0"), v("1.0+local"));
}

#[test]
fn specifiers_match_as_packaging_does() {
    for (spec, yes, no) in [
        (">=1.6", &["1.6", "1.6.post1", "2.0", "1.7rc1"][..], &["1.5.9", "1.6rc1", "1.6.dev0"][..]),
        ("<1.7", &["1.6.9", "1.6.post3"], &["1.7", "1.7rc1", "1.7.dev0", "1.8"]),
        ("<1.7rc2", &["1.7rc1"], &["1.7rc2"]),
        (">1.7", &["1.7.1", "1.8"], &["1.7", "1.7.post1", "1.7+local"]),
        (">1.7.post2", &["1.7.post3"], &["1.7.post2"]),
        ("~=2.2", &["2.2", "2.3", "2.9.1"], &["2.1", "3.0"]),
        ("~=1.4.5", &["1.4.5", "1.4.9"], &["1.5.0", "1.4.4"]),
        ("==1.4.*", &["1.4", "1.4.0", "1.4.7", "1.4.7.post1", "1.4rc1"], &["1.5", "1.40"]),
        ("!=1.4.*", &["1.5", "1.3.9"], &["1.4.2"]),
        ("==1.0", &["1.0", "1.0.0", "1.0+local"], &["1.0.1", "1.0.post1"]),
        ("==1.0+local", &["1.0+local"], &["1.0", "1.0+other"]),
        ("<=2.0", &["2.0", "2.0+x", "1.9"], &["2.0.post1"]),
        ("===1.0", &["1.0"], &["1.0.0"]),
    ] {
        let set = SpecifierSet::parse(spec).unwrap();
        for version in yes {
            assert!(set.contains(&v(version)), "{spec} should contain {version}");
        }
        for version in no {
            assert!(!set.contains(&v(version)), "{spec} should not contain {version}");
        }
    }
    assert!(SpecifierSet::parse(">=1.6, <2").unwrap().contains(&v("1.9")));
    for bad in ["~=1", ">=1.0.*", "==1.0rc1.*", "<1.0+local", "=>1.0", ">=", "1.0", "==1.0 beta"] {
        assert!(SpecifierSet::parse(bad).is_err(), "{bad:?} parsed");
    }
}

proptest! {
    #[test]
    fn a_version_reads_back_as_itself(
        epoch in 0u64..3, release in prop::collection::vec(0u64..30, 1..5),
        pre in prop::option::of((0usize..3, 0u64..5)), post in prop::option::of(0u64..5),
        dev in prop::option::of(0u64..5), local in prop::option::of("[a-z0-9]{1,4}(\\.[a-z0-9]{1,4}){0,2}"),
    ) {
        let mut text = format!("{epoch}!{}", release.iter().map(u64::to_string).collect::<Vec<_>>().join("."));
        if let Some((kind, n)) = pre { text += &format!("{}{n}", ["a", "b", "rc"][kind]); }
        if let Some(n) = post { text += &format!(".post{n}"); }
        if let Some(n) = dev { text += &format!(".dev{n}"); }
        if let Some(local) = &local { text += &format!("+{local}"); }
        let version = Version::parse(&text).unwrap();
        let again = Version::parse(&version.to_string()).unwrap();
        prop_assert_eq!(&again, &version);
        prop_assert_eq!(again.to_string(), version.to_string());
        // A specifier naming the version matches it.
        let exact = SpecifierSet::parse(&format!("=={version}")).unwrap();
        prop_assert!(exact.contains(&version));
        let at_least = SpecifierSet::parse(&format!(">={}", version.public())).unwrap();
        prop_assert!(at_least.contains(&version));
    }

    #[test]
    fn hostile_text_never_panics_the_parsers(text in "\\PC{0,80}") {
        let _ = Version::parse(&text);
        let _ = SpecifierSet::parse(&text);
        let _ = Requirement::parse(&text);
        let _ = Marker::parse(&text);
        let _ = WheelName::parse(&text);
        let _ = CoreMetadata::parse(&text);
    }

    #[test]
    fn hostile_markers_of_marker_words_never_panic(words in prop::collection::vec(
        prop::sample::select(vec!["(", ")", "and", "or", "not", "in", "==", "<", "~=", "===", "'3.8'", "\"x\"", "python_version", "extra", "sys_platform", " "]), 0..24)
    ) {
        let text = words.join(" ");
        if let Ok(marker) = Marker::parse(&text) {
            let _ = marker.evaluate(&runtime().environment(), "x");
        }
    }
}

// ---- requirements and markers -----------------------------------------------------------------

#[test]
fn requirements_read_names_extras_specifiers_and_markers() {
    let r = Requirement::parse("Requests[SOCKS, security] (>=2.31,<3) ; python_version >= '3.8'").unwrap();
    assert_eq!((r.name.as_str(), r.key().as_str()), ("Requests", "requests"));
    assert_eq!(r.extras, ["socks", "security"]);
    assert_eq!(r.specifiers.to_string(), ">=2.31,<3");
    assert_eq!(r.to_string(), "Requests[socks,security]>=2.31,<3");
    assert!(r.applies(&runtime().environment(), &[]));
    assert_eq!(Requirement::parse("zope.interface").unwrap().key(), "zope-interface");
    for (bad, why) in [
        ("pkg @ https://example.com/pkg.whl", "URL requirement"),
        ("-pkg", "is not a project name"),
        ("pkg[", "without its \"]\""),
        ("pkg (>=1", "without its \")\""),
        ("pkg >=1 ; python_version ~ '3'", "expected a comparison"),
        ("pkg ; os_nam == 'x'", "is not a marker variable"),
        ("pkg ; 'a' == 'b'", "compares two strings"),
    ] {
        let error = Requirement::parse(bad).unwrap_err();
        assert!(error.contains(why), "{bad:?}: {error}");
    }
}

#[test]
fn markers_evaluate_for_pyodide() {
    let env = runtime().environment();
    for (marker, expected) in [
        ("sys_platform == 'emscripten'", true),
        ("sys_platform == \"win32\"", false),
        ("platform_machine == 'wasm32' and platform_system == 'Emscripten'", true),
        ("python_version >= '3.8'", true),
        ("python_version < '3.10'", false),
        ("python_full_version >= '3.14.1'", true),
        ("'3.10' < python_version", true),
        ("os_name == 'nt' or (implementation_name == 'cpython' and platform_python_implementation == 'CPython')", true),
        ("sys_platform != 'emscripten' and python_version >= '3'", false),
        ("'emscripten' in sys_platform", true),
        ("sys_platform not in 'win32 cygwin'", true),
        ("platform_release >= '5'", true),
        ("python_implementation == 'CPython'", true),
    ] {
        assert_eq!(Marker::parse(marker).unwrap().evaluate(&env, ""), expected, "{marker}");
    }
    let socks = Requirement::parse("PySocks!=1.5.7,>=1.5.6; extra == 'SOCKS'").unwrap();
    assert!(!socks.applies(&env, &[]));
    assert!(socks.applies(&env, &["socks".into()]));
    let windows_extra = Requirement::parse("pywin32; extra == 'socks' and sys_platform == 'win32'").unwrap();
    assert!(!windows_extra.applies(&env, &["socks".into()]));
}

#[test]
fn the_marker_environment_is_what_pyodide_reports() {
    let reported: BTreeMap<String, Value> = serde_json::from_str(include_str!("pyodide_marker_env.json")).unwrap();
    let reported: BTreeMap<String, String> = reported
        .into_iter()
        .filter(|(k, _)| !k.starts_with('_'))
        .map(|(k, v)| (k, v.as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(runtime().environment(), reported);
}

// ---- wheel tags and the lock ------------------------------------------------------------------

#[test]
fn the_runtimes_tags_are_packagings_in_its_order() {
    let expected: Vec<String> = include_str!("pyodide_wheel_tags.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(str::to_owned)
        .collect();
    let ours: Vec<String> = runtime().tags().into_iter().map(|(p, a, pl)| format!("{p}-{a}-{pl}")).collect();
    assert_eq!(ours, expected);
}

#[test]
fn wheels_rank_by_their_best_tag() {
    let tags = runtime().tags();
    let rank = |file: &str| WheelName::parse(file).unwrap().rank(&tags);
    let own = rank("msgpack-1.2.4-cp314-cp314-pyemscripten_2026_0_wasm32.whl").unwrap();
    let abi3 = rank("cryptography-46.0.0-cp311-abi3-pyemscripten_2026_0_wasm32.whl").unwrap();
    let pure = rank("six-1.16.0-py2.py3-none-any.whl").unwrap();
    assert!(own < abi3 && abi3 < pure, "{own} {abi3} {pure}");
    for other in [
        "msgpack-1.2.4-cp313-cp313-pyemscripten_2025_0_wasm32.whl",
        "msgpack-1.2.4-cp315-cp315-pyemscripten_2026_5_wasm32.whl",
        "msgpack-1.2.4-cp314-cp314-manylinux_2_17_x86_64.whl",
        "futures-3.4.0-py2-none-any.whl",
        "x-1.0-cp315-abi3-pyemscripten_2026_0_wasm32.whl",
    ] {
        assert_eq!(rank(other), None, "{other}");
    }
    let named = WheelName::parse("Python_Dateutil-2.9.0.post0-1build-py2.py3-none-any.whl").unwrap();
    assert_eq!(
        (named.project.as_str(), named.version.to_string().as_str(), named.tags.len()),
        ("python-dateutil", "2.9.0.post0", 2)
    );
    assert!(WheelName::parse("six-1.16.0-py3-none.whl").is_err());
}

/// The lock shipped with the runtime (node_modules/pyodide, installed by scripts/setup.sh).
fn shipped_lock() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/node_modules/pyodide/pyodide-lock.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("npm ci installed pyodide")).unwrap()
}

#[test]
fn the_shipped_lock_reads_and_describes_its_runtime() {
    let lock = Lock::parse(&shipped_lock()).unwrap();
    let runtime = Runtime::new(lock.info.clone()).unwrap();
    assert!(runtime.tags()[0].2.starts_with("pyemscripten_"), "{:?}", runtime.tags()[0]);
    // Keys and `depends` spell some names apart (pydantic_core, pydantic-core): both find it.
    assert_eq!(lock.get("pydantic_core").unwrap().name, lock.get("Pydantic-Core").unwrap().name);
    let numpy = lock.get("numpy").unwrap();
    assert_eq!(WheelName::parse(&numpy.file_name).unwrap().rank(&runtime.tags()), Some(0));
    assert_eq!(runtime.refuses(&lock.info), None);
    let older = LockInfo { python: "3.13.2".into(), abi_version: "2025_0".into(), ..lock.info.clone() };
    assert!(runtime.refuses(&older).unwrap().contains("it is for Python 3.13.2, ABI 2025_0"));
}

#[test]
fn the_pyodide_version_the_sources_name_is_the_shipped_one() {
    let package: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/node_modules/pyodide/package.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(package["version"], relay_core::packages::sources::PYODIDE_VERSION);
}

#[test]
fn a_lock_entry_must_be_a_plain_file_with_a_sha256() {
    let lock =
        |entry: Value| Lock::parse(&json!({"info": info_json(), "packages": {"x": entry}})).map(|_| ()).unwrap_err();
    let good = json!({"name": "x", "version": "1.0", "file_name": "x-1.0-py3-none-any.whl", "sha256": "a".repeat(64), "depends": []});
    assert!(Lock::parse(&json!({"info": info_json(), "packages": {"x": good.clone()}})).is_ok());
    let with = |field: &str, value: Value| {
        let mut entry = good.clone();
        entry[field] = value;
        lock(entry)
    };
    assert!(with("file_name", json!("../x-1.0-py3-none-any.whl")).contains("without a path"));
    assert!(with("file_name", json!("x.tar.gz")).contains("without a path"));
    assert!(with("sha256", json!("ABC")).contains("64 lowercase hex"));
    assert!(with("install_dir", json!("/usr")).contains("install_dir"));
    assert!(with("version", json!("one")).contains("version"));
}

// ---- the resolver, driven over a made-up index ------------------------------------------------

fn info_json() -> Value {
    json!({"python": "3.14.2", "abi_version": "2026_0", "platform": "emscripten_5_0_3", "arch": "wasm32"})
}

const INDEX: &str = "https://pypi.test/files";
const MIRROR: &str = "https://mirror.test/pyodide";

/// A release: its version and its files, each (file name, what its METADATA requires).
type Release = (String, Vec<(String, Vec<String>)>);

/// A made-up index: per project, its releases; and a lock.
#[derive(Debug, Default, Clone)]
struct World {
    projects: BTreeMap<String, Vec<Release>>,
    lock: BTreeMap<String, Value>,
    yanked: Vec<String>,
    requires_python: BTreeMap<String, String>,
}

impl World {
    /// A release of `name` with one pure wheel requiring `requires`.
    fn pure(mut self, name: &str, version: &str, requires: &[&str]) -> Self {
        let file = format!("{}-{version}-py3-none-any.whl", name.replace('-', "_"));
        self.release(name, version, &file, requires);
        self
    }

    fn release(&mut self, name: &str, version: &str, file: &str, requires: &[&str]) {
        let releases = self.projects.entry(name.to_owned()).or_default();
        let files = (file.to_owned(), requires.iter().map(|r| r.to_string()).collect());
        match releases.iter_mut().find(|(v, _)| v == version) {
            Some((_, list)) => list.push(files),
            None => releases.push((version.to_owned(), vec![files])),
        }
    }

    fn wheel(mut self, name: &str, version: &str, file: &str, requires: &[&str]) -> Self {
        self.release(name, version, file, requires);
        self
    }

    fn locked(mut self, name: &str, version: &str, file: &str, depends: &[&str]) -> Self {
        let entry = json!({"name": name, "version": version, "file_name": file, "sha256": "b".repeat(64), "depends": depends, "install_dir": if file.ends_with(".zip") { "dynlib" } else { "site" }});
        self.lock.insert(name.to_owned(), entry);
        self
    }

    fn document(&self, key: &str) -> Option<Value> {
        let (name, releases) = self.projects.iter().find(|(n, _)| n.to_lowercase().replace(['_', '.'], "-") == key)?;
        let releases: serde_json::Map<String, Value> = releases
            .iter()
            .map(|(version, files)| {
                let files: Vec<Value> = files
                    .iter()
                    .map(|(file, _)| {
                        json!({"filename": file, "url": format!("{INDEX}/{file}"), "digests": {"sha256": "a".repeat(64)},
                               "yanked": self.yanked.contains(file), "requires_python": self.requires_python.get(file)})
                    })
                    .collect();
                (version.clone(), Value::Array(files))
            })
            .collect();
        Some(json!({"info": {"name": name}, "releases": releases}))
    }

    fn metadata(&self, url: &str) -> String {
        for (name, releases) in &self.projects {
            for (version, files) in releases {
                for (file, requires) in files {
                    if url.ends_with(&format!("/{file}")) {
                        let lines: String = requires.iter().map(|r| format!("Requires-Dist: {r}\n")).collect();
                        return format!(
                            "Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{lines}\nThe description.\n"
                        );
                    }
                }
            }
        }
        panic!("no wheel at {url}")
    }

    /// Runs the resolver to its end as the build worker does; the last step and how many
    /// fetch rounds it took.
    fn drive(&self, requirements: &[&str], wheel_urls: &[&str]) -> (Step, usize) {
        let mut known = json!({
            "requirements": requirements, "wheelUrls": wheel_urls, "runtime": info_json(),
            "lock": {"info": info_json(), "packages": self.lock}, "lockSource": "the test's lock",
            "pyodideIndex": MIRROR, "projects": {}, "metadata": {},
        });
        for round in 0..100 {
            let step = resolve(&serde_json::from_value::<Known>(known.clone()).unwrap());
            let Step::Fetch { projects, wheels } = &step else { return (step, round) };
            assert!(!projects.is_empty() || !wheels.is_empty(), "a fetch of nothing");
            for key in projects {
                assert!(known["projects"].get(key).is_none(), "{key} fetched twice");
                known["projects"][key] = self.document(key).unwrap_or(Value::Null);
            }
            for wheel in wheels {
                assert!(known["metadata"].get(&wheel.url).is_none(), "{} fetched twice", wheel.url);
                known["metadata"][&wheel.url] = json!(self.metadata(&wheel.url));
            }
        }
        panic!("the resolver did not finish in 100 rounds")
    }
}

/// `name==version (source)` of each install, or the failure's message.
fn outcome(step: &Step) -> Result<Vec<String>, String> {
    match step {
        Step::Done { install } => {
            Ok(install.iter().map(|i| format!("{}=={} ({})", i.project, i.version, i.source)).collect())
        }
        Step::Failed { message } => Err(message.clone()),
        Step::Fetch { .. } => unreachable!(),
    }
}

fn dateutil_world() -> World {
    World::default()
        .pure("python-dateutil", "2.9.0.post0", &["six>=1.5"])
        .pure("python-dateutil", "4.0.0", &["six>=1.6", "tzdata"])
        .pure("six", "1.5.0", &[])
        .pure("six", "1.16.0", &[])
        .pure("six", "1.17.0", &[])
        .pure("tzdata", "2025.2", &[])
}

#[test]
fn requires_dist_is_followed_to_the_highest_release_that_fits() {
    let (step, rounds) = dateutil_world().drive(&["python-dateutil"], &[]);
    assert_eq!(
        outcome(&step).unwrap(),
        ["python-dateutil==4.0.0 (index)", "six==1.17.0 (index)", "tzdata==2025.2 (index)"]
    );
    assert!(rounds <= 4, "{rounds} rounds: fetches are batched");
    let Step::Done { install } = step else { unreachable!() };
    assert_eq!(install[1].layer_path, "wheels/six-1.17.0-py3-none-any.whl");
    assert_eq!(install[1].file.sha256.as_deref(), Some("a".repeat(64).as_str()));
    let (pinned, _) = dateutil_world().drive(&["python-dateutil<3", "six<1.17"], &[]);
    assert_eq!(outcome(&pinned).unwrap(), ["python-dateutil==2.9.0.post0 (index)", "six==1.16.0 (index)"]);
}

#[test]
fn a_conflict_names_both_requirers_and_their_ranges() {
    let (step, _) = dateutil_world().drive(&["python-dateutil", "six==1.5.0"], &[]);
    let message = outcome(&step).unwrap_err();
    assert!(message.starts_with("conflicting requirements for six: "), "{message}");
    assert!(
        message.contains("six==1.5.0 (the call)") && message.contains("six>=1.6 (python-dateutil 4.0.0)"),
        "{message}"
    );
}

#[test]
fn a_conflict_some_release_settles_starts_again_knowing_both_ranges() {
    let world = World::default().pure("a", "1.0", &["c>=1"]).pure("b", "1.0", &["c<2"]).pure("c", "1.5", &[]).pure(
        "c",
        "3.0",
        &[],
    );
    let (step, _) = world.drive(&["a", "b"], &[]);
    assert_eq!(outcome(&step).unwrap(), ["a==1.0 (index)", "b==1.0 (index)", "c==1.5 (index)"]);
}

#[test]
fn markers_and_extras_decide_which_requirements_apply() {
    let world = World::default()
        .pure(
            "requests",
            "2.32.0",
            &[
                "urllib3<3",
                "PySocks>=1.5.6; extra == 'socks'",
                "pywin32; sys_platform == 'win32'",
                "idna; python_version >= '3.8'",
            ],
        )
        .pure("urllib3", "2.2.0", &[])
        .pure("pysocks", "1.7.1", &[])
        .pure("idna", "3.7", &[]);
    let (plain, _) = world.drive(&["requests"], &[]);
    assert_eq!(outcome(&plain).unwrap(), ["requests==2.32.0 (index)", "urllib3==2.2.0 (index)", "idna==3.7 (index)"]);
    let (socks, _) = world.drive(&["requests[socks]"], &[]);
    assert_eq!(
        outcome(&socks).unwrap(),
        ["requests==2.32.0 (index)", "urllib3==2.2.0 (index)", "pysocks==1.7.1 (index)", "idna==3.7 (index)"]
    );
    // An extra asked for later adds its requirements to the pick.
    let world = world.pure("uses-socks", "1.0", &["requests[socks]"]);
    let (later, _) = world.drive(&["requests", "uses-socks"], &[]);
    assert!(outcome(&later).unwrap().contains(&"pysocks==1.7.1 (index)".to_owned()));
    // A marker on the call's own requirement counts too.
    let (skipped, _) = world.drive(&["requests; sys_platform == 'win32'", "idna"], &[]);
    assert_eq!(outcome(&skipped).unwrap(), ["idna==3.7 (index)"]);
}

#[test]
fn cycles_and_chains_too_deep_are_refused_with_the_chain() {
    let cycle = World::default().pure("a", "1.0", &["b"]).pure("b", "1.0", &["c"]).pure("c", "1.0", &["a>=1"]);
    let message = outcome(&cycle.drive(&["a"], &[]).0).unwrap_err();
    assert!(message.contains("cycle: a -> b -> c -> a"), "{message}");
    // A project asking for its own extras is not a cycle.
    let own = World::default().pure("pkg", "1.0", &["pkg[fast]; extra == 'all'", "fastlib; extra == 'fast'"]).pure(
        "fastlib",
        "2.0",
        &[],
    );
    assert_eq!(outcome(&own.drive(&["pkg[all]"], &[]).0).unwrap(), ["pkg==1.0 (index)", "fastlib==2.0 (index)"]);
    let mut deep = World::default();
    for i in 0..=MAX_DEPTH + 1 {
        deep = deep.pure(&format!("p{i}"), "1.0", &[&format!("p{}", i + 1)]);
    }
    let message = outcome(&deep.drive(&["p0"], &[]).0).unwrap_err();
    assert!(
        message.contains(&format!("is deeper than {MAX_DEPTH}"))
            && message.starts_with("the requirement chain p0 -> p1"),
        "{message}"
    );
}

#[test]
fn the_most_specific_wheel_for_the_runtime_is_taken_and_other_abis_are_refused_with_the_reason() {
    let world = World::default()
        .wheel("msgpack", "1.2.4", "msgpack-1.2.4-cp313-cp313-pyemscripten_2025_0_wasm32.whl", &[])
        .wheel("msgpack", "1.2.4", "msgpack-1.2.4-py3-none-any.whl", &[])
        .wheel("msgpack", "1.2.4", "msgpack-1.2.4-cp314-cp314-pyemscripten_2026_0_wasm32.whl", &[])
        .wheel("other", "1.0", "other-1.0-cp313-cp313-pyemscripten_2025_0_wasm32.whl", &[])
        .wheel("other", "1.0", "other-1.0-cp315-cp315-pyemscripten_2026_5_wasm32.whl", &[])
        .wheel("other", "1.0", "other-1.0.tar.gz", &[]);
    let Step::Done { install } = world.drive(&["msgpack"], &[]).0 else { panic!() };
    assert_eq!(install[0].file.filename, "msgpack-1.2.4-cp314-cp314-pyemscripten_2026_0_wasm32.whl");
    let message = outcome(&world.drive(&["other==1.0"], &[]).0).unwrap_err();
    assert!(
        message.starts_with("other==1.0 has no wheel for Pyodide's CPython 3.14.2, ABI 2026_0, wasm32: its wheels are tagged cp313-cp313-pyemscripten_2025_0_wasm32, cp315-cp315-pyemscripten_2026_5_wasm32, and it needs cp314-cp314-pyemscripten_2026_0_wasm32"),
        "{message}"
    );
    assert!(message.ends_with("it is not in Pyodide's distribution (the test's lock) either"), "{message}");
}

#[test]
fn pyodides_distribution_serves_what_the_index_cannot_with_the_locks_dependencies() {
    let world = World::default()
        .wheel("numpy", "2.4.6", "numpy-2.4.6-cp314-cp314-manylinux_2_17_x86_64.whl", &[])
        .pure("six", "1.17.0", &[])
        .locked("numpy", "2.4.6", "numpy-2.4.6-cp314-cp314-pyemscripten_2026_0_wasm32.whl", &[])
        .locked(
            "pandas",
            "3.0.2",
            "pandas-3.0.2-cp314-cp314-pyemscripten_2026_0_wasm32.whl",
            &["numpy", "python_dateutil", "libopenblas"],
        )
        .locked("python-dateutil", "2.9.0.post0", "python_dateutil-2.9.0.post0-py2.py3-none-any.whl", &["six"])
        .locked("six", "1.16.0", "six-1.16.0-py2.py3-none-any.whl", &[])
        .locked("libopenblas", "0.3.31", "libopenblas-0.3.31.zip", &[]);
    // pandas is not on this index at all; numpy has only a Linux wheel there.
    let (step, _) = world.drive(&["pandas"], &[]);
    assert_eq!(
        outcome(&step).unwrap(),
        [
            "pandas==3.0.2 (lock)",
            "numpy==2.4.6 (lock)",
            "python-dateutil==2.9.0.post0 (lock)",
            "libopenblas==0.3.31 (lock)",
            "six==1.16.0 (lock)"
        ]
    );
    let Step::Done { install } = step else { unreachable!() };
    assert_eq!(install[0].file.url, format!("{MIRROR}/pandas-3.0.2-cp314-cp314-pyemscripten_2026_0_wasm32.whl"));
    assert_eq!(install[0].file.sha256.as_deref(), Some("b".repeat(64).as_str()));
    assert_eq!(install[3].layer_path, "wheels/dynlib/libopenblas-0.3.31.zip");
    // Asked for by name, six comes from the index first (the lock only fills in).
    let (step, _) = world.drive(&["six", "pandas"], &[]);
    assert!(outcome(&step).unwrap().contains(&"six==1.17.0 (index)".to_owned()));
    // A version the lock does not have is explained on both sides.
    let message = outcome(&world.drive(&["numpy>=3"], &[]).0).unwrap_err();
    assert!(message.contains("no release of numpy matches numpy>=3 (the call) (latest is 2.4.6)"), "{message}");
    assert!(
        message.ends_with("Pyodide's distribution (the test's lock) has numpy 2.4.6, which does not fit"),
        "{message}"
    );
    let message = outcome(&world.drive(&["pandas[excel]"], &[]).0).unwrap_err();
    assert!(message.contains("whose lock lists no extras"), "{message}");
}

#[test]
fn a_tenants_lock_for_another_runtime_is_refused() {
    let mut known: Value = json!({"requirements": ["six"], "runtime": info_json(), "lockSource": "https://mirror.test/old.json", "pyodideIndex": MIRROR,
        "lock": {"info": {"python": "3.13.2", "abi_version": "2025_0", "platform": "emscripten_4_0_9", "arch": "wasm32"}, "packages": {}}});
    let step = resolve(&serde_json::from_value(known.clone()).unwrap());
    let message = outcome(&step).unwrap_err();
    assert!(message.starts_with("the Pyodide lock https://mirror.test/old.json cannot serve this runtime: it is for Python 3.13.2, ABI 2025_0"), "{message}");
    known["lock"] = json!({"packages": {}});
    assert!(outcome(&resolve(&serde_json::from_value(known).unwrap())).unwrap_err().contains("is not a Pyodide lock"));
}

#[test]
fn yanked_files_prereleases_and_requires_python_are_skipped_as_pip_does() {
    let mut world = World::default().pure("lib", "1.0", &[]).pure("lib", "1.1", &[]).pure("lib", "2.0b1", &[]).pure(
        "lib",
        "1.2",
        &[],
    );
    world.yanked.push("lib-1.1-py3-none-any.whl".into());
    world.requires_python.insert("lib-1.2-py3-none-any.whl".into(), ">=3.15".into());
    assert_eq!(outcome(&world.drive(&["lib"], &[]).0).unwrap(), ["lib==1.0 (index)"]);
    assert_eq!(outcome(&world.drive(&["lib==1.1"], &[]).0).unwrap(), ["lib==1.1 (index)"]);
    assert_eq!(outcome(&world.drive(&["lib>=2.0b1"], &[]).0).unwrap(), ["lib==2.0b1 (index)"]);
    assert_eq!(
        outcome(&world.drive(&["lib>1.2"], &[]).0).unwrap(),
        ["lib==2.0b1 (index)"],
        "a pre-release when nothing else fits"
    );
    let message = outcome(&world.drive(&["lib==1.2"], &[]).0).unwrap_err();
    assert!(message.contains("lib==1.2 has wheels only for other Python versions"), "{message}");
}

#[test]
fn a_wheels_metadata_must_name_its_project_and_version() {
    let world = World::default().pure("six", "1.17.0", &[]);
    let mut known = json!({"requirements": ["six"], "runtime": info_json(), "lock": {"info": info_json(), "packages": {}},
        "lockSource": "the test's lock", "pyodideIndex": MIRROR, "projects": {"six": world.document("six")}});
    let Step::Fetch { wheels, .. } = resolve(&serde_json::from_value(known.clone()).unwrap()) else { panic!() };
    known["metadata"] = json!({ wheels[0].url.clone(): "Metadata-Version: 2.1\nName: seven\nVersion: 1.17.0\n" });
    let message = outcome(&resolve(&serde_json::from_value(known).unwrap())).unwrap_err();
    assert!(message.contains("its METADATA says it is seven 1.17.0"), "{message}");
}

#[test]
fn wheel_urls_are_taken_as_given_and_their_requirements_followed() {
    let world = dateutil_world();
    let url = "https://example.test/wheels/python_dateutil-4.0.0-py3-none-any.whl";
    let (step, _) = world.drive(&[], &[url]);
    let Step::Done { install } = &step else { panic!("{step:?}") };
    assert_eq!(
        (install[0].source, install[0].file.url.as_str(), install[0].file.sha256.as_deref()),
        ("url", url, None)
    );
    assert_eq!(outcome(&step).unwrap()[1..], ["six==1.17.0 (index)".to_owned(), "tzdata==2025.2 (index)".to_owned()]);
    let message =
        outcome(&world.drive(&[], &["https://example.test/x-1.0-cp313-cp313-pyemscripten_2025_0_wasm32.whl"]).0)
            .unwrap_err();
    assert!(
        message.contains("is tagged cp313-cp313-pyemscripten_2025_0_wasm32, which Pyodide's CPython 3.14.2"),
        "{message}"
    );
}

#[test]
fn a_project_the_index_lacks_and_the_lock_lacks_is_named() {
    let message = outcome(&World::default().drive(&["nothere"], &[]).0).unwrap_err();
    assert_eq!(
        message,
        "the package index has no project \"nothere\"; it is not in Pyodide's distribution (the test's lock) either"
    );
}

// ---- the resolver over random indexes ----------------------------------------------------------

/// A random index: projects p0..p5, each with a few releases requiring ranges of later ones
/// (so no cycles), and a random call.
fn random_world() -> impl Strategy<Value = (World, Vec<String>)> {
    let release = (1u32..5, prop::collection::vec((1usize..6, 0u32..5, prop::bool::ANY), 0..3));
    (prop::collection::vec(prop::collection::vec(release, 1..4), 6), prop::collection::vec((0usize..6, 0u32..5), 1..4))
        .prop_map(|(projects, call)| {
            let mut world = World::default();
            for (i, releases) in projects.into_iter().enumerate() {
                for (major, requires) in releases {
                    let requires: Vec<String> = requires
                        .into_iter()
                        .filter(|(target, _, _)| *target > i)
                        .map(|(target, bound, below)| format!("p{target}{}{bound}", if below { "<" } else { ">=" }))
                        .collect();
                    let requires: Vec<&str> = requires.iter().map(String::as_str).collect();
                    world = world.pure(&format!("p{i}"), &format!("{major}.0"), &requires);
                }
            }
            let call = call.into_iter().map(|(p, bound)| format!("p{p}>={bound}")).collect();
            (world, call)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn a_resolution_fits_every_range_that_applies_or_says_why_not((world, call) in random_world()) {
        let call: Vec<&str> = call.iter().map(String::as_str).collect();
        let (step, _) = world.drive(&call, &[]);
        // The same facts give the same answer.
        prop_assert_eq!(&world.drive(&call, &[]).0, &step);
        match step {
            Step::Failed { message } => prop_assert!(!message.is_empty()),
            Step::Fetch { .. } => unreachable!(),
            Step::Done { install } => {
                let picked: BTreeMap<String, Version> = install.iter().map(|i| (i.project.clone(), v(&i.version))).collect();
                prop_assert_eq!(picked.len(), install.len(), "a project installed twice");
                // Every requirement of the call and of every installed release holds.
                let mut requirements: Vec<String> = call.iter().map(|s| s.to_string()).collect();
                for i in &install {
                    let releases = &world.projects[&i.project];
                    let (_, files) = releases.iter().find(|(version, _)| v(version) == v(&i.version)).unwrap();
                    requirements.extend(files[0].1.iter().cloned());
                }
                for text in requirements {
                    let requirement = Requirement::parse(&text).unwrap();
                    let version = picked.get(&requirement.key());
                    prop_assert!(version.is_some_and(|v| requirement.specifiers.contains(v)), "{} unmet by {:?}", text, version);
                }
            }
        }
    }
}
