//! The dependencies of a `run_js` / `run_py` call, checked for shape (the registry decides
//! whether they exist), and the key that names their build.

use crate::capsule::canonical::{canonical_json, sha256_hex};
use crate::capsule::Language;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

use super::imports::{subpath_imports, MAX_SUBPATHS};
use super::python::{canonical_name, Requirement};
use super::sources::PackageSources;

/// Most packages one call may list (npm dependencies, or requirements plus wheel URLs).
pub const MAX_DEPENDENCIES: usize = 50;
/// The longest version range or requirement accepted.
const MAX_SPEC_LEN: usize = 200;
/// The longest wheel URL accepted.
const MAX_URL_LEN: usize = 2048;

/// What a run asks to have installed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "ecosystem", rename_all = "camelCase")]
pub enum DepsRequest {
    /// npm packages by name and version range (`"lodash": "^4.17.0"`), and the subpaths of
    /// them the call's code imports (`lodash/chunk`), each bundled apart.
    Npm {
        dependencies: BTreeMap<String, String>,
        #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
        subpaths: BTreeSet<String>,
    },
    /// PEP 508 requirements by name (extras and markers allowed), and direct wheel URLs.
    #[serde(rename_all = "camelCase")]
    Pip { requirements: Vec<String>, wheel_urls: Vec<String> },
}

impl DepsRequest {
    /// The dependencies in a call's `npm` / `pip` argument, if it lists any; a message naming
    /// the argument otherwise.
    pub fn from_arguments(language: Language, arguments: &Map<String, Value>) -> Result<Option<Self>, String> {
        let (mine, other) = match language {
            Language::Js => ("npm", "pip"),
            Language::Py => ("pip", "npm"),
        };
        if arguments.get(other).is_some_and(|v| !v.is_null()) {
            let tool = language.tool_name();
            return Err(format!("{other}: {tool} takes {mine} dependencies, not {other}"));
        }
        let Some(section) = arguments.get(mine).filter(|v| !v.is_null()) else { return Ok(None) };
        let request = match language {
            Language::Js => npm(section, arguments.get("code").and_then(Value::as_str).unwrap_or_default())?,
            Language::Py => pip(section)?,
        };
        Ok(Some(request).filter(|r| !r.is_empty()))
    }

    fn is_empty(&self) -> bool {
        match self {
            DepsRequest::Npm { dependencies, .. } => dependencies.is_empty(),
            DepsRequest::Pip { requirements, wheel_urls } => requirements.is_empty() && wheel_urls.is_empty(),
        }
    }

    /// Whether every dependency names one exact version (or one wheel file): then the build
    /// never goes stale (see [`super::BuildRecord::reusable`]).
    pub fn pinned(&self) -> bool {
        match self {
            DepsRequest::Npm { dependencies, .. } => dependencies.values().all(|range| exact_semver(range)),
            DepsRequest::Pip { requirements, .. } => requirements.iter().all(|r| pinned_requirement(r)),
        }
    }

    /// The key of this request's build for `language` from `sources`: sha256 of their
    /// canonical JSON, with the runtime the layer is built for (a Python layer holds wheels of
    /// its ABI). The same key always means the same layer may be reused.
    pub fn key(&self, language: Language, sources: &PackageSources) -> String {
        let document = json!({ "v": 2, "language": language, "runtime": language.runtime_id(), "request": self, "sources": sources });
        sha256_hex(&canonical_json(&document).expect("strings and maps only"))
    }
}

fn npm(section: &Value, code: &str) -> Result<DepsRequest, String> {
    let section =
        section.as_object().ok_or("npm: expected an object like {\"dependencies\": {\"lodash\": \"^4.17.0\"}}")?;
    refuse_unknown("npm", section, &["dependencies"])?;
    let dependencies: BTreeMap<String, String> = match section.get("dependencies") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(value) => serde_json::from_value(value.clone()).map_err(|_| {
            "npm.dependencies: expected an object of package name -> version range, e.g. {\"lodash\": \"^4.17.0\"}"
        })?,
    };
    if dependencies.len() > MAX_DEPENDENCIES {
        return Err(format!("npm.dependencies: {} packages listed; at most {MAX_DEPENDENCIES}", dependencies.len()));
    }
    for (name, range) in &dependencies {
        check_npm_name(name).map_err(|why| format!("npm.dependencies: {name:?} is not an npm package name: {why}"))?;
        check_npm_range(range).map_err(|why| format!("npm.dependencies.{name}: {range:?} {why}"))?;
    }
    let subpaths = subpath_imports(code, dependencies.keys());
    if subpaths.len() > MAX_SUBPATHS {
        return Err(format!(
            "code: imports {} subpaths of npm packages (like \"{}\"); at most {MAX_SUBPATHS}, each bundled apart: import the package itself instead",
            subpaths.len(),
            subpaths.first().map_or("", String::as_str)
        ));
    }
    Ok(DepsRequest::Npm { dependencies, subpaths })
}

fn pip(section: &Value) -> Result<DepsRequest, String> {
    let section = section.as_object().ok_or("pip: expected an object like {\"requirements\": [\"attrs==24.2.0\"]}")?;
    refuse_unknown("pip", section, &["requirements", "wheelUrls"])?;
    let list = |field: &str| -> Result<Vec<String>, String> {
        match section.get(field) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(value) => {
                serde_json::from_value(value.clone()).map_err(|_| format!("pip.{field}: expected an array of strings"))
            }
        }
    };
    let (requirements, wheel_urls) = (list("requirements")?, list("wheelUrls")?);
    if requirements.len() + wheel_urls.len() > MAX_DEPENDENCIES {
        return Err(format!(
            "pip: {} packages listed; at most {MAX_DEPENDENCIES}",
            requirements.len() + wheel_urls.len()
        ));
    }
    for requirement in &requirements {
        check_requirement(requirement).map_err(|why| format!("pip.requirements: {requirement:?} {why}"))?;
    }
    for url in &wheel_urls {
        check_wheel_url(url).map_err(|why| format!("pip.wheelUrls: {url:?} {why}"))?;
    }
    refuse_twice_named(&requirements, &wheel_urls)?;
    Ok(DepsRequest::Pip { requirements, wheel_urls })
}

/// Refuses a project listed twice (`six==1.16.0` and `six==1.15.0`, or `six` and a wheel of
/// six), naming both entries: the build would install one and drop the other without a word.
fn refuse_twice_named(requirements: &[String], wheel_urls: &[String]) -> Result<(), String> {
    let requirement_entries =
        requirements.iter().filter_map(|r| Some((Requirement::parse(r).ok()?.key(), format!("{r:?}"))));
    let wheel_entries = wheel_urls.iter().map(|u| (canonical_name(wheel_project(u)), format!("the wheel URL {u:?}")));
    let mut seen: Vec<(String, String)> = Vec::new();
    for (project, entry) in requirement_entries.chain(wheel_entries) {
        if let Some((_, first)) = seen.iter().find(|(p, _)| *p == project) {
            return Err(format!(
                "pip: {first} and {entry} both name project {project:?}; list each project once (one requirement can hold several specifiers, e.g. \"{project}>=1.15,<2\")"
            ));
        }
        seen.push((project, entry));
    }
    Ok(())
}

/// The project a wheel URL's file names (`six-1.16.0-py2.py3-none-any.whl` -> `six`): wheel
/// file names escape `-` inside the name as `_`, so the first `-` ends it.
fn wheel_project(url: &str) -> &str {
    let path = url.split(['?', '#']).next().unwrap_or_default();
    let file = path.rsplit('/').next().unwrap_or_default();
    file.split('-').next().unwrap_or_default()
}

fn refuse_unknown(section: &str, object: &Map<String, Value>, known: &[&str]) -> Result<(), String> {
    match object.keys().find(|key| !known.contains(&key.as_str())) {
        Some(key) => Err(format!("{section}.{key}: unknown field; {section} takes {}", known.join(", "))),
        None => Ok(()),
    }
}

/// npm's rules for new package names: lowercase, URL-safe, at most 214 characters, optionally
/// scoped (`@scope/name`).
pub fn check_npm_name(name: &str) -> Result<(), &'static str> {
    let segment_ok = |s: &str| {
        !s.is_empty()
            && !s.starts_with(['.', '_'])
            && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-._~".contains(&b))
    };
    let ok = match name.strip_prefix('@') {
        Some(scoped) => scoped.split_once('/').is_some_and(|(scope, rest)| segment_ok(scope) && segment_ok(rest)),
        None => segment_ok(name),
    };
    if name.len() > 214 {
        Err("it is longer than 214 characters")
    } else if !ok {
        Err("names are lowercase letters, digits and - . _ ~ (not starting with . or _), optionally @scope/name")
    } else {
        Ok(())
    }
}

fn check_npm_range(range: &str) -> Result<(), &'static str> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || " .^~<>=|*-+".contains(c);
    if range.trim().is_empty() || range.len() > MAX_SPEC_LEN {
        Err("must be a version or range of 1 to 200 characters, e.g. \"^4.17.0\" or \"4.17.21\"")
    } else if !range.chars().all(allowed) {
        Err("is not a registry version or range: git, file, URL, alias and workspace specs are not supported; use a version like \"^4.17.0\"")
    } else {
        Ok(())
    }
}

/// `1.2.3`, with an optional prerelease and build: one version, not a range.
fn exact_semver(range: &str) -> bool {
    let core = range.split(['-', '+']).next().unwrap_or_default();
    let numbers: Vec<&str> = core.split('.').collect();
    numbers.len() == 3 && numbers.iter().all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// A PEP 508 requirement by name (`attrs`, `requests[socks]>=2.31,<3`, `tomli; python_version
/// < "3.11"`), as the build's resolver reads it; not a URL.
fn check_requirement(requirement: &str) -> Result<(), String> {
    if requirement.len() > MAX_SPEC_LEN {
        return Err("is longer than 200 characters".into());
    }
    Requirement::parse(requirement).map(|_| ())
}

/// Whether a requirement is one version and nothing else: `==` without a wildcard (or `===`).
fn pinned_requirement(requirement: &str) -> bool {
    Requirement::parse(requirement).is_ok_and(|r| r.specifiers.0.len() == 1 && r.specifiers.pins())
}

fn check_wheel_url(url: &str) -> Result<(), &'static str> {
    let path = url.split(['?', '#']).next().unwrap_or_default();
    if url.len() > MAX_URL_LEN {
        Err("is longer than 2048 characters")
    } else if !(url.starts_with("https://") || url.starts_with("http://")) {
        Err("is not an http(s) URL")
    } else if !path.ends_with(".whl") {
        Err("does not name a .whl file; only wheels can be installed")
    } else {
        Ok(())
    }
}
