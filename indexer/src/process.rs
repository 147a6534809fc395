//! Process-wide settings for the binaries that run the indexer (the `fresco` binary and the
//! benchmark harness call these first thing in `main`; the library never does it by itself).

/// The threads that run beside the indexer's for as long as it does: sled 0.34 keeps 7 I/O
/// threads waiting (`DESIRED_WAITING_THREADS` in its thread pool) and a log flusher, and the
/// daemon's watcher has two (notify's inotify reader and fresco's debouncer).
pub const HELPER_THREADS: usize = 10;

/// Caps glibc's malloc arenas: one for each thread that indexes in parallel, one for the thread
/// that calls the indexer when it is not the main thread (the daemon's), and one for each of
/// the [`HELPER_THREADS`].
///
/// glibc gives threads up to 8 arenas per core, and memory a thread frees in one arena is not
/// reused by a thread allocating from another: on a cold index of django with 2 threads the
/// peak RSS was 292 MiB with the default and 264 MiB with 2 arenas, at the same speed
/// (bench/reports/index.md). Fewer arenas than allocating threads serialises allocation (one
/// arena for 2 threads took 2.7x as long): the indexer's parallel phases therefore run on the
/// calling thread plus `threads - 1` spawned ones, so that each has an arena of its own. (With
/// two spawned workers beside an idle calling thread, glibc sometimes gave both workers the same
/// arena: those runs took twice as long and peaked 42 MiB higher.)
///
/// A thread takes a new arena only while there are fewer than the cap; past it, glibc hands it
/// one already in use, in turn. The cap was once `threads + 1`, and sled's threads, started when
/// the store opens, took the spare arenas: the worker spawned for a parallel phase was then
/// given the calling thread's arena one time in three, and the phase ran 1-2.5 s longer in
/// futex waits inside malloc (`fresco index` of django with a store: 4 of 8 runs slow with
/// `threads + 1` arenas, 0 of 8 with room for the store's threads, whose peak RSS was also
/// lower, 306-311 MB against 318-331 MB, as the store's allocations no longer share the
/// indexer's arenas). A long-lived process that starts more threads than these can still see
/// it. Does nothing on other C libraries.
pub fn limit_malloc_arenas(threads: usize) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let arenas = libc::c_int::try_from(threads + 1 + HELPER_THREADS).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only changes allocator parameters; it is called before other threads
        // exist, and on failure it leaves them as they were (the return value says which).
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = threads;
}

/// Files a batch must change or remove before the daemon returns freed memory once the batch is
/// done ([`release_free_memory`]): after a save or two there is little to return, and a
/// returned page must be faulted in again.
pub const RELEASE_AFTER_FILES: usize = 128;

/// Returns freed heap memory to the system: glibc keeps what a thread frees in that thread's
/// arena, and gives back only what lies at the arena's top, so a large batch (a branch switch, a
/// directory renamed) leaves its peak behind. The daemon calls it once a batch of
/// [`RELEASE_AFTER_FILES`] or more is stored, again once the text lane has indexed it, and after
/// the text lane's first build (bench/reports/daemon-memory.md: django's `tests/` renamed back
/// and forth held 832 to 1,111 MB before, 640 to 722 MB with this and
/// `Indexer::forget_derived`; a started daemon 430 MB before, 351 MB after). It costs tens of
/// milliseconds (a C test: 54 to 220 ms for one to three million small blocks, half of them
/// freed), with each arena locked while it is walked: only after batches that took seconds.
pub fn release_free_memory() {
    crate::tree_memory::release();
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: glibc's malloc_trim only releases free pages; it is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Sets `RAYON_NUM_THREADS` to the number of cores when it is unset (a value the user set is
/// kept). rayon's global pool reads the same number by default, so only one thing changes: candle
/// no longer counts the cores by reading `/proc/cpuinfo`.
///
/// candle asks how many threads to give each matrix product, on every product, and without
/// `RAYON_NUM_THREADS` it counts the physical cores anew (`num_cpus::get_physical`, which parses
/// `/proc/cpuinfo`). A query embedding runs 48 products (strace: 48 opens of the file per
/// query). On the 2-core machine of bench/reports/retrieval.md those reads were about 2.5 ms of
/// a 9 to 12 ms embedding of a short query (perf: the kernel formatting `/proc/cpuinfo`, from
/// the embedder's threads).
///
/// # Safety
/// It writes the process environment, which no other thread may read or write meanwhile: call
/// it first thing in `main`, before any thread is started.
pub unsafe fn put_core_count_in_environment() {
    if std::env::var_os("RAYON_NUM_THREADS").is_some() {
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // SAFETY: the caller guarantees that no other thread exists yet.
    unsafe { std::env::set_var("RAYON_NUM_THREADS", cores.to_string()) };
}

/// What a caught panic says: its message when it was given one (a `&str` or a `String`).
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> Option<String> {
    panic.downcast_ref::<&str>().map(|m| m.to_string()).or_else(|| panic.downcast_ref::<String>().cloned())
}
