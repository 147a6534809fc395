//! Process-wide settings for the binaries that run the indexer (the `fresco` binary and the
//! benchmark harness call this first thing in `main`; the library never does it by itself).

/// Caps glibc's malloc arenas at the number of threads that index in parallel, plus one for the
/// threads beside them (the store's flusher, the watcher).
///
/// glibc gives threads up to 8 arenas per core, and memory a thread frees in one arena is not
/// reused by a thread allocating from another: on a cold index of django with 2 threads the
/// peak RSS was 292 MiB with the default and 264 MiB with 2 arenas, at the same speed
/// (bench/reports/index.md). Fewer arenas than allocating threads serialises allocation (one
/// arena for 2 threads took 2.7x as long): the indexer's parallel phases therefore run on the
/// calling thread plus `threads - 1` spawned ones, so that each has an arena of its own. (With
/// two spawned workers beside an idle calling thread, glibc sometimes gave both workers the same
/// arena: those runs took twice as long and peaked 42 MiB higher.) Does nothing on other C
/// libraries.
pub fn limit_malloc_arenas(threads: usize) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let arenas = libc::c_int::try_from(threads + 1).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only changes allocator parameters; it is called before other threads
        // exist, and on failure it leaves them as they were (the return value says which).
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = threads;
}
