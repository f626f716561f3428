//! Valgrind memcheck client requests: what the kernel wrote into user
//! memory, memcheck cannot see (it does not know `RDMA_VERBS_IOCTL`'s
//! attributes). rdma-core marks every output attribute defined after a
//! successful ioctl (libibverbs/cmd_ioctl.c `finalize_attr`:
//! `VALGRIND_MAKE_MEM_DEFINED`), so programs reading what a verb returned
//! stay clean under memcheck; rsverbs does the same. Outside valgrind a
//! request is a few register rotations that change nothing.

/// `VG_USERREQ__MAKE_MEM_DEFINED` (valgrind/memcheck.h:
/// `VG_USERREQ_TOOL_BASE('M','C') + 2`).
const MAKE_MEM_DEFINED: u64 = (b'M' as u64) << 24 | (b'C' as u64) << 16 | 2;

/// `VALGRIND_MAKE_MEM_DEFINED(addr, len)`.
#[inline]
pub fn mem_defined(addr: u64, len: u64) {
    let args: [u64; 6] = [MAKE_MEM_DEFINED, addr, len, 0, 0, 0];
    request(&args);
}

/// valgrind.h `VALGRIND_DO_CLIENT_REQUEST_EXPR` for amd64 Linux: rdi
/// rotated by 3+13+61+51 = 128 bits (unchanged) is the marker valgrind
/// recognises, then `xchg rbx, rbx` with rax pointing at the arguments.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn request(args: &[u64; 6]) {
    // SAFETY: no memory is written and no register changes outside
    // valgrind; under valgrind, memcheck only updates its shadow state.
    unsafe {
        core::arch::asm!(
            "rol rdi, 3", "rol rdi, 13", "rol rdi, 61", "rol rdi, 51",
            "xchg rbx, rbx",
            in("rax") args.as_ptr(),
            inout("rdx") 0u64 => _,
            inout("rdi") 0u64 => _,
            options(nostack, readonly),
        );
    }
}

/// Other architectures: no client request (memcheck reports only).
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn request(_args: &[u64; 6]) {}
