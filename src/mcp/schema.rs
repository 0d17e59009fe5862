//! The JSON Schema 2020-12 subset our tool input schemas use (`type`, `properties`,
//! `required`, `additionalProperties`, `items`, `enum`, `minimum`, `maximum`), so the published
//! `inputSchema` is also the one validator of tool arguments (tests/mcp_tools.rs checks the
//! schemas use nothing else but annotations). Errors name the field.

use serde_json::{Map, Value};

/// Checks `value` against `schema`; the error says which field and what is wrong.
pub fn validate(schema: &Value, value: &Value, path: &str) -> Result<(), String> {
    if let Some(kind) = schema.get("type").and_then(Value::as_str) {
        check_type(kind, value, path)?;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        check_enum(allowed, value, path)?;
    }
    if let (Some(min), Some(n)) = (schema.get("minimum").and_then(Value::as_f64), value.as_f64()) {
        if n < min {
            return Err(format!("`{}` must be at least {min}", shown(path)));
        }
    }
    if let (Some(max), Some(n)) = (schema.get("maximum").and_then(Value::as_f64), value.as_f64()) {
        if n > max {
            return Err(format!("`{}` must be at most {max}", shown(path)));
        }
    }
    if let (Some(items), Some(array)) = (schema.get("items"), value.as_array()) {
        for (i, item) in array.iter().enumerate() {
            validate(items, item, &format!("{path}[{i}]"))?;
        }
    }
    match value.as_object() {
        Some(object) => check_object(schema, object, path),
        None => Ok(()),
    }
}

fn check_type(kind: &str, value: &Value, path: &str) -> Result<(), String> {
    let ok = match kind {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "number" => value.is_number(),
        // 2020-12: an integer is any number with a zero fractional part.
        "integer" => value.as_f64().is_some_and(|n| n.fract() == 0.0),
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("`{}` must be {}, got {}", shown(path), article(kind), kind_of(value)))
    }
}

fn check_enum(allowed: &[Value], value: &Value, path: &str) -> Result<(), String> {
    if allowed.contains(value) {
        return Ok(());
    }
    let names: Vec<String> = allowed.iter().map(Value::to_string).collect();
    Err(format!("`{}` must be one of {}, got {value}", shown(path), names.join(", ")))
}

fn check_object(schema: &Value, object: &Map<String, Value>, path: &str) -> Result<(), String> {
    let properties = schema.get("properties").and_then(Value::as_object);
    let required = schema.get("required").and_then(Value::as_array);
    for name in required.into_iter().flatten().filter_map(Value::as_str) {
        if !object.contains_key(name) {
            return Err(format!("missing required field `{}`", join(path, name)));
        }
    }
    for (name, value) in object {
        let field = join(path, name);
        match (properties.and_then(|p| p.get(name)), schema.get("additionalProperties")) {
            (Some(sub), _) => validate(sub, value, &field)?,
            (None, Some(Value::Bool(false))) => return Err(unknown(&field, properties)),
            (None, Some(sub)) if sub.is_object() => validate(sub, value, &field)?,
            (None, _) => {}
        }
    }
    Ok(())
}

fn unknown(field: &str, properties: Option<&Map<String, Value>>) -> String {
    let known: Vec<&str> = properties.into_iter().flat_map(|p| p.keys()).map(String::as_str).collect();
    format!("unknown field `{field}` (allowed here: {})", known.join(", "))
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn shown(path: &str) -> &str {
    if path.is_empty() {
        "arguments"
    } else {
        path
    }
}

fn article(kind: &str) -> String {
    match kind {
        "object" | "array" | "integer" => format!("an {kind}"),
        _ => format!("a {kind}"),
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
