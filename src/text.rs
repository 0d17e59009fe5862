//! Text a person reads (a tenant's name in a log or on a page, a client's name on the consent
//! page): which characters they would not see. Hostile text hides in them: a right-to-left
//! override makes `evil\u{202E}gnp.exe` read as `evilexe.png`, a zero-width space makes two
//! names that look alike differ. Admin input with one is refused (`auth::admin`); a client's
//! self-chosen name has them stripped (`oauth::consent`). One list, so the two cannot disagree.

/// Whether `c` is not seen, or changes how what follows it is seen: control characters (C0,
/// DEL, C1), the soft hyphen, the combining grapheme joiner, bidirectional marks, embeddings,
/// overrides and isolates, zero-width and other invisible format characters (including the
/// deprecated U+206A to U+206F), Hangul and Khmer fillers, the Mongolian vowel separator,
/// variation selectors, the BOM, interlinear annotation and other specials (U+FFF0 to U+FFFB),
/// and the tag characters (U+E0000 to U+E0FFF, which also hold the supplementary variation
/// selectors).
pub fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{AD}' | '\u{34F}' | '\u{61C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}' | '\u{180E}'
            | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{206F}' | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFA0}' | '\u{FFF0}'..='\u{FFFB}'
            | '\u{E0000}'..='\u{E0FFF}')
}
