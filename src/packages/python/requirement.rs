//! PEP 508 requirements by name (`requests[socks]>=2.31,<3; python_version >= "3.8"`), as a
//! call's `pip.requirements` and a wheel's `Requires-Dist` write them. A URL requirement
//! (`name @ https://...`) is refused: a wheel's URL goes in `pip.wheelUrls`.

use super::marker::{Environment, Marker};
use super::name::canonical_name;
use super::version::SpecifierSet;
use std::fmt;

/// The longest requirement read.
pub const MAX_REQUIREMENT_LEN: usize = 1024;

#[derive(Debug, Clone)]
pub struct Requirement {
    /// The name as written.
    pub name: String,
    /// Extra names, normalized, in the order written.
    pub extras: Vec<String>,
    pub specifiers: SpecifierSet,
    pub marker: Option<Marker>,
}

impl Requirement {
    pub fn parse(text: &str) -> Result<Requirement, String> {
        if text.len() > MAX_REQUIREMENT_LEN {
            return Err(format!("is longer than {MAX_REQUIREMENT_LEN} bytes"));
        }
        let (body, marker) = match text.split_once(';') {
            Some((body, marker)) => (body, Some(Marker::parse(marker.trim())?)),
            None => (text, None),
        };
        let body = body.trim();
        let name_length = body.bytes().take_while(|b| b.is_ascii_alphanumeric() || b"._-".contains(b)).count();
        let name = &body[..name_length];
        check_name(name)?;
        let mut rest = body[name_length..].trim_start();
        let mut extras = Vec::new();
        if let Some(after) = rest.strip_prefix('[') {
            let (list, tail) = after.split_once(']').ok_or("has a \"[\" without its \"]\"")?;
            for extra in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                check_name(extra).map_err(|why| format!("extra {extra:?}: {why}"))?;
                extras.push(canonical_name(extra));
            }
            rest = tail.trim_start();
        }
        if rest.starts_with('@') {
            return Err(
                "is a URL requirement (name @ url), which is not supported; give a wheel's URL in pip.wheelUrls".into(),
            );
        }
        let specifiers = match rest.strip_prefix('(') {
            Some(inner) => inner.strip_suffix(')').ok_or("has a \"(\" without its \")\"")?,
            None => rest,
        };
        let specifiers = SpecifierSet::parse(specifiers)?;
        Ok(Requirement { name: name.to_owned(), extras, specifiers, marker })
    }

    /// The project's name as PEP 503 compares names.
    pub fn key(&self) -> String {
        canonical_name(&self.name)
    }

    /// Whether the requirement applies in `env` when any of `extras` (or none) was asked for.
    pub fn applies(&self, env: &Environment, extras: &[String]) -> bool {
        let Some(marker) = &self.marker else { return true };
        if !marker.mentions_extra() {
            return marker.evaluate(env, "");
        }
        std::iter::once("").chain(extras.iter().map(String::as_str)).any(|extra| marker.evaluate(env, extra))
    }
}

impl fmt::Display for Requirement {
    /// The requirement without its marker: `requests[socks]>=2.31`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if !self.extras.is_empty() {
            write!(f, "[{}]", self.extras.join(","))?;
        }
        write!(f, "{}", self.specifiers)
    }
}

/// A project or extra name as PEP 508 allows: letters and digits, with `.`, `_`, `-` inside.
fn check_name(name: &str) -> Result<(), String> {
    let edge_ok = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_alphanumeric());
    if name.is_empty() {
        Err("does not start with a project name (letters, digits, . _ -)".into())
    } else if !edge_ok(name.bytes().next()) || !edge_ok(name.bytes().last()) {
        Err(format!("{name:?} is not a project name: a name starts and ends with a letter or digit"))
    } else {
        Ok(())
    }
}
