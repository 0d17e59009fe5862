//! Which upstream MCP servers and tools code in a run may call (`policy.mcps`, checked by
//! `POST /mcps-rpc`). An entry is `server` (every tool of that server) or `server/tool`;
//! no list at all means every upstream server the tenant configured. A client's list only
//! narrows the tenant's, as every other rule does (`intersect.rs`).

/// The rule for upstream server names (also the tenant's upstream records).
pub const SERVER_NAME_RULE: &str = "1 to 64 of A-Z a-z 0-9 - _";

/// Whether `name` is a valid upstream server name ([`SERVER_NAME_RULE`]).
pub fn server_name_ok(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Whether `name` is a tool name as MCP allows them (1 to 128 of A-Z a-z 0-9 _ - . /).
pub fn tool_name_ok(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'/'))
}

/// Refuses an entry that could never match: `server` or `server/tool`, named as above.
pub fn check_entry(entry: &str) -> Result<(), String> {
    let (server, tool) = split(entry);
    if !server_name_ok(server) || tool.is_some_and(|t| !tool_name_ok(t)) {
        return Err(format!(
            "mcps entry {entry:?}: write `server` or `server/tool` (server: {SERVER_NAME_RULE}; tool: 1 to 128 of A-Z a-z 0-9 _ - . /)"
        ));
    }
    Ok(())
}

/// Whether `allowed` (a run's `policy.mcps`) lets the run call `tool` of `server`; the
/// refusal says how to allow it.
pub fn check_mcp(allowed: Option<&[String]>, server: &str, tool: &str) -> Result<(), String> {
    match allowed {
        None => Ok(()),
        Some(list) if admits(list, server, Some(tool)) => Ok(()),
        Some(list) => Err(format!(
            "the run's policy.mcps ({}) does not allow tool {tool:?} of upstream server {server:?}: add \"{server}/{tool}\" (or \"{server}\") to the tenant's policy.mcps, or leave it out of the call's policy",
            if list.is_empty() { "empty".to_owned() } else { list.join(", ") }
        )),
    }
}

/// Whether `list` admits `server` (and, with `tool`, that one tool of it).
pub(super) fn admits(list: &[String], server: &str, tool: Option<&str>) -> bool {
    list.iter().any(|entry| match split(entry) {
        (s, None) => s == server,
        (s, Some(t)) => s == server && Some(t) == tool,
    })
}

pub(super) fn split(entry: &str) -> (&str, Option<&str>) {
    match entry.split_once('/') {
        Some((server, tool)) => (server, Some(tool)),
        None => (entry, None),
    }
}
