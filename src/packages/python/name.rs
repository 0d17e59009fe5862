//! Project names as PEP 503 compares them (the requirement, marker, lock and wheel rules
//! all compare names this way).

/// A name as PEP 503 compares them: lowercase, each run of `-`, `_`, `.` one `-`.
pub fn canonical_name(name: &str) -> String {
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
