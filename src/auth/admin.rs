//! What an admin may set on a tenant, and the bounds it must keep: `POST /admin/tenants`
//! creates one (`{name, defaults?}`), `PATCH /admin/tenants/<id>` changes its name or defaults
//! with a JSON merge patch (RFC 7396: objects merge, arrays and values replace, `null` puts a
//! field back to its default). Both go through [`Tenant::validate`], so no route can store what
//! the other would refuse. The Worker's I/O is `durable/src/edge/tenants.rs`.

use serde_json::{Map, Value};

use super::tenant::{session_name_ok, QueueSettings, Tenant, TenantDefaults, SESSION_NAME_RULE};
use crate::policy::{bounded, MAX_TIMEOUT_MS};
use crate::retention::{MAX_UNUSED_DAYS, MIN_UNUSED_DAYS};
use crate::run::contexts;
use crate::text::is_hidden;
use crate::workspace;

/// The longest tenant name, in characters: it is shown in messages and on the page.
pub const MAX_NAME_CHARS: usize = 100;
/// The largest `outFileMaxBytes`: a Worker reads no request body over 100 MB.
pub const MAX_OUT_FILE_BYTES: u64 = 100 * 1024 * 1024;
/// The smallest workspace cap: room for a few small files.
pub const MIN_WORKSPACE_BYTES: u64 = 64 * 1024;
/// The most runs a relay session may hold waiting.
pub const MAX_QUEUED: u32 = 1000;
/// The longest a call may wait for a tab to attach: the client's request is open meanwhile.
pub const MAX_ATTACH_WAIT_MS: u64 = 5 * 60 * 1000;

impl Tenant {
    /// Refuses a name or defaults out of bounds, naming the field and what it may be.
    pub fn validate(&self) -> Result<(), String> {
        check_name(&self.name)?;
        self.defaults.validate().map_err(|why| format!("defaults.{why}"))
    }

    /// This tenant with `patch` (a JSON merge patch of `{name?, defaults?}`) applied and
    /// validated. Its id (and key) never change: a different tenant is a new one.
    pub fn patched(&self, patch: &[u8]) -> Result<Tenant, String> {
        let patch: Value = serde_json::from_slice(patch).map_err(|e| format!("the patch is not JSON: {e}"))?;
        let Value::Object(fields) = &patch else {
            return Err("the patch must be an object: {\"name\"?, \"defaults\"?}".into());
        };
        if let Some(other) = fields.keys().find(|k| !matches!(k.as_str(), "name" | "defaults")) {
            return Err(format!(
                "{other:?} cannot be patched: a tenant's name and defaults can; its id and key cannot (create a new tenant)"
            ));
        }
        if fields.get("name").is_some_and(Value::is_null) {
            return Err("name cannot be removed; give a new one".into());
        }
        let mut merged = serde_json::to_value(self).expect("a tenant serializes");
        merge(&mut merged, &patch);
        from_admin_json(merged)
    }
}

/// `POST /admin/tenants`'s body, `{name, defaults?, id?, key?}` (`id` and `key` let the dev
/// script seed a tenant it knows): the tenant, with `fresh_id` unless the body names an id, and
/// the key the body asks for, if any.
pub fn new_tenant(body: &[u8], fresh_id: String) -> Result<(Tenant, Option<String>), String> {
    let mut value: Value = serde_json::from_slice(body).map_err(|e| format!("tenant: {e}"))?;
    let Value::Object(fields) = &mut value else {
        return Err("tenant: expected an object {\"name\", \"defaults\"?}".into());
    };
    let key = match fields.remove("key") {
        None | Some(Value::Null) => None,
        Some(Value::String(key)) => Some(key),
        Some(_) => return Err("key must be a string".into()),
    };
    match fields.get("id") {
        None | Some(Value::Null) => {
            fields.insert("id".into(), Value::String(fresh_id));
        }
        Some(Value::String(id)) if session_name_ok(id) => {}
        Some(_) => return Err(format!("tenant id: {SESSION_NAME_RULE}")),
    }
    Ok((from_admin_json(value)?, key))
}

/// A tenant from an admin's JSON (`{id, name, defaults?}`), validated, with no field it does
/// not know: a typo (`allowedDomain`) must not silently leave a rule out.
pub fn from_admin_json(value: Value) -> Result<Tenant, String> {
    if let Some(quotas) = value.pointer("/defaults/quotas").filter(|quotas| !quotas.is_null()) {
        crate::quota::Quotas::check_json(quotas)?;
    }
    let tenant: Tenant = serde_json::from_value(value.clone()).map_err(|e| format!("tenant: {e}"))?;
    let known = serde_json::to_value(&tenant).expect("a tenant serializes");
    if let Some(field) = unknown_field(&value, &known, "") {
        return Err(format!("{field} is not a tenant setting; README \"Tenants and their defaults\" lists them"));
    }
    tenant.validate()?;
    Ok(tenant)
}

impl TenantDefaults {
    /// The bounds of every setting; the error names the first field out of them.
    pub fn validate(&self) -> Result<(), String> {
        self.policy.validate().map_err(|why| format!("policy.{why}"))?;
        self.packages.validate()?;
        bounded("outFileMaxBytes", self.out_file_max_bytes, 1, MAX_OUT_FILE_BYTES)?;
        bounded("workspace.maxBytes", self.workspace.max_bytes, MIN_WORKSPACE_BYTES, workspace::MAX_MAX_BYTES)?;
        self.edge.as_ref().map_or(Ok(()), |edge| edge.validate())?;
        bounded("contexts.maxPerSession", self.contexts.max_per_session, 1, contexts::MAX_CONTEXTS)?;
        bounded("contexts.idleMs", self.contexts.idle_ms, contexts::MIN_IDLE_MS, contexts::MAX_IDLE_MS)?;
        bounded("retention.unusedDays", self.retention.unused_days, MIN_UNUSED_DAYS, MAX_UNUSED_DAYS)?;
        self.quotas.validate()?;
        self.queue.validate().map_err(|why| format!("queue.{why}"))
    }
}

impl QueueSettings {
    fn validate(&self) -> Result<(), String> {
        bounded("maxQueued", self.max_queued, 1, MAX_QUEUED)?;
        bounded("maxWaitMs", self.max_wait_ms, 1, MAX_TIMEOUT_MS)?;
        bounded("attachWaitMs", self.attach_wait_ms, 0, MAX_ATTACH_WAIT_MS)
    }
}

/// A tenant's name: 1 to [`MAX_NAME_CHARS`] characters, not blank, with no control character
/// (NUL, CR, LF, ESC, ...) and no invisible formatting (bidirectional overrides such as U+202E,
/// zero-width characters: `text::is_hidden`) that could make it read as another name in a log
/// or on a page.
pub fn check_name(name: &str) -> Result<(), String> {
    let chars = name.chars().count();
    if name.trim().is_empty() || chars > MAX_NAME_CHARS {
        return Err(format!("name must have 1 to {MAX_NAME_CHARS} characters, not all blank (it has {chars})"));
    }
    if let Some(c) = name.chars().find(|&c| is_hidden(c)) {
        return Err(format!(
            "name contains U+{:04X}, a control or invisible formatting character; use printable characters only",
            u32::from(c)
        ));
    }
    Ok(())
}

/// RFC 7396 JSON merge patch of `patch` into `target`.
fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(fields) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let object = target.as_object_mut().expect("made an object above");
    for (name, value) in fields {
        if value.is_null() {
            object.remove(name);
        } else {
            merge(object.entry(name.clone()).or_insert(Value::Null), value);
        }
    }
}

/// The first field of `given` (as a dotted path) that `known`, the same JSON read into the
/// tenant's types and written back, does not have. A `null` is "the default", never unknown.
fn unknown_field(given: &Value, known: &Value, at: &str) -> Option<String> {
    let (Value::Object(given), Value::Object(known)) = (given, known) else { return None };
    given.iter().filter(|(_, value)| !value.is_null()).find_map(|(name, value)| {
        let path = if at.is_empty() { name.clone() } else { format!("{at}.{name}") };
        match known.get(name) {
            None => Some(path),
            Some(inner) => unknown_field(value, inner, &path),
        }
    })
}
