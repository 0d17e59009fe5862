//! The `search` tool's engine: grep-style lines, exact counts past `maxResults`, path scope and
//! `filePattern` globs, binary files skipped, clear refusals, and linear time on hostile patterns.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use relay_core::search::glob::Glob;
use relay_core::search::{search, Match, SearchRequest, SearchResult, MAX_TEXT_CHARS, TEXT_CONTEXT_CHARS};
use serde_json::json;

fn request(pattern: &str) -> SearchRequest {
    SearchRequest { pattern: pattern.into(), paths: None, file_pattern: None, case_sensitive: None, max_results: None }
}

fn in_paths(pattern: &str, paths: &[&str]) -> SearchRequest {
    SearchRequest { paths: Some(paths.iter().map(|p| p.to_string()).collect()), ..request(pattern) }
}

fn with_glob(pattern: &str, glob: &str) -> SearchRequest {
    SearchRequest { file_pattern: Some(glob.into()), ..request(pattern) }
}

fn run(request: &SearchRequest, files: &[(&str, &str)]) -> SearchResult {
    search(request, files.iter().map(|(path, text)| (*path, text.as_bytes()))).expect("the search runs")
}

/// The error message of a request that must be refused.
fn refusal(request: &SearchRequest) -> String {
    search(request, std::iter::empty()).expect_err("the request is refused").message
}

/// The paths of the files that matched, in order, without repeats.
fn matched_paths(result: &SearchResult) -> Vec<&str> {
    let mut paths: Vec<&str> = result.matches.iter().map(|m| m.path.as_str()).collect();
    paths.dedup();
    paths
}

fn found(path: &str, line: u64, column: u64, text: &str) -> Match {
    Match { path: path.into(), line, column, text: text.into() }
}

// --- lines, columns, text --------------------------------------------------------------------

#[test]
fn the_seed_example_finds_one_match_per_line_like_grep_n() {
    let index = "import x from 'y';\n\nexport function main() {}\n  function f() { export_all(); }\nfunction g() {}\n";
    let files = [("/host/index.ts", index), ("/host/index.js", index), ("/tmp/index.ts", index)];
    let request: SearchRequest = serde_json::from_value(json!({
        "pattern": "function.*export", "paths": ["/host"], "filePattern": "*.ts",
        "caseSensitive": true, "maxResults": 100
    }))
    .unwrap();
    let result = run(&request, &files);
    assert_eq!(result.matches, vec![found("/host/index.ts", 4, 3, "  function f() { export_all(); }")]);
    assert_eq!((result.total_matches, result.truncated, result.files_searched, result.files_skipped), (1, false, 1, 0));
}

#[test]
fn a_line_with_several_matches_is_reported_once_at_its_first() {
    let result = run(&request("ab"), &[("/tmp/a.txt", "xxab ab ab\nnone\nab")]);
    assert_eq!(result.matches, vec![found("/tmp/a.txt", 1, 3, "xxab ab ab"), found("/tmp/a.txt", 3, 1, "ab")]);
    assert_eq!(result.total_matches, 2);
}

#[test]
fn columns_count_characters_not_bytes() {
    let text = "héllo wörld 🦀 crab\n";
    let result = run(&request("crab"), &[("/tmp/u.txt", text)]);
    assert_eq!(result.matches, vec![found("/tmp/u.txt", 1, 15, "héllo wörld 🦀 crab")]);
    let result = run(&request("wörld"), &[("/tmp/u.txt", text)]);
    assert_eq!(result.matches[0].column, 7);
}

#[test]
fn crlf_lines_lose_their_cr_so_dollar_anchors_work() {
    let result = run(&request("end$"), &[("/tmp/w.txt", "the end\r\nnot the end yet\r\nend\r\n")]);
    assert_eq!(result.matches, vec![found("/tmp/w.txt", 1, 5, "the end"), found("/tmp/w.txt", 3, 1, "end")]);
}

#[test]
fn a_byte_order_mark_is_not_part_of_the_first_line() {
    let result = run(&request("^name"), &[("/tmp/b.csv", "\u{feff}name,age\n")]);
    assert_eq!(result.matches, vec![found("/tmp/b.csv", 1, 1, "name,age")]);
}

#[test]
fn anchors_apply_to_each_line_and_the_last_newline_makes_no_extra_line() {
    let result = run(&request("^$"), &[("/tmp/e.txt", "a\n\nb\n")]);
    assert_eq!(result.matches, vec![found("/tmp/e.txt", 2, 1, "")]);
    let result = run(&request("^b"), &[("/tmp/e.txt", "a\nb\nab")]);
    assert_eq!(result.matches, vec![found("/tmp/e.txt", 2, 1, "b")]);
    assert_eq!(run(&request("^"), &[("/tmp/empty.txt", "")]).total_matches, 0);
}

#[test]
fn a_pattern_that_matches_the_empty_string_matches_every_line() {
    let result = run(&request("x*"), &[("/tmp/e.txt", "a\n\nb")]);
    assert_eq!(result.total_matches, 3);
    assert!(result.matches.iter().all(|m| m.column == 1));
}

#[test]
fn a_long_line_is_cut_to_a_window_around_its_match() {
    let line = format!("{}NEEDLE{}", "a".repeat(1500), "b".repeat(1500));
    let result = run(&request("NEEDLE"), &[("/tmp/min.js", &line)]);
    let m = &result.matches[0];
    assert_eq!(m.column, 1501);
    let expected =
        format!("…{}NEEDLE{}…", "a".repeat(TEXT_CONTEXT_CHARS), "b".repeat(MAX_TEXT_CHARS - TEXT_CONTEXT_CHARS - 6));
    assert_eq!(m.text, expected);
    assert_eq!(m.text.chars().count(), MAX_TEXT_CHARS + 2);
}

#[test]
fn a_cut_line_keeps_its_start_or_its_end_when_the_match_is_near_it() {
    let head = format!("NEEDLE{}", "é".repeat(2000));
    let text = &run(&request("NEEDLE"), &[("/tmp/h.txt", &head)]).matches[0].text;
    assert!(text.starts_with("NEEDLE") && text.ends_with('…'));
    assert_eq!(text.chars().count(), MAX_TEXT_CHARS + 1);

    let tail = format!("{}NEEDLE", "é".repeat(2000));
    let text = &run(&request("NEEDLE"), &[("/tmp/t.txt", &tail)]).matches[0].text;
    assert!(text.starts_with('…') && text.ends_with("NEEDLE"));
    assert_eq!(text.chars().count(), MAX_TEXT_CHARS + 1);

    let exact = "z".repeat(MAX_TEXT_CHARS);
    assert_eq!(run(&request("z"), &[("/tmp/x.txt", &exact)]).matches[0].text, exact);
}

// --- counts and order ------------------------------------------------------------------------

#[test]
fn total_matches_counts_past_max_results_and_truncated_says_so() {
    let many = "hit\n".repeat(40);
    let files = [("/tmp/b.txt", many.as_str()), ("/tmp/a.txt", many.as_str()), ("/tmp/c.txt", "miss\n")];
    let request = SearchRequest { max_results: Some(50), ..request("hit") };
    let result = run(&request, &files);
    assert_eq!(result.total_matches, 80);
    assert!(result.truncated);
    assert_eq!(result.matches.len(), 50);
    assert_eq!(result.files_searched, 3);
    // The first 50 in path order: all 40 of a.txt, then the first 10 of b.txt.
    assert_eq!(matched_paths(&result), ["/tmp/a.txt", "/tmp/b.txt"]);
    assert_eq!(result.matches.last().unwrap().line, 10);

    let exact = SearchRequest { max_results: Some(80), ..request };
    let result = run(&exact, &files);
    assert_eq!((result.matches.len(), result.total_matches, result.truncated), (80, 80, false));
}

#[test]
fn max_results_defaults_to_100_and_is_bounded() {
    let many = "hit\n".repeat(150);
    let result = run(&request("hit"), &[("/tmp/a.txt", &many)]);
    assert_eq!((result.matches.len(), result.total_matches, result.truncated), (100, 150, true));
    for bad in [0, 1001] {
        let message = refusal(&SearchRequest { max_results: Some(bad), ..request("x") });
        assert!(message.starts_with(&format!("maxResults: {bad} is out of range; ask for 1 to 1000")), "{message}");
    }
    assert!(search(&SearchRequest { max_results: Some(1000), ..request("x") }, std::iter::empty()).is_ok());
}

#[test]
fn files_are_searched_in_path_order_whatever_order_they_come_in() {
    let files = [("/tmp/z.txt", "x"), ("/host/b/a.txt", "x"), ("/host/a.txt", "x"), ("/out/m.txt", "x")];
    let mut reversed = files;
    reversed.reverse();
    let forward = run(&request("x"), &files);
    assert_eq!(forward, run(&request("x"), &reversed));
    assert_eq!(matched_paths(&forward), ["/host/a.txt", "/host/b/a.txt", "/out/m.txt", "/tmp/z.txt"]);
}

#[test]
fn the_result_serializes_in_camel_case() {
    let result = run(&SearchRequest { max_results: Some(1), ..request("a") }, &[("/tmp/a", "a\na")]);
    assert_eq!(
        serde_json::to_value(&result).unwrap(),
        json!({"matches": [{"path": "/tmp/a", "line": 1, "column": 1, "text": "a"}],
               "totalMatches": 2, "truncated": true, "filesSearched": 1, "filesSkipped": 0})
    );
}

#[test]
fn a_request_takes_exactly_the_tool_schema_fields() {
    let parsed: SearchRequest = serde_json::from_value(json!({"pattern": "x"})).unwrap();
    assert_eq!(parsed, request("x"));
    let error = serde_json::from_value::<SearchRequest>(json!({"pattern": "x", "regex": true})).unwrap_err();
    assert!(error.to_string().contains("unknown field `regex`"), "{error}");
    assert!(serde_json::from_value::<SearchRequest>(json!({"paths": ["/tmp"]})).is_err());
}

// --- scope -----------------------------------------------------------------------------------

#[test]
fn paths_hold_what_lies_below_them_segment_by_segment() {
    let files = [("/tmp/x", "hit"), ("/tmpx/y", "hit"), ("/tmp", "hit"), ("/tmp/deep/er/z", "hit")];
    let result = run(&in_paths("hit", &["/tmp"]), &files);
    assert_eq!(matched_paths(&result), ["/tmp", "/tmp/deep/er/z", "/tmp/x"]);
    let result = run(&in_paths("hit", &["/tmp/deep/"]), &files);
    assert_eq!(matched_paths(&result), ["/tmp/deep/er/z"]);
}

#[test]
fn no_paths_is_the_whole_workspace_and_nothing_else() {
    let files = [("/tmp/a", "hit"), ("/out/a", "hit"), ("/host/a", "hit"), ("/mcps/a", "hit"), ("/etc/passwd", "hit")];
    let everywhere = run(&request("hit"), &files);
    assert_eq!(matched_paths(&everywhere), ["/host/a", "/mcps/a", "/out/a", "/tmp/a"]);
    assert_eq!(run(&in_paths("hit", &[]), &files), everywhere);
    assert_eq!(everywhere.files_searched, 4);
}

#[test]
fn several_paths_search_each_file_once() {
    let files = [("/host/a", "hit"), ("/host/b/c", "hit"), ("/tmp/d", "hit")];
    let result = run(&in_paths("hit", &["/host", "/host/b", "/tmp"]), &files);
    assert_eq!((result.total_matches, result.files_searched), (3, 3));
}

#[test]
fn paths_that_are_not_clean_absolute_paths_are_refused() {
    for bad in ["tmp", "/tmp/../etc", "/tmp//x", "/tmp/./x", ""] {
        let message = refusal(&in_paths("x", &[bad]));
        assert!(message.starts_with(&format!("paths: {bad:?} is not an absolute path")), "{message}");
    }
}

#[test]
fn file_paths_that_are_not_clean_are_out_of_scope() {
    let files = [("/tmp/../etc/passwd", "hit"), ("tmp/a", "hit"), ("/tmp/ok", "hit")];
    assert_eq!(matched_paths(&run(&request("hit"), &files)), ["/tmp/ok"]);
}

// --- filePattern -----------------------------------------------------------------------------

fn globbed(glob: &str, paths: &[&'static str]) -> Vec<&'static str> {
    let files: Vec<(&str, &str)> = paths.iter().map(|p| (*p, "hit")).collect();
    let result = run(&SearchRequest { paths: Some(vec!["/".into()]), ..with_glob("hit", glob) }, &files);
    let mut hits: Vec<&'static str> =
        paths.iter().copied().filter(|p| result.matches.iter().any(|m| m.path == *p)).collect();
    hits.sort();
    hits
}

#[test]
fn a_glob_without_a_slash_matches_the_base_name() {
    let paths = ["/host/index.ts", "/host/src/deep/util.ts", "/host/index.tsx", "/host/ts/readme", "/tmp/.hidden.ts"];
    assert_eq!(globbed("*.ts", &paths), ["/host/index.ts", "/host/src/deep/util.ts", "/tmp/.hidden.ts"]);
    assert_eq!(globbed("index.ts?", &paths), ["/host/index.tsx"]);
    assert_eq!(globbed("readme", &paths), ["/host/ts/readme"]);
}

#[test]
fn a_glob_with_a_slash_matches_the_whole_path_and_star_stays_in_its_segment() {
    let paths = ["/host/a.ts", "/host/x/a.ts", "/host/x/y/a.ts", "/tmp/a.ts", "/hostile/a.ts"];
    assert_eq!(globbed("/host/*.ts", &paths), ["/host/a.ts"]);
    assert_eq!(globbed("/host/*/a.ts", &paths), ["/host/x/a.ts"]);
    assert_eq!(globbed("/host*/a.ts", &paths), ["/host/a.ts", "/hostile/a.ts"]);
}

#[test]
fn double_star_spans_any_number_of_directories() {
    let paths = ["/host/a.ts", "/host/x/a.ts", "/host/x/y/a.ts", "/host/x/y/a.md", "/tmp/q/a.ts"];
    assert_eq!(globbed("/host/**/*.ts", &paths), ["/host/a.ts", "/host/x/a.ts", "/host/x/y/a.ts"]);
    assert_eq!(globbed("/host/**", &paths), ["/host/a.ts", "/host/x/a.ts", "/host/x/y/a.md", "/host/x/y/a.ts"]);
    assert_eq!(globbed("**/a.ts", &paths), ["/host/a.ts", "/host/x/a.ts", "/host/x/y/a.ts", "/tmp/q/a.ts"]);
    assert_eq!(globbed("/host/**/y/*", &paths), ["/host/x/y/a.md", "/host/x/y/a.ts"]);
    // Not a whole segment: `**` is `*`.
    assert_eq!(globbed("/host/x**.ts", &["/host/x/a.ts", "/host/xa.ts"]), ["/host/xa.ts"]);
}

#[test]
fn a_relative_glob_with_a_slash_matches_the_last_segments() {
    let paths = ["/host/app/src/main.ts", "/host/src/lib.ts", "/host/mysrc/x.ts", "/host/src/a/b.ts"];
    assert_eq!(globbed("src/*.ts", &paths), ["/host/app/src/main.ts", "/host/src/lib.ts"]);
}

#[test]
fn brace_sets_classes_and_escapes() {
    let paths = ["/t/a.ts", "/t/a.js", "/t/a.jsx", "/t/b.ts", "/t/c.ts", "/t/[x].md", "/t/*.md", "/t/{a}.md"];
    assert_eq!(globbed("*.{ts,js}", &paths), ["/t/a.js", "/t/a.ts", "/t/b.ts", "/t/c.ts"]);
    assert_eq!(globbed("*.{ts,js{,x}}", &paths), ["/t/a.js", "/t/a.jsx", "/t/a.ts", "/t/b.ts", "/t/c.ts"]);
    assert_eq!(globbed("[ab].ts", &paths), ["/t/a.ts", "/t/b.ts"]);
    assert_eq!(globbed("[a-b].ts", &paths), ["/t/a.ts", "/t/b.ts"]);
    assert_eq!(globbed("[!a].ts", &paths), ["/t/b.ts", "/t/c.ts"]);
    assert_eq!(globbed("[^ab].ts", &paths), ["/t/c.ts"]);
    assert_eq!(globbed(r"\[x\].md", &paths), ["/t/[x].md"]);
    assert_eq!(globbed(r"\*.md", &paths), ["/t/*.md"]);
    assert_eq!(globbed("[[]*", &paths), ["/t/[x].md"]);
    assert_eq!(globbed("[]x[]*", &["/t/x", "/t/]", "/t/[a", "/t/a"]), ["/t/[a", "/t/]", "/t/x"]);
    assert_eq!(globbed("{/t/a,/u}.*", &paths), ["/t/a.js", "/t/a.jsx", "/t/a.ts"]);
    // Regex metacharacters in a glob are plain characters.
    assert_eq!(globbed("a+(b).$", &["/t/a+(b).$", "/t/aab.x"]), ["/t/a+(b).$"]);
}

#[test]
fn a_class_never_matches_a_slash() {
    assert!(!Glob::new("/t[/]x").unwrap().matches("/t/x"));
    assert!(!Glob::new("/t[!a]x").unwrap().matches("/t/x"));
    assert!(!Glob::new("/t?x").unwrap().matches("/t/x"));
}

#[test]
fn invalid_globs_are_refused_with_what_to_change() {
    let cases = [
        ("*.[ts", "filePattern has a `[` at character 3 that is never closed; close it with `]`"),
        ("*.{ts,js", "filePattern has a `{` at character 3 that is never closed; close it with `}`"),
        ("{a,{b}", "filePattern has a `{` at character 1 that is never closed"),
        ("[z-a]", "filePattern has the range `z-a`, whose start is after its end; write `a-z`"),
        ("", "filePattern is empty; leave filePattern out"),
        ("x\\", "filePattern ends with a lone `\\`"),
    ];
    for (glob, expected) in cases {
        let message = refusal(&with_glob("x", glob));
        assert!(message.starts_with(expected), "{glob:?}: {message}");
    }
    let long = "a".repeat(1001);
    assert!(refusal(&with_glob("x", &long)).starts_with("filePattern is longer than 1000 characters"));
    let deep = format!("{}a{}", "{".repeat(40), "}".repeat(40));
    assert!(refusal(&with_glob("x", &deep)).contains("nests `{` more than 16 deep"));
}

// --- the pattern -----------------------------------------------------------------------------

#[test]
fn case_insensitive_search_folds_case_including_unicode() {
    let files = [("/tmp/a.txt", "Hello\nHELLO\nhello\nhallo\nÉCOLE")];
    assert_eq!(run(&request("hello"), &files).total_matches, 1);
    let insensitive = SearchRequest { case_sensitive: Some(false), ..request("hello") };
    assert_eq!(run(&insensitive, &files).total_matches, 3);
    let accented = SearchRequest { case_sensitive: Some(false), ..request("école") };
    assert_eq!(run(&accented, &files).matches, vec![found("/tmp/a.txt", 5, 1, "ÉCOLE")]);
}

#[test]
fn grep_style_syntax_works() {
    let text = "alpha 42\nBeta_7\n\tindented\nfoo(bar)\nword boundary\n";
    let files = [("/tmp/s.txt", text)];
    let count = |pattern: &str| run(&request(pattern), &files).total_matches;
    assert_eq!(count("^[[:alpha:]]+ [[:digit:]]+$"), 1);
    assert_eq!(count("[[:space:]]"), 3);
    assert_eq!(count(r"\d"), 2);
    assert_eq!(count(r"\w+_\d"), 1);
    assert_eq!(count(r"foo\(bar\)"), 1);
    assert_eq!(count("alpha|Beta"), 2);
    assert_eq!(count(r"\bboundary\b"), 1);
    assert_eq!(count(r"\bdary"), 0);
    assert_eq!(count("o{2}"), 1);
    assert_eq!(count(r"\w+ für"), 0);
}

#[test]
fn backreferences_and_look_around_are_refused_by_name() {
    let message = refusal(&request(r"(ab)\1"));
    assert!(
        message.starts_with(
            "pattern: is not a valid regular expression: backreferences are not supported at characters 5-6; "
        ),
        "{message}"
    );
    assert!(message.contains("linear time") && message.contains("(ab)(ab)"), "{message}");
    for pattern in ["foo(?=bar)", "foo(?!bar)", "(?<=a)b", "(?<!a)b"] {
        let message = refusal(&request(pattern));
        assert!(message.contains("look-around, including look-ahead and look-behind, is not supported"), "{message}");
        assert!(message.contains("no lookahead or lookbehind"), "{message}");
    }
}

#[test]
fn invalid_patterns_are_refused_with_where_and_what() {
    let message = refusal(&request("ab(c"));
    assert!(
        message.starts_with("pattern: is not a valid regular expression: unclosed group at character 3; "),
        "{message}"
    );
    assert!(message.contains(r"\("), "{message}");
    assert!(!message.contains('\n'), "one line: {message}");
    let message = refusal(&request("a{99999999999}"));
    assert!(message.contains("decimal literal invalid") && message.contains("x{2,5}"), "{message}");
}

#[test]
fn huge_repetitions_are_refused_before_they_are_built() {
    for pattern in ["a{1000000}", "(a{1000}){1000}", "x{4294967295}", r"\w{1000}"] {
        let started = Instant::now();
        let message = refusal(&request(pattern));
        assert!(
            message.starts_with(
                "pattern: compiles to more than 4 MiB, this search's limit; use smaller repetition counts"
            ),
            "{message}"
        );
        assert!(started.elapsed() < Duration::from_secs(5), "{pattern} took {:?}", started.elapsed());
    }
    assert!(search(&request(r"\w{50}"), std::iter::empty()).is_ok());
}

#[test]
fn empty_long_and_multi_line_patterns_are_refused() {
    assert!(refusal(&request("")).starts_with("pattern: is empty; give a regular expression"));
    assert!(refusal(&request(&"a".repeat(1001))).starts_with("pattern: is longer than 1000 characters"));
    assert!(search(&request(&"a".repeat(1000)), std::iter::empty()).is_ok());
    assert!(refusal(&request("foo\nbar")).starts_with("pattern: has a line break"));
    let deep = format!("{}a{}", "(".repeat(400), ")".repeat(400));
    assert!(refusal(&request(&deep)).starts_with("pattern: is not a valid regular expression: exceed"));
}

#[test]
fn catastrophic_backtracking_patterns_finish_at_once() {
    let line = format!("{}!", "a".repeat(30));
    let started = Instant::now();
    assert_eq!(run(&request("(a+)+$"), &[("/tmp/evil.txt", &line)]).total_matches, 0);
    // Many such lines and other classics, still far from any exponential blow-up.
    let lines = format!("{line}\n").repeat(2000);
    for pattern in ["(a+)+$", "(a|aa)+$", "(a|a)*b", "(.*a){20}!x", "^(a?){30}a{30}$"] {
        assert_eq!(run(&request(pattern), &[("/tmp/evil.txt", &lines)]).total_matches, 0, "{pattern}");
    }
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
}

// --- binary files ----------------------------------------------------------------------------

#[test]
fn binary_files_are_skipped_and_counted() {
    let nul_early = b"hit\0hit\n".to_vec();
    let mut nul_late = b"hit\n".to_vec();
    nul_late.extend(std::iter::repeat_n(b'x', 8 * 1024));
    nul_late.extend(b"\0\nhit\n");
    let not_utf8 = b"hit \xff\xfe hit\n".to_vec();
    let utf16 = [0xff, 0xfe, b'h', 0, b'i', 0, b't', 0];
    let files: Vec<(&str, &[u8])> = vec![
        ("/tmp/nul-early", &nul_early),
        ("/tmp/nul-late", &nul_late),
        ("/tmp/latin1", &not_utf8),
        ("/tmp/utf16", &utf16),
        ("/tmp/text", b"hit\n"),
        ("/etc/binary", b"\0"),
    ];
    let result = search(&request("hit"), files).unwrap();
    assert_eq!((result.files_searched, result.files_skipped), (2, 3));
    assert_eq!(matched_paths(&result), ["/tmp/nul-late", "/tmp/text"]);
    assert_eq!(result.total_matches, 3);
}

// --- globs against a reference ---------------------------------------------------------------

/// A plain backtracking matcher for the glob subset the property test makes (no braces), the
/// meaning the module docs give: `*` and `?` stay in a segment, a class never matches `/`,
/// `**/` at a segment's start takes whole directories, a trailing `**` there takes the rest.
fn reference_match(glob: &[char], path: &[char], segment_start: bool) -> bool {
    match glob {
        [] => path.is_empty(),
        ['*', '*', rest @ ..] if segment_start => {
            let rest = skip_stars(rest);
            match rest {
                [] => true,
                ['/', after @ ..] => {
                    reference_match(after, path, true)
                        || (0..path.len()).any(|i| path[i] == '/' && reference_match(after, &path[i + 1..], true))
                }
                _ => star(rest, path),
            }
        }
        ['*', rest @ ..] => star(skip_stars(rest), path),
        ['?', rest @ ..] => path.first().is_some_and(|&c| c != '/') && reference_match(rest, &path[1..], false),
        ['[', rest @ ..] => {
            let close = rest.iter().skip(1).position(|&c| c == ']').expect("generated classes close") + 1;
            let (negated, members) = match &rest[..close] {
                ['!', members @ ..] => (true, members),
                members => (false, members),
            };
            path.first().is_some_and(|&c| c != '/' && members.contains(&c) != negated)
                && reference_match(&rest[close + 1..], &path[1..], false)
        }
        [c, rest @ ..] => path.first() == Some(c) && reference_match(rest, &path[1..], *c == '/'),
    }
}

fn skip_stars(glob: &[char]) -> &[char] {
    let stars = glob.iter().take_while(|&&c| c == '*').count();
    &glob[stars..]
}

/// `*`: any run of non-`/` characters, then the rest of the glob.
fn star(rest: &[char], path: &[char]) -> bool {
    let segment = path.iter().take_while(|&&c| c != '/').count();
    (0..=segment).any(|taken| reference_match(rest, &path[taken..], false))
}

/// The reference's answer for a whole glob: base name, absolute or relative path.
fn reference(glob: &str, path: &str) -> bool {
    let glob: Vec<char> = glob.chars().collect();
    let path: Vec<char> = path.chars().collect();
    if !glob.contains(&'/') {
        let base = path.iter().rposition(|&c| c == '/').map_or(&path[..], |i| &path[i + 1..]);
        return reference_match(&glob, base, true);
    }
    if glob[0] == '/' {
        return reference_match(&glob, &path, true);
    }
    reference_match(&glob, &path, true)
        || (0..path.len()).any(|i| path[i] == '/' && reference_match(&glob, &path[i + 1..], true))
}

fn glob_strategy() -> impl Strategy<Value = String> {
    let atom = prop_oneof![
        Just("a"),
        Just("b"),
        Just("."),
        Just("/"),
        Just("*"),
        Just("**"),
        Just("?"),
        Just("[ab]"),
        Just("[!a]"),
        Just("[/a]")
    ];
    (any::<bool>(), prop::collection::vec(atom, 1..8)).prop_map(|(absolute, atoms)| {
        let glob = atoms.concat();
        if absolute {
            format!("/{glob}")
        } else {
            glob
        }
    })
}

fn path_strategy() -> impl Strategy<Value = String> {
    prop::collection::vec("[ab.]{0,3}", 1..5).prop_map(|segments| format!("/{}", segments.join("/")))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn globs_agree_with_a_backtracking_reference(glob in glob_strategy(), path in path_strategy()) {
        let compiled = Glob::new(&glob).unwrap();
        prop_assert_eq!(compiled.matches(&path), reference(&glob, &path), "glob {:?} path {:?}", glob, path);
    }

    #[test]
    fn star_never_crosses_a_slash(name in "[a-z./]{0,12}") {
        let path = format!("/host/{name}");
        prop_assert_eq!(Glob::new("/host/*").unwrap().matches(&path), !name.contains('/'));
        prop_assert_eq!(Glob::new("/host/**").unwrap().matches(&path), true);
    }

    #[test]
    fn brace_sets_match_like_their_alternatives(
        alternatives in prop::collection::vec("[ab?]{0,3}", 1..4),
        name in "[ab]{0,4}",
    ) {
        let set = Glob::new(&format!("x{{{}}}y", alternatives.join(","))).unwrap();
        let one_of = alternatives.iter().any(|alternative| Glob::new(&format!("x{alternative}y")).unwrap().matches(&format!("/t/x{name}y")));
        prop_assert_eq!(set.matches(&format!("/t/x{name}y")), one_of);
    }
}
