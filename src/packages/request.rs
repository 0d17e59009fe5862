//! The dependencies of a `run_js` / `run_py` call, checked for shape (the registry decides
//! whether they exist), and the key that names their build.

use crate::capsule::canonical::{canonical_json, sha256_hex};
use crate::capsule::Language;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

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
    /// npm packages by name and version range (`"lodash": "^4.17.0"`).
    Npm { dependencies: BTreeMap<String, String> },
    /// PEP 508 requirements without extras or markers, and direct wheel URLs.
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
            let tool = if language == Language::Js { "run_js" } else { "run_py" };
            return Err(format!("{other}: {tool} takes {mine} dependencies, not {other}"));
        }
        let Some(section) = arguments.get(mine).filter(|v| !v.is_null()) else { return Ok(None) };
        let request = match language {
            Language::Js => npm(section)?,
            Language::Py => pip(section)?,
        };
        Ok(Some(request).filter(|r| !r.is_empty()))
    }

    fn is_empty(&self) -> bool {
        match self {
            DepsRequest::Npm { dependencies } => dependencies.is_empty(),
            DepsRequest::Pip { requirements, wheel_urls } => requirements.is_empty() && wheel_urls.is_empty(),
        }
    }

    /// Whether every dependency names one exact version (or one wheel file): then the build
    /// never goes stale (see [`super::BuildRecord::reusable`]).
    pub fn pinned(&self) -> bool {
        match self {
            DepsRequest::Npm { dependencies } => dependencies.values().all(|range| exact_semver(range)),
            DepsRequest::Pip { requirements, .. } => requirements.iter().all(|r| pinned_requirement(r)),
        }
    }

    /// The key of this request's build for `language` from `sources`: sha256 of their
    /// canonical JSON. The same key always means the same layer may be reused.
    pub fn key(&self, language: Language, sources: &PackageSources) -> String {
        let document = json!({ "v": 1, "language": language, "request": self, "sources": sources });
        sha256_hex(&canonical_json(&document).expect("strings and maps only"))
    }
}

fn npm(section: &Value) -> Result<DepsRequest, String> {
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
    Ok(DepsRequest::Npm { dependencies })
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
    let requirement_entries = requirements.iter().map(|r| (project_key(split_requirement(r).0), format!("{r:?}")));
    let wheel_entries = wheel_urls.iter().map(|u| (project_key(wheel_project(u)), format!("the wheel URL {u:?}")));
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

/// A project name as PEP 503 compares them: lowercase, each run of `-`, `_`, `.` one `-`.
fn project_key(name: &str) -> String {
    let mut key = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !key.ends_with('-') {
                key.push('-');
            }
        } else {
            key.push(c.to_ascii_lowercase());
        }
    }
    key
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

/// A PEP 508 requirement reduced to what a wheel-only build can honour: a project name and an
/// optional version specifier set (`attrs`, `attrs==24.2.0`, `attrs>=23,<25`).
fn check_requirement(requirement: &str) -> Result<(), &'static str> {
    let (name, specifiers) = split_requirement(requirement);
    let name_ok = name.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if requirement.len() > MAX_SPEC_LEN {
        Err("is longer than 200 characters")
    } else if requirement.contains(['[', ';', '@']) {
        Err("uses extras, markers or a URL, which are not supported; list the package and its version, e.g. \"attrs==24.2.0\", or give the wheel's URL in pip.wheelUrls")
    } else if !name_ok {
        Err("does not start with a project name (letters, digits, . _ -)")
    } else if !specifiers.split(',').filter(|s| !s.trim().is_empty()).all(specifier_ok) {
        Err("has a version specifier that is not one of ==, !=, >=, <=, >, <, ~= followed by a version")
    } else {
        Ok(())
    }
}

/// The project name and the rest (the specifiers) of a requirement.
pub fn split_requirement(requirement: &str) -> (&str, &str) {
    let requirement = requirement.trim();
    let end = requirement.find(|c: char| "=!<>~ ".contains(c)).unwrap_or(requirement.len());
    (&requirement[..end], &requirement[end..])
}

fn specifier_ok(specifier: &str) -> bool {
    let specifier = specifier.trim();
    let version = ["==", "!=", ">=", "<=", "~=", ">", "<"].iter().find_map(|op| specifier.strip_prefix(op));
    version
        .map(str::trim)
        .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_alphanumeric() || b".*+!-_".contains(&b)))
}

fn pinned_requirement(requirement: &str) -> bool {
    let (_, specifiers) = split_requirement(requirement);
    let specifiers: Vec<&str> = specifiers.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    matches!(specifiers.as_slice(), [only] if only.starts_with("==") && !only.contains('*'))
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
