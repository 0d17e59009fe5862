//! Packages: the dependencies a call may ask for, the sources a build may reach, the upload
//! grants a building tab gets, and the checks `finalize` makes before anything is signed.
//! The tab is hostile here: every claim it makes is checked against what was granted and uploaded.

use std::collections::BTreeMap;

use proptest::prelude::*;
use relay_core::capsule::jws::{KeySet, Signer};
use relay_core::capsule::{CapsuleSpec, Deps, Language};
use relay_core::packages::grant::{RunRef, GRANT_TTL_S};
use relay_core::packages::imports::MAX_SUBPATHS;
use relay_core::packages::record::RANGES_REUSED_MS;
use relay_core::packages::request::MAX_DEPENDENCIES;
use relay_core::packages::{BuildRecord, DepsRequest, LayerClaim, PackageSources, PendingBuild, Proposal, UploadGrant};
use relay_core::policy::Policy;
use serde_json::{json, Value};

const NOW_S: u64 = 1_790_000_000;
const SHA: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn request(language: Language, section: Value) -> Result<Option<DepsRequest>, String> {
    let field = if language == Language::Js { "npm" } else { "pip" };
    let arguments = json!({ field: section });
    DepsRequest::from_arguments(language, arguments.as_object().unwrap())
}

fn npm(dependencies: Value) -> Result<Option<DepsRequest>, String> {
    request(Language::Js, json!({ "dependencies": dependencies }))
}

fn npm_of(pairs: &[(&str, &str)]) -> DepsRequest {
    let dependencies = pairs.iter().map(|(n, r)| (n.to_string(), r.to_string())).collect();
    DepsRequest::Npm { dependencies, subpaths: Default::default() }
}

fn pip(requirements: &[&str]) -> Result<Option<DepsRequest>, String> {
    request(Language::Py, json!({ "requirements": requirements }))
}

// ---- requests -------------------------------------------------------------------------------

#[test]
fn npm_names_and_ranges_that_a_registry_serves_are_accepted() {
    for (name, range) in [
        ("lodash", "4.17.21"),
        ("lodash", "^4.17.0"),
        ("date-fns", "~3.6"),
        ("@scope/pkg", ">=1.0.0 <2"),
        ("zod", "*"),
        ("a.b_c~d", "1.x || 2.x"),
        ("left-pad", "1.0.0-beta.1+build.5"),
        ("zod", "latest"),
    ] {
        let got = npm(json!({ name: range }));
        assert_eq!(got, Ok(Some(npm_of(&[(name, range)]))), "{name}@{range}");
    }
}

#[test]
fn npm_specs_that_are_not_registry_versions_are_refused_naming_the_package() {
    for range in [
        "git+https://github.com/lodash/lodash.git",
        "github:lodash/lodash",
        "file:../lodash",
        "npm:lodash@4",
        "https://example.com/lodash.tgz",
        "workspace:*",
        "",
        "   ",
    ] {
        let message = npm(json!({ "lodash": range })).expect_err(range);
        assert!(message.starts_with("npm.dependencies.lodash:"), "{range}: {message}");
    }
    let long = "1".repeat(201);
    assert!(npm(json!({ "lodash": long })).is_err());
}

#[test]
fn npm_names_outside_npm_rules_are_refused() {
    for name in ["Lodash", ".hidden", "_under", "a b", "@scope", "@/pkg", "@scope/", "../x", "x/y", "", "é"] {
        let message = npm(json!({ name: "1.0.0" })).expect_err(name);
        assert!(
            message.starts_with("npm.dependencies:") && message.contains("not an npm package name"),
            "{name}: {message}"
        );
    }
    let long = "a".repeat(215);
    assert!(npm(json!({ long: "1.0.0" })).unwrap_err().contains("214"));
}

#[test]
fn too_many_dependencies_are_refused_with_the_limit() {
    let many: serde_json::Map<String, Value> =
        (0..=MAX_DEPENDENCIES).map(|i| (format!("p{i}"), json!("1.0.0"))).collect();
    assert!(npm(Value::Object(many)).unwrap_err().contains(&format!("at most {MAX_DEPENDENCIES}")));
    let fifty: Vec<String> = (0..MAX_DEPENDENCIES).map(|i| format!("p{i}==1.0")).collect();
    let fifty: Vec<&str> = fifty.iter().map(String::as_str).collect();
    assert!(pip(&fifty).is_ok());
    let wheels = json!({ "requirements": fifty, "wheelUrls": ["https://example.com/x-1.0-py3-none-any.whl"] });
    assert!(request(Language::Py, wheels).unwrap_err().contains(&format!("at most {MAX_DEPENDENCIES}")));
}

#[test]
fn unknown_fields_in_a_dependency_section_are_refused_naming_them() {
    let message = request(Language::Js, json!({ "dependencies": {}, "devDependencies": { "x": "1" } })).unwrap_err();
    assert!(message.starts_with("npm.devDependencies: unknown field"), "{message}");
    let message = request(Language::Py, json!({ "requirements": [], "indexUrl": "https://x" })).unwrap_err();
    assert!(message.starts_with("pip.indexUrl: unknown field"), "{message}");
}

#[test]
fn pip_requirements_are_pep_508_by_name() {
    for requirement in [
        "six",
        "six==1.16.0",
        "attrs>=23,<25",
        "Django~=5.0",
        "zope.interface != 6.0",
        "a_b-c==1.0.*",
        "x==1.0rc1",
        "requests[socks]==2.32",
        "six; python_version>'3'",
        "tomli (>=2) ; python_version < \"3.11\" and sys_platform == 'emscripten'",
        "six===1.0",
    ] {
        assert!(pip(&[requirement]).is_ok(), "{requirement}");
    }
    for (requirement, why) in [
        ("six @ https://example.com/six.whl", "URL"),
        ("six; platform == 'x'", "not a marker variable"),
        ("==1.0", "project name"),
        ("-six", "project name"),
        ("six=1.0", "version specifier"),
        ("six==", "version specifier"),
        ("six>=1,<", "version specifier"),
    ] {
        let message = pip(&[requirement]).expect_err(requirement);
        assert!(message.starts_with("pip.requirements:") && message.contains(why), "{requirement}: {message}");
    }
}

#[test]
fn a_python_project_listed_twice_is_refused_naming_both_entries() {
    for (requirements, wheels, first, second, project) in [
        (&["six==1.16.0", "six==1.15.0"][..], &[][..], "\"six==1.16.0\"", "\"six==1.15.0\"", "six"),
        (&["six>=1.10", "attrs", "six<2"], &[], "\"six>=1.10\"", "\"six<2\"", "six"),
        (
            &["Zope.Interface==6.0", "zope_interface==5.0"],
            &[],
            "\"Zope.Interface==6.0\"",
            "\"zope_interface==5.0\"",
            "zope-interface",
        ),
        (&["a-_.b", "A_B"], &[], "\"a-_.b\"", "\"A_B\"", "a-b"),
        (
            &["six==1.16.0"],
            &["https://example.com/w/six-1.15.0-py2.py3-none-any.whl"],
            "\"six==1.16.0\"",
            "the wheel URL \"https://example.com/w/six-1.15.0-py2.py3-none-any.whl\"",
            "six",
        ),
        (
            &[],
            &[
                "https://example.com/zope_interface-6.0-py3-none-any.whl",
                "https://example.com/Zope.Interface-5.0-py3-none-any.whl?x=1",
            ],
            "the wheel URL \"https://example.com/zope_interface-6.0-py3-none-any.whl\"",
            "the wheel URL \"https://example.com/Zope.Interface-5.0-py3-none-any.whl?x=1\"",
            "zope-interface",
        ),
    ] {
        let message = request(Language::Py, json!({ "requirements": requirements, "wheelUrls": wheels })).unwrap_err();
        let named = format!("pip: {first} and {second} both name project \"{project}\"; list each project once");
        assert!(message.starts_with(&named), "{requirements:?} {wheels:?}: {message}");
    }
    let distinct = json!({ "requirements": ["six", "sixer", "attrs"], "wheelUrls": ["https://example.com/six_x-1-py3-none-any.whl"] });
    assert!(request(Language::Py, distinct).is_ok(), "projects that only share a prefix are distinct");
}

#[test]
fn npm_names_cannot_differ_only_in_case_so_a_package_is_listed_once() {
    // A JSON object holds each key once (a parser keeps one of two equal keys before relay sees
    // them); npm names are lowercase, so "Lodash" beside "lodash" is refused, not a second pin.
    let message = npm(json!({ "lodash": "4.17.21", "Lodash": "4.17.20" })).unwrap_err();
    assert!(message.starts_with("npm.dependencies: \"Lodash\" is not an npm package name"), "{message}");
}

#[test]
fn wheel_urls_must_be_http_urls_of_wheels() {
    let ok = json!({ "wheelUrls": ["https://example.com/x-1.0-py3-none-any.whl", "http://127.0.0.1:9/y-2-py3-none-any.whl?sig=1"] });
    assert!(request(Language::Py, ok).is_ok());
    for (url, why) in [
        ("ftp://example.com/x.whl", "http(s)"),
        ("example.com/x.whl", "http(s)"),
        ("https://example.com/x.tar.gz", ".whl"),
        ("https://example.com/x.whl.zip", ".whl"),
    ] {
        let message = request(Language::Py, json!({ "wheelUrls": [url] })).expect_err(url);
        assert!(message.starts_with("pip.wheelUrls:") && message.contains(why), "{url}: {message}");
    }
    let long = format!("https://example.com/{}.whl", "x".repeat(2048));
    assert!(request(Language::Py, json!({ "wheelUrls": [long] })).is_err());
}

#[test]
fn pinned_means_every_dependency_is_one_exact_version() {
    assert!(npm_of(&[("lodash", "4.17.21"), ("zod", "3.23.8-beta.1")]).pinned());
    for range in ["^4.17.21", "~4.17.21", "4.17", "4.x", ">=4.17.21", "*", "4.17.21 || 5.0.0"] {
        assert!(!npm_of(&[("lodash", "4.17.21"), ("x", range)]).pinned(), "{range}");
    }
    assert!(!npm_of(&[("lodash", "latest")]).pinned(), "a dist-tag moves");
    let py =
        |r: &[&str]| DepsRequest::Pip { requirements: r.iter().map(|s| s.to_string()).collect(), wheel_urls: vec![] };
    assert!(py(&["six==1.16.0", "attrs == 24.2.0"]).pinned());
    for requirement in ["six", "six>=1.16", "six==1.*", "six==1.16,!=1.15", "six~=1.16"] {
        assert!(!py(&["attrs==24.2.0", requirement]).pinned(), "{requirement}");
    }
}

#[test]
fn the_build_key_is_stable_and_changes_with_anything_that_changes_the_build() {
    let sources = PackageSources::default();
    let lodash = npm_of(&[("lodash", "^4.17.0")]);
    let key = lodash.key(Language::Js, &sources);
    assert_eq!(key.len(), 64);
    assert_eq!(key, npm_of(&[("lodash", "^4.17.0")]).key(Language::Js, &sources.clone()));
    let two = npm_of(&[("a", "1.0.0"), ("b", "2.0.0")]);
    let two_reordered: BTreeMap<String, String> =
        [("b", "2.0.0"), ("a", "1.0.0")].iter().map(|(n, r)| (n.to_string(), r.to_string())).collect();
    assert_eq!(
        two.key(Language::Js, &sources),
        DepsRequest::Npm { dependencies: two_reordered, subpaths: Default::default() }.key(Language::Js, &sources)
    );
    let other_registry = PackageSources { npm_registry: "https://npm.example.com".into(), ..sources.clone() };
    for different in [
        npm_of(&[("lodash", "^4.17.1")]).key(Language::Js, &sources),
        npm_of(&[("lodash", "^4.17.0"), ("zod", "3")]).key(Language::Js, &sources),
        lodash.key(Language::Py, &sources),
        lodash.key(Language::Js, &other_registry),
    ] {
        assert_ne!(key, different);
    }
}

// ---- npm subpath imports --------------------------------------------------------------------------

/// The subpaths a call's code imports of its listed packages.
fn subpaths(code: &str, dependencies: &[&str]) -> Vec<String> {
    let dependencies: serde_json::Map<String, Value> =
        dependencies.iter().map(|n| (n.to_string(), json!("1.0.0"))).collect();
    let arguments = json!({ "code": code, "npm": { "dependencies": dependencies } });
    match DepsRequest::from_arguments(Language::Js, arguments.as_object().unwrap()).unwrap() {
        Some(DepsRequest::Npm { subpaths, .. }) => subpaths.into_iter().collect(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_subpaths_code_imports_are_found_by_every_import_form() {
    let code = r#"
        import chunk from "lodash/chunk";
        import { format } from 'date-fns/format'
        export * from "lodash/fp/map";
        import "lodash/noop.js";
        const later = await import("@scope/pkg/sub/deep");
        import _ from "lodash";
    "#;
    let found = subpaths(code, &["lodash", "date-fns", "@scope/pkg"]);
    assert_eq!(found, ["@scope/pkg/sub/deep", "date-fns/format", "lodash/chunk", "lodash/fp/map", "lodash/noop.js"]);
}

#[test]
fn text_that_only_looks_like_an_import_is_not_one() {
    let code = r#"
        // import a from "lodash/comment";
        /* import b from "lodash/block" */
        const s = 'import c from "lodash/string"';
        const t = `import d from "lodash/template" ${ `import e from "lodash/nested"` } still text`;
        const r = /import f from "lodash\/regex"/g;
        const q = a / 2 / 3; const from = "lodash/variable";
        loader.import("lodash/method");
        import g from "lodash/../escape";
        import h from "lodash/";
        import i from "other/unlisted";
        import j from "lodash-es/named-alike";
        const n = import(name);
        const x = `${ { y: 1 }.y }`; import k from "lodash/after-template";
    "#;
    assert_eq!(subpaths(code, &["lodash"]), ["lodash/after-template"]);
}

#[test]
fn subpaths_are_part_of_the_request_and_bounded() {
    let sources = PackageSources::default();
    let key = |code: &str| {
        let arguments = json!({ "code": code, "npm": { "dependencies": { "lodash": "^4.17.0" } } });
        let request = DepsRequest::from_arguments(Language::Js, arguments.as_object().unwrap()).unwrap().unwrap();
        request.key(Language::Js, &sources)
    };
    assert_eq!(
        key("import _ from 'lodash'"),
        npm_of(&[("lodash", "^4.17.0")]).key(Language::Js, &sources),
        "none: as before"
    );
    assert_ne!(key("import c from 'lodash/chunk'"), key("import _ from 'lodash'"));
    assert_eq!(
        key("import c from 'lodash/chunk'; console.log(1)"),
        key("import c from \"lodash/chunk\""),
        "the code aside"
    );
    let many: String = (0..=MAX_SUBPATHS).map(|i| format!("import m{i} from 'lodash/m{i}';\n")).collect();
    let arguments = json!({ "code": many, "npm": { "dependencies": { "lodash": "^4.17.0" } } });
    let message = DepsRequest::from_arguments(Language::Js, arguments.as_object().unwrap()).unwrap_err();
    assert!(message.starts_with(&format!("code: imports {} subpaths", MAX_SUBPATHS + 1)), "{message}");
}

proptest! {
    #[test]
    fn imports_between_hostile_text_are_found_and_nothing_panics(
        noise in prop::collection::vec(prop::sample::select(vec![
            "/", "//", "/*", "*/", "'", "\"", "`", "${", "}", "{", "(", ")", "\\", "\n", "x", "return", "a / b", "import", "from", ".",
        ]), 0..30),
        sub in "[a-z]{1,8}(/[a-z0-9]{1,8}){0,2}",
    ) {
        let hostile = noise.concat();
        let _ = relay_core::packages::imports::module_specifiers(&hostile);
        // Whatever came before, a line after a closed comment and a statement end is code.
        // Removing "*/" can join a new one ("/**//" leaves "/*/"): remove until none is left.
        let mut inside = hostile.clone();
        while inside.contains("*/") {
            inside = inside.replace("*/", "");
        }
        let code = format!("/*{inside}*/;\nimport x from \"lodash/{sub}\";\n");
        prop_assert!(subpaths(&code, &["lodash"]).contains(&format!("lodash/{sub}")), "{}", code);
    }
}

// ---- sources --------------------------------------------------------------------------------

/// Sources as a self-hosted setup has them: bases with paths, on one loopback port.
fn local_sources() -> PackageSources {
    PackageSources {
        npm_registry: "http://127.0.0.1:4873/npm".into(),
        pypi_index: "http://127.0.0.1:4873/pypi".into(),
        pypi_files: "https://files.example.org".into(),
        pyodide_index: "http://127.0.0.1:4873/pyodide".into(),
        pyodide_lock: String::new(),
    }
}

#[test]
fn pyodides_distribution_is_a_source_and_a_tenants_lock_only_its_own_url() {
    let sources = PackageSources::default();
    let cdn = format!("https://cdn.jsdelivr.net/pyodide/v{}/full", relay_core::packages::sources::PYODIDE_VERSION);
    assert_eq!(sources.pyodide_index, cdn);
    assert!(sources.admit(&format!("{cdn}/numpy-2.4.6-cp314-cp314-pyemscripten_2026_0_wasm32.whl")).is_ok());
    assert!(
        sources.admit("https://cdn.jsdelivr.net/pyodide/v0.27.0/full/numpy.whl").is_err(),
        "another version's files"
    );
    let lock = "http://127.0.0.1:4873/mirror/pyodide-lock.json";
    let mirror = PackageSources { pyodide_lock: lock.into(), ..local_sources() };
    assert!(mirror.validate().is_ok());
    assert!(mirror.admit(lock).is_ok());
    assert!(
        mirror.admit("http://127.0.0.1:4873/mirror/other.json").unwrap_err().contains(lock),
        "the refusal lists it"
    );
    assert!(local_sources().admit(lock).is_err(), "no lock named: nothing but the bases");
    for bad in ["mirror/pyodide-lock.json", "http://127.0.0.1:4873/lock.json?v=2", "ftp://x/lock.json"] {
        let refusal = PackageSources { pyodide_lock: bad.into(), ..local_sources() }.validate().unwrap_err();
        assert!(refusal.starts_with("packages.pyodideLock: "), "{bad}: {refusal}");
    }
    // A record written before these sources existed reads with their defaults.
    let old: PackageSources = serde_json::from_value(json!({"npmRegistry": "https://npm.example.com"})).unwrap();
    assert_eq!((old.pyodide_index, old.pyodide_lock), (cdn, String::new()));
    // They are part of a build's key.
    let six = pip(&["six"]).unwrap().unwrap();
    assert_ne!(six.key(Language::Py, &mirror), six.key(Language::Py, &local_sources()));
}

/// The URL `admit` hands back to be fetched, or its refusal.
fn admitted(sources: &PackageSources, url: &str) -> Result<String, String> {
    sources.admit(url).map(|a| a.url.to_string())
}

#[test]
fn sources_admit_urls_under_their_bases_only() {
    let sources = PackageSources::default();
    for url in [
        "https://registry.npmjs.org",
        "https://registry.npmjs.org/lodash",
        "https://registry.npmjs.org/@scope%2fpkg",
        "https://registry.npmjs.org/@scope/pkg/-/pkg-1.0.0.tgz",
        "https://pypi.org/pypi/six/json",
        "https://files.pythonhosted.org/packages/six-1.16.0-py2.py3-none-any.whl",
        "https://REGISTRY.npmjs.org:443/lodash",
    ] {
        assert!(sources.admit(url).is_ok(), "{url}");
    }
    for url in [
        "https://registry.npmjs.org.evil.com/lodash",
        "https://registry.npmjs.orgx/lodash",
        "https://registry.npmjs.org@evil.com/lodash",
        "https://user:pw@registry.npmjs.org/lodash",
        "https://registry.npmjs.org/lodash#frag",
        "https://registry.npmjs.org:8443/lodash",
        "https://registry.npmjs.org/%252e%252e/admin",
        "https://registry.npmjs.org/a%2f..%2fadmin",
        "https://registry.npmjs.org/a%5C..%5Cadmin",
        "http://registry.npmjs.org/lodash",
        "https://evil.com/https://registry.npmjs.org/lodash",
        "https://pypi.org.evil.com/pypi/six/json",
        "",
    ] {
        assert!(sources.admit(url).is_err(), "{url}");
    }
}

#[test]
fn a_path_is_judged_as_parsed_so_whitespace_inside_dots_cannot_leave_the_base() {
    // Issue 23: `.%09.` reached the route as `.\t.`; the string had no `..`, the parser dropped
    // the tab and fetched /secret. Now the parsed URL is what is judged, and what is fetched.
    let sources = local_sources();
    for hidden in ['\t', '\n', '\r'] {
        let url = format!("http://127.0.0.1:4873/npm/.{hidden}./secret");
        let refusal = admitted(&sources, &url).unwrap_err();
        assert!(refusal.starts_with("http://127.0.0.1:4873/secret is not under"), "{url:?}: {refusal}");
        assert!(refusal.contains("defaults.packages"), "{refusal}");
    }
    // Every other ASCII control character is kept (percent-encoded) by the parser, and refused.
    for byte in (0u8..0x20).chain([0x7f]).filter(|b| !b"\t\n\r".contains(b)) {
        let url = format!("http://127.0.0.1:4873/npm/.{}./secret", byte as char);
        assert!(admitted(&sources, &url).unwrap_err().contains("control character"), "{url:?}");
    }
}

#[test]
fn dot_segments_resolve_before_the_check_and_encoded_ones_are_refused() {
    let sources = local_sources();
    for (url, parsed) in [
        ("http://127.0.0.1:4873/npm/../secret", "http://127.0.0.1:4873/secret"),
        ("http://127.0.0.1:4873/npm/%2e%2e/secret", "http://127.0.0.1:4873/secret"),
        ("http://127.0.0.1:4873/npm/%2E%2e/secret", "http://127.0.0.1:4873/secret"),
        ("http://127.0.0.1:4873/npm/.%2E/secret", "http://127.0.0.1:4873/secret"),
        ("http://127.0.0.1:4873/npm\\..\\secret", "http://127.0.0.1:4873/secret"),
        ("http://127.0.0.1:4873/npm/x/../../pypi/../secret", "http://127.0.0.1:4873/secret"),
        ("http://127.0.0.1:4873/npmx/lodash", "http://127.0.0.1:4873/npmx/lodash"),
    ] {
        assert!(admitted(&sources, url).unwrap_err().starts_with(&format!("{parsed} is not under")), "{url}");
    }
    for url in [
        "http://127.0.0.1:4873/npm/%2e%2e%2fsecret",
        "http://127.0.0.1:4873/npm/..%2Fsecret",
        "http://127.0.0.1:4873/npm/a%2F..%2F..%2Fsecret",
        "http://127.0.0.1:4873/npm/a%5c..%5c..%5csecret",
        "http://127.0.0.1:4873/npm/%252e%252e/secret",
        "http://127.0.0.1:4873/npm/%25252e%25252e/secret",
        "http://127.0.0.1:4873/npm/%2525252525252e",
        "http://127.0.0.1:4873/npm/lodash%00",
    ] {
        let refusal = admitted(&sources, url).unwrap_err();
        assert!(refusal.contains("path segment"), "{url}: {refusal}");
    }
    // What stays inside the base is admitted as parsed: that URL is the one fetched.
    for (url, parsed) in [
        ("http://127.0.0.1:4873/npm/x/../lodash", "http://127.0.0.1:4873/npm/lodash"),
        ("http://127.0.0.1:4873/npm/@types%2fnode", "http://127.0.0.1:4873/npm/@types%2fnode"),
        ("http://127.0.0.1:4873/npm/lo\tdash", "http://127.0.0.1:4873/npm/lodash"),
        ("http://2130706433:4873/npm/lodash", "http://127.0.0.1:4873/npm/lodash"),
        ("http://127.0.0.1:4873/pypi/pypi/six/json?x=1", "http://127.0.0.1:4873/pypi/pypi/six/json?x=1"),
        ("https://FILES.example.org:443/a/b.whl", "https://files.example.org/a/b.whl"),
    ] {
        assert_eq!(admitted(&sources, url).as_deref(), Ok(parsed), "{url}");
    }
}

#[test]
fn another_host_port_scheme_or_credentials_are_refused() {
    let sources = local_sources();
    for url in [
        "http://127.0.0.1:4874/npm/lodash",
        "http://127.0.0.1/npm/lodash",
        "https://127.0.0.1:4873/npm/lodash",
        "http://localhost:4873/npm/lodash",
        "http://user:pw@127.0.0.1:4873/npm/lodash",
        "http://evil.com@127.0.0.1:4873/npm/lodash",
        "http://127.0.0.1:4873@evil.com/npm/lodash",
        "http://127.0.0.1:4873\\@evil.com/npm/lodash",
        "https://files.example.org./a.whl",
        "https://files.example.org:8443/a.whl",
        "https://fıles.example.org/a.whl",
        "https://xn--fles-6qa.example.org/a.whl",
        "ftp://127.0.0.1:4873/npm/lodash",
        "/npm/lodash",
    ] {
        assert!(admitted(&sources, url).is_err(), "{url}");
    }
    // IDNA maps fullwidth letters to the same host: the same source, as a browser would see it.
    assert_eq!(
        admitted(&sources, "https://ｆｉｌｅｓ.example.org/a.whl").as_deref(),
        Ok("https://files.example.org/a.whl")
    );
}

/// The path segments a server lands on when it percent-decodes the path `rounds` times, takes
/// `\` for `/`, and resolves dot segments: a model of a careless upstream, independent of `admit`.
fn server_lands_on(url: &url::Url, rounds: usize) -> Vec<String> {
    let mut path = url.path().to_owned();
    for _ in 0..rounds {
        path = percent_encoding::percent_decode_str(&path).decode_utf8_lossy().into_owned();
    }
    let mut landed: Vec<String> = Vec::new();
    for part in path.replace('\\', "/").split('/').filter(|p| !p.is_empty()) {
        match part {
            "." => {}
            ".." => {
                landed.pop();
            }
            _ => landed.push(part.to_owned()),
        }
    }
    landed
}

/// What must hold of every URL `admit` lets through, checked against a model, not its code.
fn assert_admitted_stays_inside(sources: &PackageSources, raw: &str) -> Result<(), TestCaseError> {
    let Ok(admitted) = sources.admit(raw) else { return Ok(()) };
    let url = &admitted.url;
    let parsed = url::Url::parse(raw).ok();
    prop_assert_eq!(Some(url), parsed.as_ref(), "the URL fetched is the one a parser makes of {:?}", raw);
    let base = url::Url::parse(admitted.base).unwrap();
    prop_assert_eq!(
        (url.scheme(), url.host(), url.port_or_known_default()),
        (base.scheme(), base.host(), base.port_or_known_default()),
        "{:?}",
        raw
    );
    prop_assert!(url.username().is_empty() && url.password().is_none() && url.fragment().is_none(), "{:?}", raw);
    let base_path = server_lands_on(&base, 0);
    for rounds in 0..3 {
        let landed = server_lands_on(url, rounds);
        prop_assert!(landed.starts_with(&base_path), "{:?} lands on {:?} after {} decodings", raw, landed, rounds);
        prop_assert!(!landed.iter().any(|s| s.chars().any(char::is_control)), "{:?}", raw);
    }
    Ok(())
}

#[test]
fn sources_are_validated_naming_the_bad_base() {
    assert_eq!(PackageSources::default().validate(), Ok(()));
    let local = PackageSources { npm_registry: "http://127.0.0.1:4873".into(), ..PackageSources::default() };
    assert_eq!(local.validate(), Ok(()));
    for (field, base) in [
        ("npmRegistry", "registry.npmjs.org"),
        ("npmRegistry", "https://registry.npmjs.org/"),
        ("npmRegistry", "https://"),
        ("npmRegistry", "ftp://registry.npmjs.org"),
        ("npmRegistry", "https://u:p@registry.npmjs.org"),
        ("npmRegistry", "https://registry.npmjs.org?x=1"),
        ("npmRegistry", "https://registry.npmjs.org#x"),
    ] {
        let sources = PackageSources { npm_registry: base.into(), ..PackageSources::default() };
        assert!(sources.validate().unwrap_err().starts_with(&format!("packages.{field}:")), "{base}");
    }
    let sources = PackageSources { pypi_files: "files".into(), ..PackageSources::default() };
    assert!(sources.validate().unwrap_err().starts_with("packages.pypiFiles:"));
}

#[test]
fn a_partial_sources_document_keeps_the_public_defaults_for_the_rest() {
    let sources: PackageSources = serde_json::from_value(json!({ "npmRegistry": "http://127.0.0.1:4873" })).unwrap();
    assert_eq!(sources.npm_registry, "http://127.0.0.1:4873");
    assert_eq!(sources.pypi_index, PackageSources::default().pypi_index);
    assert_eq!(sources.pypi_files, PackageSources::default().pypi_files);
}

// ---- grants ---------------------------------------------------------------------------------

fn signer() -> Signer {
    Signer::from_seed(&[42; 32])
}

fn keys() -> KeySet {
    KeySet::from_signers(&[&signer()])
}

fn run_ref() -> RunRef {
    RunRef { tenant: "t1".into(), session: "s1".into(), run: "r1".into() }
}

#[test]
fn a_grant_verifies_with_its_key_until_it_expires() {
    let grant = UploadGrant::new(&run_ref(), "deps", SHA, 1234, NOW_S, "j1".into());
    let token = grant.sign(&signer());
    assert_eq!(UploadGrant::verify(&token, &keys(), NOW_S + GRANT_TTL_S - 1), Ok(grant.clone()));
    let late = UploadGrant::verify(&token, &keys(), NOW_S + GRANT_TTL_S + 120).unwrap_err();
    assert!(late.contains("expired") && late.contains("/capsule/presign"), "{late}");
    let stranger = KeySet::from_signers(&[&Signer::from_seed(&[7; 32])]);
    assert!(UploadGrant::verify(&token, &stranger, NOW_S).unwrap_err().starts_with("invalid upload grant"));
}

#[test]
fn a_grant_with_a_changed_claim_or_another_typ_does_not_verify() {
    let token = UploadGrant::new(&run_ref(), "deps", SHA, 1234, NOW_S, "j1".into()).sign(&signer());
    let mut parts: Vec<String> = token.split('.').map(String::from).collect();
    let larger = UploadGrant::new(&run_ref(), "deps", SHA, 9_999_999, NOW_S, "j1".into()).sign(&signer());
    parts[1] = larger.split('.').nth(1).unwrap().to_string();
    assert!(UploadGrant::verify(&parts.join("."), &keys(), NOW_S).is_err(), "a payload from another grant");
    let capsule_typ = signer().sign(
        &serde_json::to_vec(&UploadGrant::new(&run_ref(), "deps", SHA, 1, NOW_S, "j".into())).unwrap(),
        Some("relay-capsule+jws"),
    );
    assert!(UploadGrant::verify(&capsule_typ, &keys(), NOW_S).is_err(), "a capsule signature is not a grant");
    assert!(UploadGrant::verify("not-a-token", &keys(), NOW_S).is_err());
}

// ---- pending builds -------------------------------------------------------------------------

fn claim(sha256: &str, size: u64) -> LayerClaim {
    LayerClaim { id: "deps".into(), sha256: sha256.into(), size }
}

fn run_policy() -> Policy {
    let mut policy = Policy::default();
    policy.network.allowed_domains = vec!["example.com".into()];
    policy.limits.timeout_ms = 30_000;
    policy
}

fn pending() -> PendingBuild {
    let spec = CapsuleSpec {
        language: Language::Js,
        code: "import _ from 'lodash'".into(),
        entry_argv: vec![],
        env: BTreeMap::new(),
        stdin: None,
        cwd: "/".into(),
        policy: run_policy(),
        deps: Deps::None,
    };
    let request = npm_of(&[("lodash", "4.17.21")]);
    PendingBuild::new(request.key(Language::Js, &PackageSources::default()), request, spec)
}

fn counter() -> impl FnMut() -> String {
    let mut n = 0;
    move || {
        n += 1;
        format!("jti-{n}")
    }
}

/// A build whose deps layer (SHA, 5000 bytes) was granted and uploaded.
fn uploaded() -> PendingBuild {
    let mut build = pending();
    let grants = build.presign(&run_ref(), &[claim(SHA, 5000)], NOW_S, counter()).unwrap();
    build.spend(&grants[0]).unwrap();
    build
}

fn proposal(value: Value) -> Proposal {
    serde_json::from_value(value).unwrap()
}

#[test]
fn presign_grants_the_deps_layer_bound_to_its_run_digest_and_size() {
    let mut build = pending();
    let grants = build.presign(&run_ref(), &[claim(SHA, 5000)], NOW_S, counter()).unwrap();
    let [grant] = grants.as_slice() else { panic!("{grants:?}") };
    assert_eq!((grant.sub.as_str(), grant.sid.as_str(), grant.run.as_str()), ("t1", "s1", "r1"));
    assert_eq!((grant.layer.as_str(), grant.sha256.as_str(), grant.size), ("deps", SHA, 5000));
    assert_eq!(grant.exp, NOW_S + GRANT_TTL_S);
    let again = build.presign(&run_ref(), &[claim(SHA, 5000)], NOW_S, || "jti-2".into()).unwrap();
    assert_ne!(again[0].jti, grant.jti, "every grant is a new one");
}

#[test]
fn presign_refuses_claims_that_are_not_one_sane_deps_layer() {
    let mut build = pending();
    let refused = |build: &mut PendingBuild, layers: &[LayerClaim]| {
        build.presign(&run_ref(), layers, NOW_S, counter()).unwrap_err()
    };
    let err = refused(&mut build, &[]);
    assert_eq!((err.status(), err.name.as_str()), (400, "ValidationError"));
    for (layer, says) in [
        (LayerClaim { id: "code".into(), sha256: SHA.into(), size: 10 }, "\"code\""),
        (claim(&SHA.to_uppercase(), 10), "64 lowercase hex"),
        (claim(&SHA[1..], 10), "64 lowercase hex"),
        (claim(&format!("{}g", &SHA[1..]), 10), "64 lowercase hex"),
        (claim(SHA, 0), "above 0"),
    ] {
        let err = refused(&mut build, std::slice::from_ref(&layer));
        assert_eq!((err.status(), err.name.as_str()), (400, "ValidationError"), "{layer:?}");
        assert!(err.message.contains(says), "{layer:?}: {}", err.message);
    }
    let err = refused(&mut build, &[claim(SHA, 20 * 1024 * 1024 + 1)]);
    assert_eq!((err.status(), err.name.as_str()), (413, "PayloadTooLarge"));
    assert!(err.message.contains("deps layer"), "{}", err.message);
    assert!(
        build.presign(&run_ref(), &[claim(SHA, 20 * 1024 * 1024)], NOW_S, counter()).is_ok(),
        "20 MiB exactly fits"
    );
}

#[test]
fn a_grant_is_spent_once_and_only_by_the_build_that_gave_it() {
    let mut build = pending();
    let grants = build.presign(&run_ref(), &[claim(SHA, 5000)], NOW_S, counter()).unwrap();
    assert_eq!(build.spend(&grants[0]), Ok(()));
    let replay = build.spend(&grants[0]).unwrap_err();
    assert_eq!((replay.status(), replay.name.as_str()), (409, "GrantSpent"));
    let foreign = UploadGrant::new(&run_ref(), "deps", SHA, 5000, NOW_S, "from-another-build".into());
    let err = pending().spend(&foreign).unwrap_err();
    assert_eq!((err.status(), err.name.as_str()), (404, "NotFound"));
    assert_eq!(build.spend(&foreign).unwrap_err().status(), 404);
}

#[test]
fn finalize_refuses_a_layer_that_was_granted_but_never_uploaded() {
    let mut build = pending();
    build.presign(&run_ref(), &[claim(SHA, 5000)], NOW_S, counter()).unwrap();
    let err =
        build.finalize(&proposal(json!({ "layers": [{ "id": "deps", "sha256": SHA, "size": 5000 }] })), 0).unwrap_err();
    assert_eq!((err.status(), err.name.as_str()), (409, "LayerNotUploaded"));
    assert!(err.message.contains(SHA) && err.message.contains("5000"), "{}", err.message);
}

#[test]
fn finalize_signs_the_uploaded_layer_with_the_runs_policy() {
    let build = uploaded();
    let (spec, record) = build
        .finalize(
            &proposal(
                json!({ "layers": [{ "id": "deps", "sha256": SHA, "size": 5000 }], "resolved": ["lodash@4.17.21"] }),
            ),
            77,
        )
        .unwrap();
    let Deps::Uploaded(layer) = &spec.deps else { panic!("{:?}", spec.deps) };
    assert_eq!((layer.id.as_str(), layer.sha256.as_str(), layer.size), ("deps", SHA, 5000));
    assert_eq!(spec.policy, run_policy());
    assert_eq!(spec.code, build.spec.code);
    assert_eq!(record.layer, *layer);
    assert_eq!(record.resolved, vec!["lodash@4.17.21".to_string()]);
    assert_eq!(record.built_at_ms, 77);
    assert!(record.pinned, "lodash 4.17.21 is one exact version");
}

#[test]
fn finalize_refuses_claims_that_differ_from_the_upload() {
    let build = uploaded();
    let other = "f".repeat(64);
    for (layers, status) in [
        (json!([{ "id": "deps", "sha256": other, "size": 5000 }]), 409),
        (json!([{ "id": "deps", "sha256": SHA, "size": 5001 }]), 409),
        (json!([{ "id": "deps", "sha256": SHA, "size": 4999 }]), 409),
        (json!([]), 400),
        (json!([{ "id": "deps", "sha256": SHA, "size": 5000 }, { "id": "deps", "sha256": SHA, "size": 5000 }]), 400),
        (json!([{ "id": "code", "sha256": SHA, "size": 5000 }]), 400),
    ] {
        let err = build.finalize(&proposal(json!({ "layers": layers })), 0).unwrap_err();
        assert_eq!(err.status(), status, "{layers}: {}", err.message);
    }
}

#[test]
fn finalize_refuses_a_policy_wider_than_the_runs_naming_the_section() {
    let build = uploaded();
    let layers = json!([{ "id": "deps", "sha256": SHA, "size": 5000 }]);
    let wider = |change: fn(&mut Policy)| {
        let mut policy = run_policy();
        change(&mut policy);
        serde_json::to_value(policy).unwrap()
    };
    for (section, policy) in [
        ("limits", wider(|p| p.limits.timeout_ms = 120_000)),
        ("limits", wider(|p| p.limits.mem_mb += 1)),
        ("network", wider(|p| p.network.allowed_domains.push("evil.com".into()))),
        ("network", wider(|p| p.network.deny_ip_literals = false)),
    ] {
        let err = build.finalize(&proposal(json!({ "layers": layers, "policy": policy })), 0).unwrap_err();
        assert_eq!((err.status(), err.name.as_str()), (403, "PolicyDenied"), "{policy}");
        assert!(err.message.starts_with(&format!("policy.{section}:")), "{}", err.message);
    }
}

#[test]
fn finalize_accepts_a_policy_that_only_narrows() {
    let build = uploaded();
    let mut narrower = run_policy();
    narrower.limits.timeout_ms = 5_000;
    narrower.network.allowed_domains = vec![];
    let body = json!({ "layers": [{ "id": "deps", "sha256": SHA, "size": 5000 }], "policy": narrower });
    let (spec, _) = build.finalize(&proposal(body), 0).unwrap();
    assert_eq!(spec.policy.limits.timeout_ms, 5_000);
    assert!(spec.policy.network.allowed_domains.is_empty());
}

#[test]
fn finalize_caps_what_a_tab_says_it_resolved() {
    let build = uploaded();
    let too_many: Vec<String> = (0..1001).map(|i| format!("p{i}@1.0.0")).collect();
    let too_long = vec!["x".repeat(301)];
    for resolved in [too_many, too_long] {
        let body = json!({ "layers": [{ "id": "deps", "sha256": SHA, "size": 5000 }], "resolved": resolved });
        assert_eq!(build.finalize(&proposal(body), 0).unwrap_err().status(), 400);
    }
}

#[test]
fn a_proposal_with_unknown_fields_is_not_a_proposal() {
    let body = json!({ "layers": [], "signature": "trust me" });
    assert!(serde_json::from_value::<Proposal>(body).is_err());
    let body = json!({ "layers": [{ "id": "deps", "sha256": SHA, "size": 1, "path": "/etc" }] });
    assert!(serde_json::from_value::<Proposal>(body).is_err());
}

#[test]
fn a_build_with_ranges_is_reused_for_a_day_and_a_pinned_one_always() {
    let record = |pinned| BuildRecord {
        layer: relay_core::capsule::layer_entry("deps", SHA, 5000),
        resolved: vec![],
        built_at_ms: 1_000,
        pinned,
    };
    assert!(record(false).reusable(1_000 + RANGES_REUSED_MS - 1));
    assert!(!record(false).reusable(1_000 + RANGES_REUSED_MS));
    assert!(record(true).reusable(1_000 + 10 * RANGES_REUSED_MS));
    assert!(record(false).reusable(0), "a clock behind the record does not make it stale");
}

proptest! {
    /// A URL is admitted only on a base's own host, however it is spelled after the host;
    /// and on those hosts, a plain path always is.
    #[test]
    fn only_urls_on_a_base_host_are_admitted(
        host in "(registry\\.npmjs\\.org|pypi\\.org|files\\.pythonhosted\\.org|[a-z]{1,12}(\\.[a-z]{2,5}){1,2})",
        tail in "[a-z0-9/._@#:-]{0,30}",
        plain in "[a-z0-9-]{1,20}",
    ) {
        let sources = PackageSources::default();
        let known = ["registry.npmjs.org", "pypi.org", "files.pythonhosted.org"].contains(&host.as_str());
        if let Ok(admitted) = sources.admit(&format!("https://{host}{tail}")) {
            prop_assert!(known, "{host}{tail}");
            prop_assert_eq!(admitted.url.host_str(), Some(host.as_str()));
        }
        prop_assert_eq!(sources.admit(&format!("https://{host}/{plain}")).is_ok(), known);
    }

    /// Finalize never accepts a claim that differs from the one uploaded.
    #[test]
    fn only_the_uploaded_claim_finalizes(sha in "[0-9a-f]{64}", size in 1u64..20_000) {
        let build = uploaded();
        let body = json!({ "layers": [{ "id": "deps", "sha256": sha, "size": size }] });
        let accepted = build.finalize(&proposal(body), 0).is_ok();
        prop_assert_eq!(accepted, sha == SHA && size == 5000);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// Hostile spellings (every ASCII control character, dots and slashes percent-encoded in
    /// either case and encoded again, backslashes, `@`, userinfo, ports, IDNA) never get a URL
    /// through that a decoding server would resolve outside its source's base.
    #[test]
    fn no_spelling_leaves_a_base(
        origin in prop::sample::select(vec![
            "http://127.0.0.1:4873", "http://127.0.0.1:4874", "http://127.0.0.1", "https://127.0.0.1:4873",
            "http://2130706433:4873", "http://user:pw@127.0.0.1:4873", "http://evil.com@127.0.0.1:4873",
            "http://127.0.0.1:4873@evil.com", "https://files.example.org", "https://FILES.example.org:443",
            "https://files.example.org.", "https://ｆｉｌｅｓ.example.org", "https://fıles.example.org",
        ]),
        path in prop::sample::select(vec!["/", "/npm/", "/pypi/", "/npm/x/"]),
        pieces in prop::collection::vec(prop_oneof![
            4 => prop::sample::select(vec!["/", "npm", "pypi", "six", "a", "-", "%40"]).prop_map(str::to_owned),
            3 => prop::sample::select(vec![
                "/", "\\", ".", "..", "%2e", "%2E", "%2f", "%2F", "%5c", "%5C", "%25", "%252e", "%252F",
                "@", ":", "?", "#", "npm", "pypi", "secret", "a", "%00", "%7f", " ",
            ]).prop_map(str::to_owned),
            1 => (0u8..0x20).prop_map(|b| (b as char).to_string()),
            1 => Just("\u{7f}".to_owned()),
        ], 0..14),
    ) {
        let raw = format!("{origin}{path}{}", pieces.concat());
        assert_admitted_stays_inside(&local_sources(), &raw)?;
        assert_admitted_stays_inside(&PackageSources::default(), &raw)?;
    }
}
