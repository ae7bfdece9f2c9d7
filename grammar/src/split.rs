//! Parsing one large file on several threads (issue 22, item 4: a
//! 127 MB generated policy spent a third of `policyc check` in one thread
//! lexing and parsing).
//!
//! The file is cut into pieces at lines that start with a top-level
//! keyword (`bundle`, `let`, ...) at column 0, each piece is lexed and
//! parsed on its own thread with positions absolute in the whole file, and
//! the items are concatenated. The cut is a guess: a line inside a block
//! comment, a heredoc or a block can also start with `bundle`. The guess is
//! checked instead of trusted: the result is used only when **every piece
//! parses without a single error**, and then it is the tree of the whole
//! file, because
//! - a cut inside a string, comment or heredoc leaves the piece before it
//!   ending in an unterminated one (a lexical error), and a cut inside a
//!   block leaves it ending before the block's `}` (unexpected end of file);
//! - so when no piece has an error, each cut falls between two complete
//!   items, where the lexer is between tokens at the top level; a module
//!   is a list of items and the LR parser is deterministic, so the pieces'
//!   item lists concatenated are exactly the whole file's.
//!
//! Any error anywhere and the whole file is parsed again in one piece, so
//! diagnostics (and recovery, and the suppression of cascades) are those
//! of the sequential parse byte for byte; a broken large file costs one
//! wasted parallel attempt.

use std::num::NonZeroUsize;

use crate::ast::Item;
use crate::grammar::ModuleParser;
use crate::lexer::Lexer;
use crate::span::FileId;
use crate::token::LexContext;

/// The smallest piece worth a thread of its own: below this the thread
/// costs more than it saves, and nearly every file is far smaller.
pub const MIN_PIECE_BYTES: usize = 1 << 20;

/// The most threads one file is parsed on.
const MAX_THREADS: usize = 8;

/// A spawned parser thread's stack: as much as the main thread's, since
/// dropping a deeply nested tree recurses.
const STACK_BYTES: usize = 8 << 20;

/// Top-level keywords a piece may start with (followed by a space).
const ITEM_KEYWORDS: [&str; 9] = [
    "bundle ",
    "body ",
    "let ",
    "class ",
    "policy ",
    "exclusive ",
    "import ",
    "type ",
    "fact ",
];

/// The items of `src` parsed on as many threads as the machine has (up
/// to one per [`MIN_PIECE_BYTES`]), or `None` when the file is too small
/// to split or any piece has an error: the caller then parses it whole.
pub fn parse_in_parallel(file: FileId, src: &str) -> Option<Vec<Item>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, NonZeroUsize::get)
        .min(MAX_THREADS)
        .min(src.len() / MIN_PIECE_BYTES);
    parse_in_pieces(file, src, threads)
}

/// [`parse_in_parallel`] with the number of pieces chosen by the caller
/// (tests cut small files).
pub fn parse_in_pieces(file: FileId, src: &str, pieces: usize) -> Option<Vec<Item>> {
    let cuts = cut_points(src, pieces);
    if cuts.is_empty() {
        return None;
    }
    let mut bounds = Vec::with_capacity(cuts.len() + 2);
    bounds.push(0);
    bounds.extend(cuts);
    bounds.push(src.len());
    let ranges: Vec<(usize, usize)> = bounds.windows(2).map(|w| (w[0], w[1])).collect();
    let (first, rest) = ranges.split_first()?;
    let parts: Vec<Option<Vec<Item>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = rest
            .iter()
            .map(|&(start, end)| {
                std::thread::Builder::new()
                    .stack_size(STACK_BYTES)
                    .spawn_scoped(scope, move || parse_clean(file, src, start, end))
            })
            .collect();
        let mut parts = vec![parse_clean(file, src, first.0, first.1)];
        // A thread that could not start or panicked: parse sequentially.
        parts.extend(
            handles
                .into_iter()
                .map(|h| h.ok().and_then(|h| h.join().ok().flatten())),
        );
        parts
    });
    let mut items = Vec::new();
    for part in parts {
        items.extend(part?);
    }
    Some(items)
}

/// Offsets where `src` may be cut into `pieces` pieces of about equal
/// size: each is the start of a line that begins with a top-level keyword,
/// the first such line at or after its share of the file. Fewer when the
/// file has fewer such lines; strictly increasing, never 0 or the end.
pub fn cut_points(src: &str, pieces: usize) -> Vec<usize> {
    let mut cuts: Vec<usize> = Vec::new();
    for share in 1..pieces {
        let target = src.len() / pieces * share;
        let from = cuts.last().map_or(target, |&last| target.max(last + 1));
        match item_line_at_or_after(src, from) {
            Some(cut) => cuts.push(cut),
            None => break,
        }
    }
    cuts
}

/// The first line start at or after byte `from` whose line begins with one
/// of [`ITEM_KEYWORDS`].
fn item_line_at_or_after(src: &str, from: usize) -> Option<usize> {
    let bytes = src.as_bytes();
    let mut search = from.saturating_sub(1);
    loop {
        let newline = search + bytes.get(search..)?.iter().position(|&b| b == b'\n')?;
        let line = newline + 1;
        let rest = src.get(line..)?;
        if rest.is_empty() {
            return None;
        }
        if ITEM_KEYWORDS.iter().any(|k| rest.starts_with(k)) {
            return Some(line);
        }
        search = line;
    }
}

/// The items of `src[start..end]`, lexed with positions absolute in `src`,
/// or `None` if the piece has any error at all (lexical, in a string, or
/// a recovered or fatal syntax error).
fn parse_clean(file: FileId, src: &str, start: usize, end: usize) -> Option<Vec<Item>> {
    let text = src.get(..end)?;
    let context = LexContext {
        file,
        ..LexContext::default()
    };
    let mut lexer = Lexer::nested(text, start, context);
    let mut recovered = Vec::new();
    let items = ModuleParser::new()
        .parse(file, &mut recovered, lexer.by_ref())
        .ok()?;
    (recovered.is_empty() && lexer.errors.is_empty() && lexer.nested.is_empty()).then_some(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_fall_on_lines_that_start_an_item() {
        let src = "let a = 1;\nlet b = 2;\n  let c = 3;\nbundle x() {}\n";
        let cuts = cut_points(src, 2);
        assert_eq!(cuts.len(), 1);
        let cut = cuts[0];
        assert!(src[cut..].starts_with("bundle x"), "{:?}", &src[cut..]);
        // Never at offset 0, even when the file starts with an item.
        assert!(cut_points("bundle x() {}\n", 4).is_empty());
    }

    #[test]
    fn cuts_are_strictly_increasing_and_stop_when_the_lines_run_out() {
        let src = "let a = 1;\nlet b = 2;\nlet c = 3;\n";
        let cuts = cut_points(src, 10);
        assert!(cuts.windows(2).all(|w| w[0] < w[1]), "{cuts:?}");
        assert_eq!(cuts, vec![11, 22]);
    }
}
