//! Quantised vectors, their store (sled, keyed by text hash) and the brute-force index.

use std::fmt;
use std::path::Path;

use super::{DIMENSIONS, EmbedError, Vector};

/// A vector as stored and indexed: `v ≈ q * scale`.
#[derive(Clone, Debug, PartialEq)]
pub struct Quantized {
    pub scale: f32,
    pub q: [i8; DIMENSIONS],
}

impl Quantized {
    pub fn of(v: &Vector) -> Quantized {
        let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
        let mut q = [0i8; DIMENSIONS];
        if max == 0.0 || !max.is_finite() {
            return Quantized { scale: 0.0, q };
        }
        let inv = 127.0 / max;
        for (o, x) in q.iter_mut().zip(v) {
            *o = (x * inv).round().clamp(-127.0, 127.0) as i8;
        }
        Quantized { scale: max / 127.0, q }
    }

    pub fn to_vector(&self) -> Vector {
        let mut v = [0f32; DIMENSIONS];
        for (o, &x) in v.iter_mut().zip(&self.q) {
            *o = x as f32 * self.scale;
        }
        v
    }

    const BYTES: usize = 4 + DIMENSIONS;

    fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut out = [0u8; Self::BYTES];
        out[..4].copy_from_slice(&self.scale.to_le_bytes());
        for (o, &x) in out[4..].iter_mut().zip(&self.q) {
            *o = x as u8;
        }
        out
    }

    fn from_bytes(bytes: &[u8]) -> Option<Quantized> {
        if bytes.len() != Self::BYTES {
            return None;
        }
        let scale = f32::from_le_bytes(bytes[..4].try_into().ok()?);
        let mut q = [0i8; DIMENSIONS];
        for (o, &x) in q.iter_mut().zip(&bytes[4..]) {
            *o = x as i8;
        }
        Some(Quantized { scale, q })
    }
}

// ---------------------------------------------------------------------------------------------
// The vector store

/// The key of an embedded text: its xxh3-64.
pub fn text_key(text: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(text.as_bytes())
}

/// Vectors persisted in a sled tree: key = xxh3-64 of the embedded text (8 bytes, big-endian),
/// value = [`Quantized`] as 388 bytes (f32 LE scale, then 384 i8). The tree's name names the model
/// and its weights, so vectors of another model are never mixed in.
#[derive(Clone)]
pub struct VectorStore {
    tree: sled::Tree,
    /// Keeps a store opened by [`VectorStore::open`] alive.
    _db: Option<sled::Db>,
}

impl VectorStore {
    /// The tree name: the model and the first bytes of its weights' hash.
    pub const TREE: &'static str = "vectors/all-MiniLM-L6-v2/53aa51172d142c89/mean-l2/v1";

    /// Opens (or creates) a store of its own in `dir`. Keep it out of a directory that the graph
    /// store may delete when it rebuilds: vectors are keyed by text and outlive analysis changes.
    pub fn open(dir: &Path) -> Result<VectorStore, EmbedError> {
        let db = fresco_graph::store::open_sled(&sled::Config::new().path(dir).cache_capacity(16 << 20))?;
        Self::in_db(&db).map(|mut s| {
            s._db = Some(db);
            s
        })
    }

    /// The store in the vectors tree of an open sled database.
    pub fn in_db(db: &sled::Db) -> Result<VectorStore, EmbedError> {
        Ok(VectorStore { tree: db.open_tree(Self::TREE)?, _db: None })
    }

    /// A store in memory, deleted when dropped (tests).
    pub fn temporary() -> Result<VectorStore, EmbedError> {
        let db = sled::Config::new().temporary(true).open()?;
        Self::in_db(&db).map(|mut s| {
            s._db = Some(db);
            s
        })
    }

    pub fn get(&self, key: u64) -> Result<Option<Vector>, EmbedError> {
        Ok(self.get_quantized(key)?.map(|q| q.to_vector()))
    }

    pub fn get_quantized(&self, key: u64) -> Result<Option<Quantized>, EmbedError> {
        Ok(self.tree.get(key.to_be_bytes())?.and_then(|v| Quantized::from_bytes(&v)))
    }

    pub fn contains(&self, key: u64) -> Result<bool, EmbedError> {
        Ok(self.tree.contains_key(key.to_be_bytes())?)
    }

    /// Stores vectors in one atomic batch.
    pub fn put_batch(&self, items: &[(u64, Vector)]) -> Result<(), EmbedError> {
        let mut batch = sled::Batch::default();
        for (key, v) in items {
            batch.insert(&key.to_be_bytes(), &Quantized::of(v).to_bytes()[..]);
        }
        self.tree.apply_batch(batch)?;
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.tree.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tree.is_empty()
    }

    pub fn flush(&self) -> Result<(), EmbedError> {
        self.tree.flush()?;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// The index

/// Unit ids and their vectors (int8, contiguous) for brute-force cosine top-k.
/// Memory: 388 bytes per vector plus the ids (about 27 MB for 60,000 units).
#[derive(Default)]
pub struct VectorIndex {
    // Built row by row by the worker (`worker::Worker::build`).
    pub(super) ids: Vec<Box<str>>,
    pub(super) keys: Vec<u64>,
    pub(super) scales: Vec<f32>,
    pub(super) data: Vec<i8>,
    /// Units of the snapshot without a vector (yet): 0 for a complete index.
    pub(super) missing: usize,
    /// (xxh3 of an id, its row), sorted: built on the first lookup by id (see
    /// [`VectorIndex::row_of`]); a published index never changes.
    rows_by_id: std::sync::OnceLock<Vec<(u64, u32)>>,
}

impl fmt::Debug for VectorIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VectorIndex").field("len", &self.len()).field("missing", &self.missing).finish()
    }
}

impl VectorIndex {
    /// An index over `(id, vector)` pairs.
    pub fn build(items: impl IntoIterator<Item = (String, Vector)>) -> VectorIndex {
        let mut index = VectorIndex::default();
        for (id, v) in items {
            index.push(id.into(), 0, &Quantized::of(&v));
        }
        index
    }

    pub(crate) fn push(&mut self, id: Box<str>, key: u64, q: &Quantized) {
        self.ids.push(id);
        self.keys.push(key);
        self.scales.push(q.scale);
        self.data.extend_from_slice(&q.q);
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Units of the snapshot that have no vector yet (a partial index published while a long
    /// embedding job runs); 0 when complete.
    pub fn missing(&self) -> usize {
        self.missing
    }

    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.ids.iter().map(|s| &**s)
    }

    /// The row of unit `id`'s vector, if it has one (the first, were an id pushed twice). The
    /// table of id hashes is built on the first call (about 3 ms for django's 62,000 units, 12
    /// bytes each); each lookup is then a binary search, where a scan of every id cost a
    /// millisecond or more per query.
    pub fn row_of(&self, id: &str) -> Option<usize> {
        let table = self.rows_by_id.get_or_init(|| {
            let mut table: Vec<(u64, u32)> = self
                .ids
                .iter()
                .enumerate()
                .map(|(row, id)| (xxhash_rust::xxh3::xxh3_64(id.as_bytes()), row as u32))
                .collect();
            table.sort_unstable();
            table
        });
        let hash = xxhash_rust::xxh3::xxh3_64(id.as_bytes());
        let first = table.partition_point(|(h, _)| *h < hash);
        table[first..]
            .iter()
            .take_while(|(h, _)| *h == hash)
            .map(|(_, row)| *row as usize)
            .find(|&row| self.ids.get(row).is_some_and(|i| &**i == id))
    }

    /// Whether unit `id` has a vector in this index.
    pub fn contains(&self, id: &str) -> bool {
        self.row_of(id).is_some()
    }

    /// The key ([`text_key`]) of the text unit `id`'s vector was computed from, if it has one.
    pub fn key_of(&self, id: &str) -> Option<u64> {
        self.row_of(id).and_then(|row| self.keys.get(row).copied())
    }

    /// Approximate heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.ids.capacity() * std::mem::size_of::<Box<str>>()
            + self.ids.iter().map(|s| s.len()).sum::<usize>()
            + self.keys.capacity() * 8
            + self.scales.capacity() * 4
            + self.data.capacity()
            + self.rows_by_id.get().map_or(0, |t| t.capacity() * std::mem::size_of::<(u64, u32)>())
    }

    /// Cosine similarity of `query` to each of `ids` (`None` for an id without a vector): a
    /// lookup per id ([`VectorIndex::row_of`]), for scoring a candidate set, not for top-k.
    pub fn similarities(&self, query: &Vector, ids: &[&str]) -> Vec<Option<f32>> {
        if ids.is_empty() || self.is_empty() {
            return vec![None; ids.len()];
        }
        let q = Quantized::of(query);
        ids.iter()
            .map(|id| {
                let row = self.row_of(id)?;
                let data = self.data.get(row * DIMENSIONS..(row + 1) * DIMENSIONS)?;
                let data = <&[i8; DIMENSIONS]>::try_from(data).ok()?;
                let mut dot = [0i32];
                scan(&q.q, data, &mut dot);
                Some(dot[0] as f32 * self.scales[row] * q.scale)
            })
            .collect()
    }

    /// The `k` ids most similar to `query` (cosine, best first; ties in index order).
    pub fn search(&self, query: &Vector, k: usize) -> Vec<(String, f32)> {
        let k = k.min(self.len());
        if k == 0 {
            return Vec::new();
        }
        let q = Quantized::of(query);
        let mut dots = vec![0i32; self.len()];
        scan_on_two_threads(&q.q, &self.data, &mut dots);
        let mut scored: Vec<(f32, u32)> =
            dots.iter().zip(&self.scales).enumerate().map(|(i, (&d, &s))| (d as f32 * s * q.scale, i as u32)).collect();
        let better = |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        if k < scored.len() {
            scored.select_nth_unstable_by(k - 1, better);
            scored.truncate(k);
        }
        scored.sort_unstable_by(better);
        scored.into_iter().map(|(s, i)| (self.ids[i as usize].to_string(), s)).collect()
    }
}

#[inline(always)]
fn scan_generic(q: &[i8; DIMENSIONS], data: &[i8], out: &mut [i32]) {
    for (row, o) in data.chunks_exact(DIMENSIONS).zip(out.iter_mut()) {
        let Ok(row) = <&[i8; DIMENSIONS]>::try_from(row) else { continue };
        let mut acc = 0i32;
        for j in 0..DIMENSIONS {
            acc += q[j] as i16 as i32 * row[j] as i16 as i32;
        }
        *o = acc;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn scan_avx2(q: &[i8; DIMENSIONS], data: &[i8], out: &mut [i32]) {
    scan_generic(q, data, out)
}

/// Rows below which a scan stays on one thread, whose start then costs more than it saves: 32k
/// rows take 1 to 2 ms on one thread (django's 62k, 2.1 to 3.5 ms).
const ROWS_FOR_TWO_THREADS: usize = 32 * 1024;

/// [`scan`], its second half on another thread when there are many rows. The scan streams the
/// whole index from memory (24 MB for django's 62k units), and one core's share of the memory
/// bandwidth is what bounds it.
fn scan_on_two_threads(q: &[i8; DIMENSIONS], data: &[i8], out: &mut [i32]) {
    let rows = out.len();
    if rows < ROWS_FOR_TWO_THREADS || data.len() < rows * DIMENSIONS {
        return scan(q, data, out);
    }
    let half = rows / 2;
    let (first, second) = data.split_at(half * DIMENSIONS);
    let (first_out, second_out) = out.split_at_mut(half);
    let second_scanned = std::thread::scope(|scope| {
        let helper = std::thread::Builder::new().spawn_scoped(scope, || scan(q, second, second_out));
        scan(q, first, first_out);
        helper.is_ok_and(|h| h.join().is_ok())
    });
    if !second_scanned {
        // No thread could be started: scan the second half here.
        let (_, second_out) = out.split_at_mut(half);
        scan(q, second, second_out);
    }
}

fn scan(q: &[i8; DIMENSIONS], data: &[i8], out: &mut [i32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked just above).
        return unsafe { scan_avx2(q, data, out) };
    }
    scan_generic(q, data, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_thread_scan_equals_the_one_thread_scan() {
        let rows = ROWS_FOR_TWO_THREADS + 1001;
        let mut state: u32 = 0x2545_F491;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state >> 24) as u8 as i8
        };
        let data: Vec<i8> = (0..rows * DIMENSIONS).map(|_| next()).collect();
        let mut q = [0i8; DIMENSIONS];
        q.iter_mut().for_each(|x| *x = next());
        let (mut one, mut two) = (vec![0i32; rows], vec![0i32; rows]);
        scan(&q, &data, &mut one);
        scan_on_two_threads(&q, &data, &mut two);
        assert_eq!(one, two);
        assert!(one.iter().any(|&d| d != 0));
    }
}
