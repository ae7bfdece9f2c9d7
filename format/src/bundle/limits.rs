//! The resource limits of a bundle: what the verifier checks before anything
//! runs, and the one way every part of the VM compiles a regular expression.
//!
//! A trusted signer is trusted, but a validly signed bundle must still not
//! hang a host nor exhaust its memory (THREATS.md T14): each limit here is
//! stated in `docs/bytecode.md` ("Limits") and each refusal names the limit.

use std::collections::HashMap;

/// The largest compiled form of one regular expression (the `regex` crate's
/// `size_limit`), in bytes. Compiling is linear in this size, so one regex
/// costs at most a few milliseconds to build; every pattern a real policy
/// writes (`^web[0-9]+$`, `\w{30}`) is far below it.
pub const MAX_REGEX_SIZE: usize = 1 << 20;
/// The cache of the lazy DFA of one regular expression (`dfa_size_limit`):
/// matching needs at most this much memory per regex.
pub const MAX_REGEX_DFA: usize = 1 << 20;
/// The most distinct regular expressions (constants used by `match`) one
/// bundle may hold: with [`MAX_REGEX_SIZE`], this bounds what verifying and
/// running a bundle spends compiling them.
pub const MAX_REGEXES: usize = 1024;
/// The deepest nest of run-time loops one promise may have. Each level
/// multiplies the instances and lengthens every instance's key; real
/// policies nest two or three.
pub const MAX_LOOP_DEPTH: usize = 16;
/// The most elements one `list` constant may hold (format 2.2). A list
/// constant is pushed whole by `const` and walked by `in`, `join` and
/// `each`; real policies list a few dozen servers or ports.
pub const MAX_CONST_LIST: usize = 1 << 16;
/// The deepest nest of `each` instructions (format 2.2): a program run by
/// `each` may itself use `each`, down to this many levels. Each level
/// multiplies the work by a list's length; templates nest two or three
/// `{% for %}`.
pub const MAX_EACH_DEPTH: usize = 16;
/// The largest file a bundle of format 2.6 embeds inline (`source`, and
/// each file of a `directory source`); a larger one is stored beside the
/// bundle as a blob ([`BlobRef`](super::format::BlobRef)). 4 KiB: a small
/// file inline costs less than the request that would fetch it (and keeps
/// a policy of configuration files one file), while a binary or a
/// package's worth of files costs hosts nothing when it did not change.
pub const INLINE_MAX: usize = 4096;
/// The largest blob a bundle may name: 64 GiB. The size a bundle signs
/// bounds each download exactly; this only refuses absurd sizes before a
/// host opens a connection or reserves a name.
pub const MAX_BLOB: u64 = 64 << 30;
/// The most promises one bundle may hold. Ten times the largest policy of
/// `docs/performance.md`; with [`MAX_PASS_INSTANCES`] it bounds what one
/// pass holds in memory.
pub const MAX_PROMISES: usize = 1 << 20;
/// The most promise instances (promises times the elements of their
/// run-time loops) one pass resolves; the rest fail with the reason.
pub const MAX_PASS_INSTANCES: usize = 1 << 20;
/// How many bytes of decoded structure a body may take per byte of its
/// encoding (plus [`DECODE_SLACK`]): the decoder refuses a body that would
/// need more, before allocating it. Compiled policies of 20,000 small
/// promises (directories, packages, reports) take about 7 bytes in memory
/// per byte on the wire, mostly the headers of each promise's lists; a body
/// crafted of empty lists took 25.
pub const MAX_DECODE_FACTOR: usize = 16;
/// Decoded bytes allowed on top of [`MAX_DECODE_FACTOR`] times the size, so
/// that tiny bodies are never refused.
pub const DECODE_SLACK: usize = 1 << 20;

/// Compiles a regular expression within [`MAX_REGEX_SIZE`] and
/// [`MAX_REGEX_DFA`]: the verifier, the evaluator and the `line` operator
/// all compile through here, so what one accepts the others can run.
pub fn compile_regex(pattern: &str) -> Result<regex::Regex, String> {
    regex::RegexBuilder::new(pattern)
        .size_limit(MAX_REGEX_SIZE)
        .dfa_size_limit(MAX_REGEX_DFA)
        .build()
        .map_err(|e| match e {
            regex::Error::CompiledTooBig(_) => format!(
                "the regex is larger than {} MiB once compiled; simplify it (fewer or smaller repetitions)",
                MAX_REGEX_SIZE >> 20
            ),
            other => other.to_string(),
        })
}

/// Regular expressions compiled once per key (a constant index, or the
/// pattern itself when it is computed on the host): a program may name one
/// regex in thousands of `match` instructions, and compiling it for each
/// turned a 3 KB bundle into 32 s of verification.
#[derive(Debug)]
pub struct RegexCache<K = u32> {
    compiled: HashMap<K, Result<regex::Regex, String>>,
}

impl<K> Default for RegexCache<K> {
    fn default() -> Self {
        RegexCache {
            compiled: HashMap::new(),
        }
    }
}

impl<K: std::hash::Hash + Eq + Clone> RegexCache<K> {
    /// The compiled regex of `key` whose text is `pattern`, compiling it
    /// the first time; refuses a new regex past [`MAX_REGEXES`].
    pub fn get(&mut self, key: &K, pattern: &str) -> Result<&regex::Regex, String> {
        if !self.compiled.contains_key(key) {
            if self.compiled.len() >= MAX_REGEXES {
                return Err(format!(
                    "more than {MAX_REGEXES} distinct regular expressions in one bundle"
                ));
            }
            self.compiled.insert(key.clone(), compile_regex(pattern));
        }
        match self.compiled.get(key) {
            Some(Ok(re)) => Ok(re),
            Some(Err(e)) => Err(e.clone()),
            None => Err("the regex cache lost a regex".to_owned()),
        }
    }

    /// How many regexes were compiled (each distinct key once).
    pub fn compiled(&self) -> usize {
        self.compiled.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regex_is_compiled_once_per_constant() {
        let mut cache = RegexCache::default();
        for _ in 0..1000 {
            assert!(cache.get(&7, "^web[0-9]+$").is_ok());
            assert!(cache.get(&8, "(unclosed").is_err());
        }
        assert_eq!(cache.compiled(), 2);
    }

    #[test]
    fn a_regex_over_the_size_limit_is_refused_with_the_limit() {
        let err = compile_regex(r"\w{1000}{1000}").unwrap_err();
        assert!(err.contains("larger than 1 MiB once compiled"), "{err}");
        assert!(compile_regex(r"^[a-z0-9-]{1,63}\.example\.org$").is_ok());
    }

    #[test]
    fn the_number_of_distinct_regexes_is_bounded() {
        let mut cache = RegexCache::default();
        for c in 0..MAX_REGEXES as u32 {
            cache.get(&c, "a").unwrap();
        }
        // A constant already compiled is still served; a new one is not.
        assert!(cache.get(&0, "a").is_ok());
        let err = cache.get(&(MAX_REGEXES as u32), "a").unwrap_err();
        assert!(err.contains("more than 1024 distinct"), "{err}");
    }
}
