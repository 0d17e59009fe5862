//! Size limits of capsule layers (docs/CAPSULE.md "Layers" lists them).
//!
//! Limits count the bytes of the zip layers as stored and transferred, not what they unpack
//! to; [`UNPACKED_MAX`] separately caps inflation when a layer is read.

use super::CapsuleError;

const MIB: u64 = 1024 * 1024;

/// The code layer (`fs.code.zip`).
pub const CODE_LAYER_MAX: u64 = 2 * MIB;
/// The dependencies layer (`fs.deps.zip`).
pub const DEPS_LAYER_MAX: u64 = 20 * MIB;
/// All layers of one capsule together.
pub const TOTAL_MAX: u64 = 22 * MIB;
/// What [`super::layer::read_layer`] inflates at most, across all entries of a layer.
pub const UNPACKED_MAX: u64 = 128 * MIB;

/// Checks the zip sizes of a capsule's layers against the limits; the first breach is the error.
pub fn check_sizes(code: u64, deps: u64) -> Result<(), CapsuleError> {
    check("code layer", code, CODE_LAYER_MAX)?;
    check("deps layer", deps, DEPS_LAYER_MAX)?;
    check("capsule (all layers)", code.saturating_add(deps), TOTAL_MAX)
}

fn check(what: &'static str, actual: u64, limit: u64) -> Result<(), CapsuleError> {
    if actual > limit {
        return Err(CapsuleError::TooLarge { what, actual, limit });
    }
    Ok(())
}

/// Bytes as MiB for messages: "2 MiB" when exact, else two decimals ("2.5 MiB", "2.0 MiB"),
/// never rounded to look exact (the byte count is printed next to it anyway).
pub(crate) fn mib(bytes: u64) -> String {
    if bytes.is_multiple_of(MIB) {
        return format!("{} MiB", bytes / MIB);
    }
    let text = format!("{:.2}", bytes as f64 / MIB as f64);
    let trimmed = text.trim_end_matches('0');
    let trimmed = if trimmed.ends_with('.') { &text[..trimmed.len() + 1] } else { trimmed };
    format!("{trimmed} MiB")
}
