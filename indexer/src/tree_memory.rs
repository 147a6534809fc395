//! tree-sitter's memory. tree-sitter allocates every node of a tree, and every entry of its parse
//! stack, one block at a time, and frees them all when the tree goes: for django, millions of
//! small, short-lived blocks. Served by mimalloc (per-thread pages of blocks of one size) instead
//! of glibc's malloc, a cold index of django took about a sixth less CPU time, at about the same
//! peak memory (286 against 282 MB; bench/reports/index.md). Only tree-sitter's C library uses mimalloc: fresco's own
//! allocations stay with the system allocator (mimalloc for everything was tried: no faster, and
//! 150 MB more at the peak).

use std::ffi::c_void;

/// Makes tree-sitter allocate with mimalloc. Called before the first parser is made
/// ([`crate::lower::new_parser`], where every parser fresco uses comes from); later calls do
/// nothing.
pub(crate) fn use_mimalloc() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        // Free pages go back to the system at once, not 10 ms later: a cold index of django then
        // peaks about as high as with glibc's malloc (286 against 282 MB; 294–305 MB with the
        // delay), at the same speed.
        // SAFETY: setting an option has no preconditions.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
        // SAFETY: the four functions are one allocator family (mimalloc's), never return null (as
        // tree-sitter's default allocator, they abort when memory runs out) and align as malloc
        // does. This runs once, before any parser exists, so before tree-sitter allocates anything:
        // every tree-sitter object fresco makes comes from a parser made after this call.
        unsafe {
            tree_sitter::set_allocator(Some(tree_sitter::Allocator {
                malloc: ts_malloc,
                calloc: ts_calloc,
                realloc: ts_realloc,
                free: libmimalloc_sys::mi_free,
            }));
        }
    });
}

/// `mi_option_purge_delay` in mimalloc.h (the same number in mimalloc 2 and 3; libmimalloc-sys
/// names only the options before and after it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Returns the free pages of dropped trees to the system (after a cold index, before the next
/// phase allocates as much again).
pub(crate) fn release() {
    // SAFETY: mi_collect frees only what holds no live block; it may be called from any thread.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

unsafe extern "C" fn ts_malloc(size: usize) -> *mut c_void {
    // SAFETY: mi_malloc has no preconditions.
    not_null(unsafe { libmimalloc_sys::mi_malloc(size) }, size)
}

unsafe extern "C" fn ts_calloc(count: usize, size: usize) -> *mut c_void {
    let Some(bytes) = count.checked_mul(size) else { std::process::abort() };
    // SAFETY: mi_zalloc has no preconditions.
    not_null(unsafe { libmimalloc_sys::mi_zalloc(bytes) }, bytes)
}

unsafe extern "C" fn ts_realloc(ptr: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: tree-sitter passes null or a block it got from these functions.
    not_null(unsafe { libmimalloc_sys::mi_realloc(ptr, size) }, size)
}

/// Out of memory: abort, as tree-sitter's own allocator does (tree-sitter cannot handle a null
/// block).
fn not_null(ptr: *mut c_void, size: usize) -> *mut c_void {
    if ptr.is_null() && size > 0 {
        std::process::abort();
    }
    ptr
}

#[cfg(test)]
mod tests {
    #[test]
    fn trees_parse_and_free_with_mimalloc_on_many_threads() {
        let text = "class A:\n    def f(self, x):\n        return [y for y in x if y]\n";
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..50 {
                        let tree = crate::lower::parse(text).expect("the grammar loads");
                        assert!(!tree.root_node().has_error());
                        assert_eq!(tree.root_node().child_count(), 1);
                    }
                });
            }
        });
        // A tree made on one thread and dropped on another (mimalloc frees across threads).
        let tree = crate::lower::parse(text).expect("the grammar loads");
        std::thread::spawn(move || drop(tree)).join().expect("the thread ends");
        super::release();
        // SAFETY: reading an option has no preconditions.
        assert_eq!(unsafe { libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY) }, 0);
    }
}
