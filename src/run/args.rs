//! `run_js` / `run_py` arguments (as the tools' input schemas define them) turned into a
//! capsule spec, with the client's policy override intersected with the tenant's defaults.
//! Every refusal is a ValidationError that names the argument and says how to fix it.

use crate::capsule::manifest::Language;
use crate::capsule::CapsuleSpec;
use crate::error::ErrorName;
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
    let npm: Option<Map<String, Value>> = field(arguments, "npm")?;
    let pip: Option<Map<String, Value>> = field(arguments, "pip")?;
    refuse_dependencies("npm", npm.as_ref(), "dependencies")?;
    refuse_dependencies("pip", pip.as_ref(), "requirements")?;
    refuse_dependencies("pip", pip.as_ref(), "wheelUrls")?;
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
        deps: None,
    })
}

/// Dependencies need a build step that is not there yet: say so rather than ignore them.
fn refuse_dependencies(tool: &str, section: Option<&Map<String, Value>>, field: &str) -> Result<(), ArgsError> {
    let listed = section.and_then(|s| s.get(field)).is_some_and(|v| match v {
        Value::Object(map) => !map.is_empty(),
        Value::Array(list) => !list.is_empty(),
        Value::Null => false,
        _ => true,
    });
    if listed {
        return Err(invalid(format!(
            "{tool}.{field}: dependencies are not supported yet; inline the code you need (a later release builds {tool} dependencies into the capsule's deps layer)"
        )));
    }
    Ok(())
}
