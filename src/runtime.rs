//! What `std` would bring to librsverbs.so.1, which is built without it
//! (`--no-default-features`, docs/building.md): the panic handler and the
//! allocator. Compiled only then: `cargo test` and the crate as a Rust
//! dependency (feature `std`) have std's.
//!
//! std's panic handler runs its default hook, whose backtrace printer
//! (gimli, addr2line, miniz_oxide, the unwinder) stays linked even with
//! `panic = "abort"`: over half of the file. Here a panic writes one line
//! to stderr and aborts: no unwinding, nothing crosses the C boundary.
//! The library is not meant to panic at all (src/lib.rs denies unwrap,
//! expect and panic outside tests); this is the last resort.

use crate::os;
use crate::trace::format::Line;
use core::alloc::{GlobalAlloc, Layout};
use core::fmt::Write;
use core::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// Set by the first panic: a panic while formatting its line aborts at once.
static PANICKED: AtomicBool = AtomicBool::new(false);

/// `rsverbs[PID]: panicked at FILE:LINE:COL: MESSAGE`, one line in one
/// `write()` to stderr (no allocation), then `abort(3)`, as std's
/// `panic = "abort"` does after its hook (SIGABRT, a core dump where
/// enabled).
#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    if !PANICKED.swap(true, Relaxed) {
        let mut l = Line::new();
        l.start(os::pid());
        let _ = match info.location() {
            Some(at) => write!(l, "panicked at {at}: {}", info.message()),
            None => write!(l, "panicked: {}", info.message()),
        };
        let line = l.finish();
        crate::sys::write_all(libc::STDERR_FILENO, line);
    }
    // SAFETY: abort(3) may be called from anywhere; it does not return.
    unsafe { libc::abort() }
}

/// The C library's allocator, as std's `System` allocator uses it on Unix
/// (library/std/src/sys/alloc/unix.rs): `malloc`, `calloc` and `realloc`
/// when their alignment is enough, `posix_memalign` when it is not.
struct Malloc;

#[global_allocator]
static ALLOCATOR: Malloc = Malloc;

/// glibc malloc's alignment, `MALLOC_ALIGNMENT`
/// (sysdeps/generic/malloc-alignment.h: `2 * SIZE_SZ`, or long double's
/// alignment where larger): 16 on every 64-bit target rsverbs builds for,
/// std's `MIN_ALIGN` for them too.
const MIN_ALIGN: usize = 2 * size_of::<usize>();

/// Whether plain malloc's alignment serves `align` for `size` bytes (std:
/// `align <= MIN_ALIGN && align <= size`).
fn malloc_aligns(align: usize, size: usize) -> bool {
    align <= MIN_ALIGN && align <= size
}

/// `posix_memalign`, whose alignment must be a power of two multiple of
/// `sizeof(void *)`; NULL when it fails.
fn aligned(layout: Layout) -> *mut u8 {
    let mut out = core::ptr::null_mut();
    let align = layout.align().max(size_of::<usize>());
    // SAFETY: out is a valid out-pointer; align is a power of two (Layout)
    // and a multiple of sizeof(void *).
    match unsafe { libc::posix_memalign(&mut out, align, layout.size()) } {
        0 => out.cast(),
        _ => core::ptr::null_mut(),
    }
}

// SAFETY: every block comes from malloc, calloc, realloc or posix_memalign
// with at least the layout's size and alignment, and goes back to free;
// the C library's allocator is thread-safe.
unsafe impl GlobalAlloc for Malloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if malloc_aligns(layout.align(), layout.size()) {
            // SAFETY: a plain malloc of the layout's (non-zero) size.
            unsafe { libc::malloc(layout.size()) }.cast()
        } else {
            aligned(layout)
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if malloc_aligns(layout.align(), layout.size()) {
            // SAFETY: a plain calloc of the layout's (non-zero) size.
            unsafe { libc::calloc(layout.size(), 1) }.cast()
        } else {
            let p = aligned(layout);
            if !p.is_null() {
                // SAFETY: p is writable for the layout's size.
                unsafe { core::ptr::write_bytes(p, 0, layout.size()) };
            }
            p
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: ptr came from this allocator (GlobalAlloc's contract).
        unsafe { libc::free(ptr.cast()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if malloc_aligns(layout.align(), new_size) {
            // SAFETY: ptr came from this allocator; realloc keeps malloc's
            // alignment, which serves the layout's.
            return unsafe { libc::realloc(ptr.cast(), new_size) }.cast();
        }
        // An alignment realloc cannot keep: a new block, the bytes, free.
        // SAFETY: GlobalAlloc's contract: new_size rounded up to the
        // alignment does not overflow.
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: new has a non-zero size (GlobalAlloc's contract).
        let p = unsafe { self.alloc(new) };
        if !p.is_null() {
            // SAFETY: both blocks hold at least the smaller size, and are
            // distinct; ptr is freed once, here.
            unsafe {
                core::ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        p
    }
}

/// `_URC_CONTINUE_UNWIND` (unwind.h; the same value on every target
/// rsverbs builds for).
const URC_CONTINUE_UNWIND: core::ffi::c_int = 8;

/// The personality routine that the landing pads of core's and alloc's
/// precompiled code name: the toolchain ships them built with
/// `panic = "unwind"`, and with `lto` they are inlined into rsverbs' own
/// functions, the exports included, whose unwind tables then name this
/// routine (std's is library/std/src/sys/personality/gcc.rs; std is not
/// linked here).
///
/// A panic never unwinds (it aborts, above), but an unwind that starts
/// outside rsverbs may pass through its frames: glibc's forced unwind of a
/// thread that `pthread_exit()`s from a signal handler that interrupted a
/// verb (nptl/unwind.c `__pthread_unwind`, libgcc's
/// `_Unwind_ForcedUnwind`), or a C++ exception thrown from such a handler.
/// libibverbs' frames have no personality and let both pass; so do these:
/// "no handler and no cleanup here" in both phases, for every exception
/// class. A cleanup of core's that is skipped could only free memory of
/// the call in flight; rsverbs' own frames (`panic = "abort"`) have none,
/// and hold no lock across a point where the thread can end
/// (docs/security.md). Local to the file (src/rsverbs.map: `local: *`).
#[unsafe(no_mangle)]
extern "C" fn rust_eh_personality(
    _version: core::ffi::c_int,
    _actions: core::ffi::c_int,
    _class: u64,
    _exception: *mut core::ffi::c_void,
    _context: *mut core::ffi::c_void,
) -> core::ffi::c_int {
    URC_CONTINUE_UNWIND
}

/// The resume call at the end of a landing pad. The personality above
/// never enters one, so nothing calls this; it stays a stub that aborts,
/// and the unwinder (zig's libunwind, libgcc_s) is not linked at all.
#[unsafe(no_mangle)]
extern "C" fn _Unwind_Resume() -> ! {
    // SAFETY: abort(3) may be called from anywhere; it does not return.
    unsafe { libc::abort() }
}
