//! Address ranges that `blockPrivateRanges` keeps a fetch away from.
//!
//! Beyond RFC 1918 this covers every range that reaches the executor's own machine or
//! network: loopback, link-local, CGNAT, unspecified, multicast, documentation and reserved
//! space, plus IPv4 addresses embedded in IPv6 (mapped, translated, compatible, NAT64, 6to4),
//! which a browser would reach, and the IPv6 ranges that tunnel or translate to IPv4 in ways a
//! check cannot follow (Teredo, local-use NAT64).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const V4_RANGES: &[([u8; 4], u32, &str)] = &[
    ([0, 0, 0, 0], 8, "unspecified"),
    ([10, 0, 0, 0], 8, "private"),
    ([100, 64, 0, 0], 10, "carrier-grade NAT"),
    ([127, 0, 0, 0], 8, "loopback"),
    ([169, 254, 0, 0], 16, "link-local"),
    ([172, 16, 0, 0], 12, "private"),
    ([192, 0, 0, 0], 24, "IETF protocol assignment"),
    ([192, 0, 2, 0], 24, "documentation"),
    ([192, 168, 0, 0], 16, "private"),
    ([198, 18, 0, 0], 15, "benchmarking"),
    ([198, 51, 100, 0], 24, "documentation"),
    ([203, 0, 113, 0], 24, "documentation"),
    ([224, 0, 0, 0], 4, "multicast"),
    ([240, 0, 0, 0], 4, "reserved"),
];

const V6_RANGES: &[(u128, u32, &str)] = &[
    (0, 128, "unspecified"),
    (1, 128, "loopback"),
    (0x0064_ff9b_0001 << 80, 48, "local-use NAT64"),
    (0x0100 << 112, 64, "discard-only"),
    // Teredo tunnels to an IPv4 address written obfuscated in the address: blocked whole.
    (0x2001_0000 << 96, 32, "Teredo"),
    (0x2001_0db8 << 96, 32, "documentation"),
    (0xfc00 << 112, 7, "unique local"),
    (0xfe80 << 112, 10, "link-local"),
    (0xfec0 << 112, 10, "site-local"),
    (0xff00 << 112, 8, "multicast"),
];

/// The blocked range `ip` falls in, described for a message ("loopback range 127.0.0.0/8").
pub(crate) fn blocked_range(ip: IpAddr) -> Option<String> {
    match ip {
        IpAddr::V4(v4) => v4_range(v4),
        IpAddr::V6(v6) => v6_range(v6),
    }
}

fn v4_range(ip: Ipv4Addr) -> Option<String> {
    let bits = u32::from(ip);
    V4_RANGES
        .iter()
        .find(|(base, prefix, _)| bits >> (32 - prefix) == u32::from_be_bytes(*base) >> (32 - prefix))
        .map(|(base, prefix, name)| format!("{name} range {}/{prefix}", Ipv4Addr::from(*base)))
}

fn v6_range(ip: Ipv6Addr) -> Option<String> {
    let bits = u128::from(ip);
    let listed = V6_RANGES.iter().find(|(base, prefix, _)| {
        bits.checked_shr(128 - prefix).unwrap_or(0) == base.checked_shr(128 - prefix).unwrap_or(0)
    });
    if let Some((base, prefix, name)) = listed {
        return Some(format!("{name} range {}/{prefix}", Ipv6Addr::from(*base)));
    }
    let v4 = embedded_v4(bits)?;
    v4_range(v4).map(|range| format!("{range} (as {v4} embedded in IPv6)"))
}

/// The IPv4 address inside an IPv4-mapped (`::ffff:0:0/96`), IPv4-translated
/// (`::ffff:0:0:0/96`), IPv4-compatible (`::/96`), NAT64 (`64:ff9b::/96`) or 6to4
/// (`2002::/16`) IPv6 address.
fn embedded_v4(bits: u128) -> Option<Ipv4Addr> {
    let top96 = bits >> 32;
    if top96 == 0xffff || top96 == 0xffff_0000 || top96 == 0 || top96 == 0x0064_ff9b << 64 {
        return Some(Ipv4Addr::from(bits as u32));
    }
    (bits >> 112 == 0x2002).then(|| Ipv4Addr::from((bits >> 80) as u32))
}
