//! `run_js` / `run_py` arguments (as the tools' input schemas define them) turned into a
//! capsule spec, with the client's policy override intersected with the tenant's defaults.
//! Its dependencies (`npm`, `pip`) are read apart ([`deps_request`]): they need a build.
//! Every refusal is a ValidationError that names the argument and says how to fix it.

use crate::capsule::manifest::Language;
use crate::capsule::{CapsuleSpec, Deps};
use crate::error::ErrorName;
use crate::packages::DepsRequest;
use crate::policy::{intersect, Policy, PolicyOverride};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A refused tool call: its error name and a message for the agent.
#[derive(Debug, Clone, PartialEq)]
pub struct ArgsError {
    pub name: ErrorName,
    pub message: String,
}

pub(crate) fn invalid(message: impl Into<String>) -> ArgsError {
    ArgsError { name: ErrorName::ValidationError, message: message.into() }
}

/// One argument, `None` when absent or null. Read one by one (not as one derived struct) so
/// that a wrong type names its argument, and a JSON array is not taken field by field.
fn field<T: DeserializeOwned>(arguments: &Map<String, Value>, name: &str) -> Result<Option<T>, ArgsError> {
    match arguments.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => T::deserialize(value).map(Some).map_err(|e| invalid(format!("{name}: {e}"))),
    }
}

/// The language a tool runs, from its name (`run_js`, `run_py`) or `js`/`py`.
pub fn language_of(name: &str) -> Option<Language> {
    match name {
        "run_js" | "js" => Some(Language::Js),
        "run_py" | "py" => Some(Language::Py),
        _ => None,
    }
}

/// Builds the capsule spec of a run from its tool arguments.
pub fn capsule_spec(language: &str, arguments: &Value, tenant_policy: &Policy) -> Result<CapsuleSpec, ArgsError> {
    let language = language_of(language).ok_or_else(|| invalid("language: expected \"js\" or \"py\""))?;
    let arguments = arguments.as_object().ok_or_else(|| invalid("arguments: expected a JSON object"))?;
    let code: String = field(arguments, "code")?.unwrap_or_default();
    if code.trim().is_empty() {
        return Err(invalid("code: must not be empty"));
    }
    let stdin: Option<String> = field(arguments, "stdin")?;
    let entry_argv: Vec<String> = field(arguments, "args")?.unwrap_or_default();
    let env: BTreeMap<String, String> = field(arguments, "env")?.unwrap_or_default();
    let policy: Option<PolicyOverride> = field(arguments, "policy")?;
    let cwd: String = field(arguments, "cwd")?.unwrap_or_else(|| "/".into());
    if !cwd.starts_with('/') || cwd.split('/').any(|s| s == "..") {
        return Err(invalid(format!("cwd: {cwd:?} must be an absolute path without `..`")));
    }
    Ok(CapsuleSpec {
        language,
        code,
        entry_argv,
        env,
        stdin: stdin.filter(|s| !s.is_empty()),
        cwd,
        policy: intersect(tenant_policy, policy.as_ref()),
        deps: Deps::None,
    })
}

/// The dependencies a run asks for in `npm` (run_js) or `pip` (run_py), if any.
pub fn deps_request(language: &str, arguments: &Value) -> Result<Option<DepsRequest>, ArgsError> {
    let language = language_of(language).ok_or_else(|| invalid("language: expected \"js\" or \"py\""))?;
    let arguments = arguments.as_object().ok_or_else(|| invalid("arguments: expected a JSON object"))?;
    DepsRequest::from_arguments(language, arguments).map_err(invalid)
}
