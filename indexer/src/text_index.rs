//! The lexical retrieval lane: BM25 over the units of a snapshot, with a code-aware tokenizer.
//!
//! A [`TextIndex`] is a tantivy index with one document per unit (module, class, function,
//! method, variable). It is derived data: built from a [`Snapshot`] on start
//! ([`TextIndex::build`]) and kept equal to later versions by re-indexing the files a batch
//! changed ([`TextIndex::update`]). The daemon keeps it in RAM; a query without a daemon uses
//! one stored beside the index ([`TextIndex::stored`]), which it brings up to date file by file
//! rather than rebuilding it. What a unit contributes:
//!
//! | unit kind            | `name`         | `signature` | `docstring` | `body`                     |
//! |----------------------|----------------|-------------|-------------|----------------------------|
//! | function, method     | qualified name | header      | docstring   | full source                |
//! | class                | qualified name | header      | docstring   | member names               |
//! | module               | qualified name | -           | docstring   | -                          |
//! | variable             | qualified name | -           | -           | the assignment statement   |
//!
//! Every text field is tokenized by [`CodeTokenizer`] (see [`code_tokens`]): identifiers are
//! split on `_`, `.` and camelCase/PascalCase boundaries, lowercased, and also kept whole, so
//! `retry connection`, `retry_failed_connection` and `HTTPAdapter.send` all find what they should.
//!
//! Queries never go through tantivy's query language: the query text is tokenized with the same
//! tokenizer into a disjunction of term queries over the four fields, boosted
//! name 3, signature 2, docstring 1.5, body 1. Any text is a valid query.
//!
//! Ranking is a function of the snapshot, not of the index's history: BM25's statistics count
//! live documents only ([`LiveStatistics`]), scores are rounded to four significant digits
//! ([`rounded`]) and equal scores are ordered by unit id, also at the cut. One gap is left: two
//! scores that should be equal but differ in their last bits can still round apart when they
//! straddle a rounding step (for scores a unit or two in the last place apart, about one pair in
//! 300).
//!
//! Concurrency: one writer (behind a mutex) and any number of searchers. A search takes the
//! current searcher and version under a short read lock and runs without locks, so searches
//! proceed while an update indexes, and each search sees exactly one version.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};

use fresco_graph::{EdgeKind, FileEntry, Snapshot, Unit, UnitKind};
use rustc_hash::{FxHashMap, FxHashSet};
use tantivy::collector::TopDocs;
use tantivy::query::{Bm25StatisticsProvider, BooleanQuery, BoostQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions, Value};
use tantivy::tokenizer::{TextAnalyzer, Token, TokenStream, Tokenizer};
use tantivy::{
    DocId, DocSet, Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, TERMINATED, TantivyDocument, Term,
};

/// The name the code tokenizer is registered under in the index's tokenizer manager.
pub const TOKENIZER_NAME: &str = "fresco_code";

/// Field boosts used by [`TextIndex::search`].
pub const BOOST_NAME: f32 = 3.0;
pub const BOOST_SIGNATURE: f32 = 2.0;
pub const BOOST_DOCSTRING: f32 = 1.5;
pub const BOOST_BODY: f32 = 1.0;

/// Tokens longer than this (in bytes) are dropped: long literals and generated names only bloat
/// the dictionary.
const MAX_TOKEN_BYTES: usize = 96;
/// At most this many distinct query tokens are used: the first the index holds. (The first
/// words of a retrieval query name where the target lives and its signature: on DevEval's
/// tuning half the lexical lane's Recall@50 reads 0.581 with the first 48 the index holds and
/// 0.569 with the rarest 48.)
const MAX_QUERY_TOKENS: usize = 48;
/// How many distinct tokens of a query are read at most before choosing (a 1 MiB query holds tens
/// of thousands): more than any docstring has.
const MAX_QUERY_TOKENS_READ: usize = 4096;
/// The indexing memory budget per writer thread (tantivy needs at least 15 MB).
const WRITER_BUDGET_PER_THREAD: usize = 48 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum TextIndexError {
    #[error("text index: {0}")]
    Tantivy(#[from] tantivy::TantivyError),
    #[error("text index: a lock was poisoned by a panicking thread")]
    Poisoned,
    #[error("text index in {path}: {error}")]
    Io { path: String, error: std::io::Error },
    #[error("stored text index: {0}")]
    NotReusable(String),
}

// ---------------------------------------------------------------------------------------------
// The tokenizer
// ---------------------------------------------------------------------------------------------

/// A tokenizer for source code and the prose around it.
///
/// A *word* is a maximal run of identifier characters (Unicode alphanumerics and `_`); words
/// joined by single dots form a dotted name (`os.path.join`). For each dotted name it emits:
///
/// - the whole dotted name, lowercased, if it has more than one part (`os.path.join`);
/// - for each part, the part as written, lowercased, if it splits into more than one subword or
///   differs from its only subword (`to_key_val_list`, `httpadapter`, `__init__`);
/// - the subwords of each part, lowercased: split on `_` and at case changes, with acronyms kept
///   together (`HTTPAdapter` is `http`, `adapter`; `parseJSON2Dict` is `parse`, `json2`,
///   `dict`). Digits stay with the letters before them (`base64`, `utf8`, `sha256`).
/// - Chinese, Japanese and Korean text has no spaces between words, so a run of their characters
///   would be one word: such a run gives its overlapping character pairs instead (`返回链接`:
///   `返回`, `回链`, `链接`), as Lucene's CJK analyser does, and a query's pairs meet a text's.
///
/// Subwords get consecutive positions; a whole part or dotted name is a synonym at the position
/// of its first subword, spanning its subwords (`position_length`). Offsets are byte offsets of
/// the source text.
#[derive(Clone, Copy, Debug, Default)]
pub struct CodeTokenizer;

/// The token stream of [`CodeTokenizer`]: the tokens of a text, computed up front.
pub struct CodeTokenStream {
    tokens: Vec<Token>,
    next: usize,
}

impl Tokenizer for CodeTokenizer {
    type TokenStream<'a> = CodeTokenStream;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> CodeTokenStream {
        let mut tokens = Vec::new();
        tokenize(text, &mut tokens);
        CodeTokenStream { tokens, next: 0 }
    }
}

impl TokenStream for CodeTokenStream {
    fn advance(&mut self) -> bool {
        if self.next < self.tokens.len() {
            self.next += 1;
            true
        } else {
            false
        }
    }

    fn token(&self) -> &Token {
        &self.tokens[self.next - 1]
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.next - 1]
    }
}

/// The token texts [`CodeTokenizer`] produces for `text`, in stream order.
pub fn code_tokens(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    tokenize(text, &mut tokens);
    tokens.into_iter().map(|t| t.text).collect()
}

/// The tokens [`CodeTokenizer`] produces for `text`, with positions and offsets.
pub fn code_token_details(text: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    tokenize(text, &mut tokens);
    tokens
}

fn is_ident_char(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

fn tokenize(text: &str, out: &mut Vec<Token>) {
    let mut position = 0usize;
    let mut parts: Vec<(usize, usize)> = Vec::new();
    let mut subwords: Vec<Vec<(usize, usize)>> = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        if !is_ident_char(c) {
            chars.next();
            continue;
        }
        // One dotted name: word ('.' word)*.
        parts.clear();
        let mut part_start = start;
        let mut end;
        loop {
            end = part_start;
            while let Some(&(i, c)) = chars.peek() {
                if is_ident_char(c) {
                    end = i + c.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            parts.push((part_start, end));
            // A dot continues the name only when an identifier character follows it.
            if text.as_bytes().get(end) == Some(&b'.') && text[end + 1..].chars().next().is_some_and(is_ident_char) {
                chars.next(); // the dot
                part_start = end + 1;
            } else {
                break;
            }
        }
        subwords.clear();
        for &(s, e) in &parts {
            subwords.push(split_identifier(text, s, e));
        }
        let total: usize = subwords.iter().map(Vec::len).sum();
        if total == 0 {
            continue; // only underscores
        }
        if parts.len() > 1 {
            push(out, &text[start..end], start, end, position, total);
        }
        for (&(s, e), words) in parts.iter().zip(&subwords) {
            if words.is_empty() {
                continue;
            }
            // The part itself, unless it is its only subword (`foo`, `Session`).
            if words.len() > 1 || words[0] != (s, e) {
                push(out, &text[s..e], s, e, position, words.len());
            }
            for &(ws, we) in words {
                push(out, &text[ws..we], ws, we, position, 1);
                position += 1;
            }
        }
    }
}

fn push(out: &mut Vec<Token>, raw: &str, from: usize, to: usize, position: usize, len: usize) {
    if raw.len() > MAX_TOKEN_BYTES {
        return;
    }
    out.push(Token {
        offset_from: from,
        offset_to: to,
        position,
        text: raw.to_lowercase(),
        position_length: len.max(1),
    });
}

/// The subwords of the identifier `text[start..end]`, as byte ranges: split on `_`, then at
/// lower-to-upper changes (`fooBar`), before the last capital of an acronym followed by a
/// lowercase letter (`HTTPAdapter`) and at digit-to-upper changes (`Py3Lexer`).
fn split_identifier(text: &str, start: usize, end: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let ident = &text[start..end];
    let mut offset = start;
    for piece in ident.split('_') {
        let piece_start = offset;
        offset += piece.len() + 1;
        if piece.is_empty() {
            continue;
        }
        let chars: Vec<(usize, char)> = piece.char_indices().collect();
        let mut word_start = 0usize; // byte offset within piece
        for i in 1..chars.len() {
            let (at, c) = chars[i];
            let p = chars[i - 1].1;
            let next_lower = chars.get(i + 1).is_some_and(|&(_, n)| n.is_lowercase());
            let boundary = (p.is_lowercase() && c.is_uppercase())
                || (p.is_uppercase() && c.is_uppercase() && next_lower)
                || (p.is_numeric() && c.is_uppercase());
            if boundary {
                out.push((piece_start + word_start, piece_start + at));
                word_start = at;
            }
        }
        out.push((piece_start + word_start, piece_start + piece.len()));
    }
    if ident.chars().any(is_cjk) {
        out = out.into_iter().flat_map(|(s, e)| cjk_pairs(text, s, e)).collect();
    }
    out
}

/// Han, kana and Hangul: scripts written without spaces between words.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF     // Hiragana, Katakana
        | 0x3400..=0x4DBF   // CJK Extension A
        | 0x4E00..=0x9FFF   // CJK Unified Ideographs
        | 0xAC00..=0xD7AF   // Hangul syllables
        | 0xF900..=0xFAFF   // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F // CJK Extensions B and later
    )
}

/// The word `text[start..end]` with each run of CJK characters replaced by its overlapping pairs
/// (a lone character by itself); other characters stay whole.
fn cjk_pairs(text: &str, start: usize, end: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let chars: Vec<(usize, char)> = text[start..end].char_indices().map(|(i, c)| (start + i, c)).collect();
    let end_of = |i: usize| chars.get(i + 1).map_or(end, |&(at, _)| at);
    let mut i = 0;
    while i < chars.len() {
        let run_start = i;
        let cjk = is_cjk(chars[i].1);
        while i < chars.len() && is_cjk(chars[i].1) == cjk {
            i += 1;
        }
        if !cjk || i - run_start == 1 {
            out.push((chars[run_start].0, end_of(i - 1)));
        } else {
            for (j, &(at, _)) in chars.iter().enumerate().take(i - 1).skip(run_start) {
                out.push((at, end_of(j + 1)));
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The index
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
struct Fields {
    id: Field,
    path: Field,
    name: Field,
    signature: Field,
    docstring: Field,
    body: Field,
}

impl Fields {
    fn schema() -> (Schema, Fields) {
        let mut builder = Schema::builder();
        let text = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(TOKENIZER_NAME)
                // BM25 needs term frequencies and field norms; no query here uses positions.
                .set_index_option(IndexRecordOption::WithFreqs),
        );
        let fields = Fields {
            id: builder.add_text_field("id", STRING | STORED),
            path: builder.add_text_field("path", STRING),
            name: builder.add_text_field("name", text.clone()),
            signature: builder.add_text_field("signature", text.clone()),
            docstring: builder.add_text_field("docstring", text.clone()),
            body: builder.add_text_field("body", text),
        };
        (builder.build(), fields)
    }

    fn boosted(&self) -> [(Field, f32); 4] {
        [
            (self.name, BOOST_NAME),
            (self.signature, BOOST_SIGNATURE),
            (self.docstring, BOOST_DOCSTRING),
            (self.body, BOOST_BODY),
        ]
    }
}

/// What a search sees: one reader generation, BM25's statistics over its live documents and
/// the snapshot it reflects.
struct Current {
    searcher: Searcher,
    statistics: Arc<LiveStatistics>,
    /// The snapshot indexed (its version is the index's): what a hit was ranked by, when the
    /// index lags a newer one.
    snapshot: Snapshot,
}

/// A search's answer: the hits, the version and snapshot they were ranked from, and what the
/// query left out (see [`MAX_QUERY_TOKENS`]).
pub struct TextAnswer {
    pub version: u64,
    pub hits: Vec<(String, f32)>,
    pub note: Option<String>,
    pub indexed: Snapshot,
}

impl Current {
    fn of(searcher: Searcher, fields: &Fields, snapshot: &Snapshot) -> Result<Current, TextIndexError> {
        let statistics = Arc::new(LiveStatistics::of(&searcher, fields)?);
        Ok(Current { searcher, statistics, snapshot: snapshot.clone() })
    }
}

/// BM25's statistics (how many documents there are, how many hold a term, how long a field is
/// on average) over the live documents of one reader generation.
///
/// tantivy's own statistics count a document an update deleted until a merge drops its segment's
/// deleted documents, and which merges have happened depends on the history of updates and on
/// how they were batched. Scores of the same query on the same snapshot then differed between
/// two processes that saw the same edits batched differently (bench/reports/retrieval-fit.md,
/// twenty-fifth round). These statistics depend on the live documents alone, so an index scores
/// as one built afresh from its snapshot would, whatever its history.
struct LiveStatistics {
    searcher: Searcher,
    docs: u64,
    /// Per text field: the sum of the live documents' field norms (tantivy's encoding of a
    /// field's length in one byte: exact up to 40 tokens, rounded down above, by up to about 12 %).
    tokens: FxHashMap<Field, u64>,
    /// Per segment (by ordinal): its deleted documents, ascending.
    deleted: Vec<Vec<DocId>>,
    /// Document frequencies already counted in this generation (queries repeat terms); only
    /// used while some segment has deleted documents.
    doc_freqs: Mutex<FxHashMap<Term, u64>>,
}

impl LiveStatistics {
    fn of(searcher: &Searcher, fields: &Fields) -> Result<LiveStatistics, TextIndexError> {
        let readers = searcher.segment_readers();
        let deleted: Vec<Vec<DocId>> = readers
            .iter()
            .map(|r| match r.alive_bitset() {
                Some(alive) => (0..r.max_doc()).filter(|&d| alive.is_deleted(d)).collect(),
                None => Vec::new(),
            })
            .collect();
        let mut tokens: FxHashMap<Field, u64> = FxHashMap::default();
        for (field, _) in fields.boosted() {
            let mut total = 0u64;
            for r in readers {
                let norms = r.get_fieldnorms_reader(field)?;
                total += match r.alive_bitset() {
                    Some(alive) => alive.iter_alive().map(|d| u64::from(norms.fieldnorm(d))).sum::<u64>(),
                    None => (0..r.max_doc()).map(|d| u64::from(norms.fieldnorm(d))).sum::<u64>(),
                };
            }
            tokens.insert(field, total);
        }
        Ok(LiveStatistics {
            searcher: searcher.clone(),
            docs: searcher.num_docs(),
            tokens,
            deleted,
            doc_freqs: Mutex::new(FxHashMap::default()),
        })
    }

    /// How many live documents hold `term`. Per segment with deleted documents, whichever is
    /// shorter: the term's postings, walked and tested against the segment's alive documents,
    /// or its deleted documents, each sought in the postings (in order; a merge drops them past
    /// [`MAX_DELETED_SHARE`]) and taken off tantivy's count.
    fn count_doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        let mut live = 0u64;
        for (r, deleted) in self.searcher.segment_readers().iter().zip(&self.deleted) {
            let inverted = r.inverted_index(term.field())?;
            let Some(info) = inverted.get_term_info(term)? else { continue };
            let held = u64::from(info.doc_freq);
            let alive = match r.alive_bitset() {
                Some(alive) if !deleted.is_empty() => alive,
                _ => {
                    live += held;
                    continue;
                }
            };
            let mut postings = inverted.read_postings_from_terminfo(&info, IndexRecordOption::Basic)?;
            if held <= deleted.len() as u64 {
                let mut doc = postings.doc();
                while doc != TERMINATED {
                    live += u64::from(alive.is_alive(doc));
                    doc = postings.advance();
                }
                continue;
            }
            let mut dead = 0u64;
            for &d in deleted {
                // `seek` only moves forward: a document past `d` already means `d` lacks the term.
                if postings.doc() == TERMINATED {
                    break;
                }
                if postings.doc() <= d && postings.seek(d) == d {
                    dead += 1;
                }
            }
            live += held.saturating_sub(dead);
        }
        Ok(live)
    }
}

impl Bm25StatisticsProvider for LiveStatistics {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        Ok(self.tokens.get(&field).copied().unwrap_or(0))
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.docs)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        if self.deleted.iter().all(Vec::is_empty) {
            // Nothing deleted: tantivy's count is the live one, a lookup per segment.
            return self.searcher.doc_freq(term);
        }
        if let Some(&n) = self.doc_freqs.lock().ok().as_ref().and_then(|m| m.get(term)) {
            return Ok(n);
        }
        let n = self.count_doc_freq(term)?;
        if let Ok(mut cache) = self.doc_freqs.lock() {
            cache.insert(term.clone(), n);
        }
        Ok(n)
    }
}

/// Sizes of a text index.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TextIndexStats {
    pub version: u64,
    /// Live documents (units).
    pub docs: u64,
    /// Deleted documents not yet merged away (BM25's statistics leave them out; their postings
    /// still cost time until merged).
    pub deleted: u64,
    pub segments: usize,
    /// Bytes of the index data (postings, dictionaries, field norms, stored ids), as tantivy
    /// accounts them.
    pub bytes: u64,
}

/// An in-RAM BM25 index over the units of a snapshot. `Send + Sync`: share it in an `Arc`,
/// search from any thread, update from one.
pub struct TextIndex {
    fields: Fields,
    // Kept so the index (directory, tokenizers) lives as long as the reader and writer.
    _index: Index,
    reader: IndexReader,
    writer: Mutex<IndexWriter<TantivyDocument>>,
    current: RwLock<Current>,
    /// For an index stored in a directory: the digest of each file's documents as committed
    /// (see [`Manifest`]); `None` for an index in RAM.
    stored: Option<Mutex<Manifest>>,
}

impl std::fmt::Debug for TextIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextIndex").field("version", &self.version()).finish_non_exhaustive()
    }
}

impl TextIndex {
    /// Indexes every unit of `snapshot` with `threads` indexing threads (at least one), in RAM.
    pub fn build(snapshot: &Snapshot, threads: usize) -> Result<TextIndex, TextIndexError> {
        let (schema, fields) = Fields::schema();
        Self::fill(Index::create_in_ram(schema), fields, snapshot, threads, None)
    }

    /// The index stored in `dir`, brought to `snapshot`: only the files whose documents differ
    /// from what was stored are indexed again, so a query without a daemon does not rebuild the
    /// whole index each time (django: 1.4 s, against about 0.2 s to open it unchanged). A
    /// directory that holds no index, or one written by other code (see [`Manifest`]) or
    /// unreadable, is replaced by a new one built from `snapshot`. Every commit carries the
    /// digests of what it holds, atomically with it: a process stopped part way leaves the last
    /// commit, which the next open brings up to date.
    ///
    /// One process at a time may hold it (tantivy's writer lock): a second gets an error (the
    /// caller builds in RAM instead).
    pub fn stored(dir: &Path, snapshot: &Snapshot, threads: usize) -> Result<TextIndex, TextIndexError> {
        let io = |error| TextIndexError::Io { path: dir.display().to_string(), error };
        if dir.join("meta.json").exists() {
            match Self::reopen(dir, snapshot, threads) {
                Ok(index) => return Ok(index),
                // Held by another process: not ours to replace.
                Err(TextIndexError::Tantivy(tantivy::TantivyError::LockFailure(..))) => {
                    return Err(TextIndexError::NotReusable(format!("{} is in use by another process", dir.display())));
                }
                Err(_) => {}
            }
            std::fs::remove_dir_all(dir).map_err(io)?;
        }
        std::fs::create_dir_all(dir).map_err(io)?;
        let (schema, fields) = Fields::schema();
        let index = Index::create_in_dir(dir, schema)?;
        Self::fill(index, fields, snapshot, threads, Some(Manifest::default()))
    }

    /// Opens the index stored in `dir` and indexes what changed since its last commit.
    fn reopen(dir: &Path, snapshot: &Snapshot, threads: usize) -> Result<TextIndex, TextIndexError> {
        let index = Index::open_in_dir(dir)?;
        let payload = index.load_metas()?.payload.unwrap_or_default();
        let stored = Manifest::parse(&payload)
            .ok_or_else(|| TextIndexError::NotReusable("written by other code, or not by fresco".into()))?;
        let (schema, fields) = Fields::schema();
        if index.schema() != schema {
            return Err(TextIndexError::NotReusable("another schema".into()));
        }
        index.tokenizers().register(TOKENIZER_NAME, TextAnalyzer::from(CodeTokenizer));
        let threads = threads.clamp(1, 8);
        let writer: IndexWriter<TantivyDocument> =
            index.writer_with_num_threads(threads, threads * WRITER_BUDGET_PER_THREAD)?;
        writer.set_merge_policy(Box::new(tantivy::indexer::NoMergePolicy));
        let reader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?;
        // The searcher of the stored commit stands in until `update` publishes the snapshot's.
        let current = Current::of(reader.searcher(), &fields, snapshot)?;
        let mut changed = Vec::new();
        for file in snapshot.files() {
            if stored.digests.get(&file.graph.path) != Some(&file_digest(&fields, file)) {
                changed.push(file.graph.path.clone());
            }
        }
        let removed: Vec<String> =
            stored.digests.keys().filter(|path| snapshot.file(path).is_none()).cloned().collect();
        let text = TextIndex {
            fields,
            _index: index,
            reader,
            writer: Mutex::new(writer),
            current: RwLock::new(current),
            stored: Some(Mutex::new(stored)),
        };
        if !changed.is_empty() || !removed.is_empty() {
            text.update(snapshot, &changed, &removed)?;
        }
        Ok(text)
    }

    /// Indexes every unit of `snapshot` into the empty `index`; `stored` (for an index in a
    /// directory) receives the digest of every file committed.
    fn fill(
        index: Index,
        fields: Fields,
        snapshot: &Snapshot,
        threads: usize,
        mut stored: Option<Manifest>,
    ) -> Result<TextIndex, TextIndexError> {
        index.tokenizers().register(TOKENIZER_NAME, TextAnalyzer::from(CodeTokenizer));
        let threads = threads.clamp(1, 8);
        let mut writer: IndexWriter<TantivyDocument> =
            index.writer_with_num_threads(threads, threads * WRITER_BUDGET_PER_THREAD)?;
        for file in snapshot.files() {
            add_file(&writer, &fields, file)?;
            if let Some(manifest) = &mut stored {
                manifest.digests.insert(file.graph.path.clone(), file_digest(&fields, file));
            }
        }
        commit(&mut writer, stored.as_ref())?;
        // Segments are merged by `update`, at known points, not by tantivy in the background.
        writer.set_merge_policy(Box::new(tantivy::indexer::NoMergePolicy));
        let reader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?;
        let current = Current::of(reader.searcher(), &fields, snapshot)?;
        Ok(TextIndex {
            fields,
            _index: index,
            reader,
            writer: Mutex::new(writer),
            current: RwLock::new(current),
            stored: stored.map(Mutex::new),
        })
    }

    /// Brings the index to `snapshot`: drops every document of `changed_paths` and
    /// `removed_paths`, indexes the units the changed files have in `snapshot`, commits and
    /// publishes the new reader generation. Afterwards [`version`](Self::version) is
    /// `snapshot.version()`. Searches running meanwhile see the previous version.
    ///
    /// On error the uncommitted changes are rolled back and the index stays at its previous
    /// version (rebuilding is the safe recovery).
    pub fn update(
        &self,
        snapshot: &Snapshot,
        changed_paths: &[String],
        removed_paths: &[String],
    ) -> Result<(), TextIndexError> {
        let mut writer = self.writer.lock().map_err(|_| TextIndexError::Poisoned)?;
        // A batch the lanes put together from several versions can name a file more than once
        // (saved twice, or changed in two of them): its documents must be added once.
        let mut seen: FxHashSet<&str> = FxHashSet::default();
        let changed_paths: Vec<&String> = changed_paths.iter().filter(|p| seen.insert(String::as_str(p))).collect();
        let mut stored = match &self.stored {
            Some(m) => Some(m.lock().map_err(|_| TextIndexError::Poisoned)?),
            None => None,
        };
        // What the commit will hold, applied to the stored digests only once it is committed.
        let mut next = stored.as_deref().cloned();
        let result = (|| {
            for path in removed_paths.iter().chain(changed_paths.iter().copied()) {
                writer.delete_term(Term::from_field_text(self.fields.path, path));
                if let Some(manifest) = &mut next {
                    manifest.digests.remove(path.as_str());
                }
            }
            for path in &changed_paths {
                if let Some(file) = snapshot.file(path) {
                    add_file(&writer, &self.fields, file)?;
                    if let Some(manifest) = &mut next {
                        manifest.digests.insert(file.graph.path.clone(), file_digest(&self.fields, file));
                    }
                }
            }
            commit(&mut writer, next.as_ref())?;
            merge_segments(&self._index, &mut writer)
        })();
        let merged = match result {
            Ok(merged) => merged,
            Err(e) => {
                let _ = writer.rollback();
                return Err(e);
            }
        };
        if let (Some(stored), Some(next)) = (stored.as_deref_mut(), next) {
            *stored = next;
        }
        self.reader.reload()?;
        let next = Current::of(self.reader.searcher(), &self.fields, snapshot)?;
        let mut current = self.current.write().map_err(|_| TextIndexError::Poisoned)?;
        *current = next;
        drop(current);
        if merged {
            // tantivy deletes unused files when it commits, before the merge, and never a file a
            // searcher uses: the merged segments' files stayed until the next merge, in RAM for
            // the daemon (django's `tests/` renamed: 20 files and 27 MiB where the index is 7
            // files and 10 MiB). Now that no searcher of this index's own holds them, they go; a
            // query still reading them keeps them until the next merge. Failing to delete loses
            // nothing but the room.
            let _ = writer.garbage_collect_files().wait();
        }
        Ok(())
    }

    /// The snapshot version the index reflects.
    pub fn version(&self) -> u64 {
        self.current.read().map(|c| c.snapshot.version()).unwrap_or(0)
    }

    /// The `k` best units for `query` by BM25, best first: (unit id, score to four significant
    /// digits); equal scores in unit id order.
    pub fn search(&self, query: &str, k: usize) -> Result<Vec<(String, f32)>, TextIndexError> {
        Ok(self.search_versioned(query, k)?.1)
    }

    /// Like [`search`](Self::search), also returning the snapshot version the hits come from.
    pub fn search_versioned(&self, query: &str, k: usize) -> Result<(u64, Vec<(String, f32)>), TextIndexError> {
        let answer = self.search_explained(query, k)?;
        Ok((answer.version, answer.hits))
    }

    /// Like [`search_versioned`](Self::search_versioned), also with the snapshot the hits were
    /// ranked from and a note when the query had more words the index holds than were used (see
    /// [`MAX_QUERY_TOKENS`]).
    pub fn search_explained(&self, query: &str, k: usize) -> Result<TextAnswer, TextIndexError> {
        let (searcher, statistics, version, indexed) = {
            let current = self.current.read().map_err(|_| TextIndexError::Poisoned)?;
            (current.searcher.clone(), current.statistics.clone(), current.snapshot.version(), current.snapshot.clone())
        };
        let (query, note) = self.query(query, &statistics)?;
        let nothing = |note| Ok(TextAnswer { version, hits: Vec::new(), note, indexed: indexed.clone() });
        let Some(query) = query else {
            return nothing(note);
        };
        if k == 0 {
            return nothing(note);
        }
        // Equal scores are ordered by unit id, not by where the documents sit in the segments
        // (which depends on the order of updates and merges): more hits than asked for are
        // fetched, until the last one scores below the k-th, so that every document tied with
        // the k-th takes part in deciding the cut.
        // tantivy's collector reserves its whole limit up front, so a `k` beyond the number of
        // documents (a client may ask for `k 4294967296`) is cut to what can be returned.
        let documents = usize::try_from(searcher.num_docs()).unwrap_or(usize::MAX);
        let k = k.min(documents);
        if k == 0 {
            return nothing(note);
        }
        let mut limit = k.saturating_add(TIE_SLACK).min(documents);
        let top = loop {
            let collector = TopDocs::with_limit(limit).order_by_score();
            let top = searcher.search_with_statistics_provider(&query, &collector, statistics.as_ref())?;
            let tied_at_the_end = top.len() == limit
                && limit > k
                && top.get(limit - 1).zip(top.get(k - 1)).is_some_and(|(last, kth)| rounded(last.0) == rounded(kth.0));
            if !tied_at_the_end || limit == documents {
                break top;
            }
            limit = limit.saturating_mul(4).min(documents);
        };
        let mut hits = Vec::with_capacity(top.len());
        for (score, address) in top {
            let doc: TantivyDocument = searcher.doc(address)?;
            if let Some(id) = doc.get_first(self.fields.id).and_then(|v| v.as_str()) {
                hits.push((id.to_string(), rounded(score)));
            }
        }
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        hits.truncate(k);
        Ok(TextAnswer { version, hits, note, indexed })
    }

    /// The query for `text`: its distinct code tokens that the index holds, in every field, as
    /// should-clauses; of more than [`MAX_QUERY_TOKENS`], the first, and a note saying so. A
    /// token no document holds adds nothing to a score and is left out before counting, so
    /// words the repository never uses cost no place. Counts are the live documents'
    /// ([`LiveStatistics`]), so the choice, like the scores, does not depend on the index's
    /// history.
    fn query(
        &self,
        text: &str,
        statistics: &LiveStatistics,
    ) -> Result<(Option<BooleanQuery>, Option<String>), TextIndexError> {
        let mut seen: FxHashSet<String> = FxHashSet::default();
        let mut tokens: Vec<String> = Vec::new();
        let mut read_all = true;
        for t in code_tokens(text) {
            if seen.contains(&t) {
                continue;
            }
            if tokens.len() == MAX_QUERY_TOKENS_READ {
                read_all = false;
                break;
            }
            seen.insert(t.clone());
            tokens.push(t);
        }
        let mut held: Vec<String> = Vec::new();
        for token in tokens {
            let mut documents = 0u64;
            for (field, _) in self.fields.boosted() {
                documents += statistics.doc_freq(&Term::from_field_text(field, &token))?;
            }
            if documents > 0 {
                held.push(token);
            }
        }
        let mut note = None;
        if held.len() > MAX_QUERY_TOKENS || !read_all {
            let present = held.len();
            held.truncate(MAX_QUERY_TOKENS);
            let scope = if read_all {
                String::new()
            } else {
                format!(" (read up to its first {MAX_QUERY_TOKENS_READ} distinct words)")
            };
            note = Some(format!(
                "the lexical lane used the first {} of the {present} words of the query the index holds{scope}",
                held.len()
            ));
        }
        if held.is_empty() {
            return Ok((None, note));
        }
        let tokens = held;
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for token in &tokens {
            for (field, boost) in self.fields.boosted() {
                let term = TermQuery::new(Term::from_field_text(field, token), IndexRecordOption::WithFreqs);
                clauses.push((Occur::Should, Box::new(BoostQuery::new(Box::new(term), boost))));
            }
        }
        Ok((Some(BooleanQuery::new(clauses)), note))
    }

    /// Document count, segments and bytes of the current generation.
    pub fn stats(&self) -> Result<TextIndexStats, TextIndexError> {
        let (searcher, version) = {
            let current = self.current.read().map_err(|_| TextIndexError::Poisoned)?;
            (current.searcher.clone(), current.snapshot.version())
        };
        let bytes = searcher.space_usage().map(|u| u.total().get_bytes()).unwrap_or(0);
        let deleted = searcher.segment_readers().iter().map(|r| u64::from(r.num_deleted_docs())).sum();
        Ok(TextIndexStats {
            version,
            docs: searcher.num_docs(),
            deleted,
            segments: searcher.segment_readers().len(),
            bytes,
        })
    }
}

/// A BM25 score to 1 part in 2^14 (about four significant digits), rounded to nearest. The same
/// document's score differs in its last bits from segment to segment: tantivy's block-max WAND
/// adds a document's term scores in an order that depends on the segment's other documents.
/// Rounded scores are equal where the ranking should call them equal, so ties are ordered by
/// unit id and the same snapshot ranks the same however its segments were built, unless two such
/// scores straddle a rounding step (see the module's docs).
fn rounded(score: f32) -> f32 {
    const DROPPED_BITS: u32 = 23 - 14;
    if !score.is_finite() {
        return score;
    }
    let bits = score.to_bits().wrapping_add(1 << (DROPPED_BITS - 1)) & !((1 << DROPPED_BITS) - 1);
    f32::from_bits(bits)
}

/// How many hits past the `k` asked for are fetched at first to order ties at the cut by unit id
/// (four times as many each time the last one still ties with the k-th).
const TIE_SLACK: usize = 16;

/// More segments than this after an update: the smaller ones are merged into one.
const MAX_SEGMENTS: usize = 8;

/// A larger share of deleted documents than this: every segment is merged, which drops them.
const MAX_DELETED_SHARE: f64 = 0.1;

/// Merges segments after an update, synchronously. Ranking does not depend on it (BM25's
/// statistics count live documents only, see [`LiveStatistics`]), but speed does: every segment
/// is searched on its own, deleted documents stay in the postings a search reads, and the
/// statistics seek the postings to each of them. Every update adds a segment (the edited files'
/// documents); past [`MAX_SEGMENTS`] the smallest are merged, which is cheap, and once deleted
/// documents pass [`MAX_DELETED_SHARE`], everything is.
///
/// Returns whether it merged: the merged segments' files are then to be deleted once no
/// searcher uses them (see [`TextIndex::update`]).
fn merge_segments(index: &Index, writer: &mut IndexWriter<TantivyDocument>) -> Result<bool, TextIndexError> {
    let mut metas = index.searchable_segment_metas()?;
    let deleted: u64 = metas.iter().map(|m| u64::from(m.num_deleted_docs())).sum();
    let total: u64 = metas.iter().map(|m| u64::from(m.max_doc())).sum();
    let merge: Vec<tantivy::index::SegmentId> = if total > 0 && deleted as f64 > MAX_DELETED_SHARE * total as f64 {
        metas.iter().map(|m| m.id()).collect()
    } else if metas.len() > MAX_SEGMENTS {
        // The smallest ones: the updates' own segments, not the large ones of the first build.
        metas.sort_by_key(|m| m.max_doc());
        metas.iter().take(metas.len() - MAX_SEGMENTS / 2).map(|m| m.id()).collect()
    } else {
        Vec::new()
    };
    if !merge.is_empty() {
        writer.merge(&merge).wait()?;
    }
    Ok(!merge.is_empty())
}

/// Adds one document per indexable unit of `file`.
fn add_file(writer: &IndexWriter<TantivyDocument>, fields: &Fields, file: &FileEntry) -> Result<(), TextIndexError> {
    let path = file.graph.path.as_str();
    // Lambdas are searched as part of the unit that contains them.
    for unit in file.graph.units.iter().filter(|u| !u.is_lambda()) {
        if let Some(doc) = unit_document(fields, path, file, unit) {
            writer.add_document(doc)?;
        }
    }
    Ok(())
}

fn unit_document(fields: &Fields, path: &str, file: &FileEntry, unit: &Unit) -> Option<TantivyDocument> {
    let mut doc = TantivyDocument::default();
    for (field, text) in unit_texts(fields, path, file, unit)? {
        doc.add_text(field, text);
    }
    Some(doc)
}

/// The texts of a unit's document, field by field: what is indexed, and what a stored index's
/// digest of the file covers. `None` for a unit that has no document.
fn unit_texts<'f>(
    fields: &Fields,
    path: &'f str,
    file: &'f FileEntry,
    unit: &'f Unit,
) -> Option<Vec<(Field, Cow<'f, str>)>> {
    let mut texts: Vec<(Field, Cow<'f, str>)> = vec![
        (fields.id, Cow::Borrowed(&unit.id)),
        (fields.path, Cow::Borrowed(path)),
        (fields.name, Cow::Borrowed(&unit.name)),
    ];
    let header = |texts: &mut Vec<(Field, Cow<'f, str>)>| {
        if let Some(signature) = &unit.signature {
            texts.push((fields.signature, Cow::Borrowed(signature)));
        }
        if let Some(docstring) = &unit.docstring {
            texts.push((fields.docstring, Cow::Borrowed(docstring)));
        }
    };
    match unit.kind {
        UnitKind::External => return None,
        UnitKind::Function | UnitKind::Method => {
            header(&mut texts);
            texts.push((fields.body, Cow::Borrowed(file.source_of(unit))));
        }
        UnitKind::Class => {
            header(&mut texts);
            let mut members = String::new();
            for edge in file.edges_from(&unit.id) {
                if edge.kind != EdgeKind::Contains {
                    continue;
                }
                let name = file.unit(&edge.dst).map(|m| m.name.as_str()).unwrap_or(&edge.dst);
                let short = name.rsplit('.').next().unwrap_or(name);
                members.push_str(short);
                members.push('\n');
            }
            if !members.is_empty() {
                texts.push((fields.body, Cow::Owned(members)));
            }
        }
        UnitKind::Module => {
            if let Some(docstring) = &unit.docstring {
                texts.push((fields.docstring, Cow::Borrowed(docstring)));
            }
        }
        UnitKind::Variable => {
            texts.push((fields.body, Cow::Borrowed(file.source_of(unit))));
        }
    }
    Some(texts)
}

/// A digest of the documents of `file` (every field's text of every unit, in order): a stored
/// index holds the file's current documents exactly when its stored digest is this one. What a
/// document holds depends on more than the file's text (a unit's qualified name depends on where
/// the module sits in the packages), hence a digest of the documents, not of the file.
fn file_digest(fields: &Fields, file: &FileEntry) -> u64 {
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    let path = file.graph.path.as_str();
    for unit in file.graph.units.iter().filter(|u| !u.is_lambda()) {
        for (field, text) in unit_texts(fields, path, file, unit).into_iter().flatten() {
            hasher.update(&field.field_id().to_le_bytes());
            hasher.update(&(text.len() as u64).to_le_bytes());
            hasher.update(text.as_bytes());
        }
        // A unit boundary: two units never hash like one.
        hasher.update(&[0xff]);
    }
    hasher.digest()
}

/// What a stored index's commit holds, written as the commit's payload (atomically with it): a
/// header naming the code that wrote it, then the digest of each file's documents.
///
/// The header is a fingerprint of this file (the tokenizer, the schema, what a document holds):
/// an index written by other code is rebuilt, never searched with another tokenizer's terms.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Manifest {
    digests: BTreeMap<String, u64>,
}

/// A fingerprint of this file's code; see [`Manifest`].
const STORED_FORMAT: u64 = xxhash_rust::const_xxh3::xxh3_64(include_str!("text_index.rs").as_bytes());

impl Manifest {
    fn header() -> String {
        format!("fresco text index {STORED_FORMAT:016x}")
    }

    /// One line per file: the digest in hex, a space, the path with `\\` and line breaks escaped.
    fn write(&self) -> String {
        let mut out = Self::header();
        out.push('\n');
        for (path, digest) in &self.digests {
            out.push_str(&format!("{digest:016x} "));
            for c in path.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    c => out.push(c),
                }
            }
            out.push('\n');
        }
        out
    }

    /// `None` unless `payload` was written by [`write`](Self::write) of this code.
    fn parse(payload: &str) -> Option<Manifest> {
        let mut lines = payload.split('\n');
        if lines.next()? != Self::header() {
            return None;
        }
        let mut digests = BTreeMap::new();
        for line in lines.filter(|l| !l.is_empty()) {
            let (digest, escaped) = line.split_once(' ')?;
            let digest = u64::from_str_radix(digest, 16).ok()?;
            let mut path = String::with_capacity(escaped.len());
            let mut chars = escaped.chars();
            while let Some(c) = chars.next() {
                if c != '\\' {
                    path.push(c);
                    continue;
                }
                match chars.next()? {
                    '\\' => path.push('\\'),
                    'n' => path.push('\n'),
                    'r' => path.push('\r'),
                    _ => return None,
                }
            }
            digests.insert(path, digest);
        }
        Some(Manifest { digests })
    }
}

/// Commits what the writer holds; for a stored index with the manifest of what it then holds.
fn commit(writer: &mut IndexWriter<TantivyDocument>, manifest: Option<&Manifest>) -> Result<(), TextIndexError> {
    let mut prepared = writer.prepare_commit()?;
    if let Some(manifest) = manifest {
        prepared.set_payload(&manifest.write());
    }
    prepared.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn text_index_is_send_and_sync() {
        assert_send_sync::<TextIndex>();
    }

    /// After an update that merges, the directory holds what a fresh index of the same
    /// snapshot holds: the merged segments' files are gone.
    #[test]
    fn a_merge_leaves_no_files_of_the_segments_it_merged() {
        let dir = tempfile::tempdir().expect("tempdir");
        for i in 0..10 {
            std::fs::write(dir.path().join(format!("m{i}.py")), format!("def f{i}():\n    return {i}\n"))
                .expect("write");
        }
        let mut indexer = crate::Indexer::in_memory(dir.path(), crate::IndexerOptions::default());
        indexer.refresh().expect("index");
        let index = TextIndex::build(indexer.snapshot(), 1).expect("build");
        let files_of = |index: &TextIndex| index._index.directory().list_managed_files().len();
        let fresh_files = files_of(&index);
        // Half the files change: more deleted documents than MAX_DELETED_SHARE, a full merge.
        for i in 0..5 {
            std::fs::write(dir.path().join(format!("m{i}.py")), format!("def g{i}():\n    return {i}\n"))
                .expect("write");
        }
        let report = indexer.refresh().expect("refresh");
        index.update(indexer.snapshot(), &report.changed_files, &report.removed_files).expect("update");
        assert_eq!(index.stats().expect("stats").segments, 1, "the update merged");
        assert_eq!(files_of(&index), fresh_files);
        assert_eq!(files_of(&TextIndex::build(indexer.snapshot(), 1).expect("build")), fresh_files);
    }

    #[test]
    fn a_manifest_reads_back_what_it_wrote_whatever_the_paths_hold() {
        let mut manifest = Manifest::default();
        for (i, path) in
            ["pkg/a.py", "odd\\name.py", "line\nbreak.py", "cr\r.py", "spaces in it.py", "ü.py", ""].iter().enumerate()
        {
            manifest.digests.insert(path.to_string(), (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        }
        assert_eq!(Manifest::parse(&manifest.write()), Some(manifest.clone()));
        assert_eq!(Manifest::parse(""), None, "no header");
        assert_eq!(Manifest::parse("fresco text index 0000000000000000\n"), None, "other code's");
        let bad_escape = format!("{}\n{:016x} a\\qb.py\n", Manifest::header(), 1);
        assert_eq!(Manifest::parse(&bad_escape), None);
    }

    #[test]
    fn positions_never_decrease_in_stream_order() {
        let tokens = code_token_details("x = requests.adapters.HTTPAdapter(max_retries=3)");
        for pair in tokens.windows(2) {
            assert!(pair[0].position <= pair[1].position, "{tokens:?}");
        }
    }
}
