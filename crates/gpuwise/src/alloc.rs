//! # Out of memory is an error, not an abort
//!
//! Rust aborts the process when an allocation fails ("memory allocation of N bytes failed",
//! then SIGABRT and perhaps a core dump). Under a memory limit (`ulimit -v`, `prlimit`, a
//! container's address-space limit) gpuwise should fail like on any other error: a message
//! saying what ran out and what to do, and exit code 2. The readers bound what they hold by
//! what the input says (lines, records, cells, devices), so this is the last line, for inputs
//! that are large and legitimate.
//!
//! The allocator forwards to the system's and only looks at a null result; the failure path
//! allocates nothing (the message is built on the stack). This is the one `unsafe` in the
//! workspace: `GlobalAlloc` cannot be implemented without it, and stable Rust has no hook for
//! allocation failure (`set_alloc_error_hook` is unstable).
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;

/// The system allocator, with an error instead of an abort when it fails.
pub(crate) struct ErrorOnExhaustion;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged and returns
// its result; the only addition runs when that result is null, and never returns.
unsafe impl GlobalAlloc for ErrorOnExhaustion {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            exhausted(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            exhausted(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            exhausted(new_size);
        }
        p
    }
}

/// Say that memory ran out, allocating nothing, and exit 2.
fn exhausted(size: usize) -> ! {
    let mut buf = [0u8; 512];
    let mut at = 0;
    let mut put = |bytes: &[u8]| {
        let n = bytes.len().min(buf.len() - at);
        buf[at..at + n].copy_from_slice(&bytes[..n]);
        at += n;
    };
    put(b"error: out of memory: an allocation of ");
    let mib = size >> 20;
    let (value, unit): (usize, &[u8]) = if mib > 0 {
        (mib, b" MiB")
    } else {
        (size, b" bytes")
    };
    let mut digits = [0u8; 20];
    let mut d = digits.len();
    let mut v = value;
    loop {
        d -= 1;
        digits[d] = b'0' + u8::try_from(v % 10).unwrap_or(0);
        v /= 10;
        if v == 0 {
            break;
        }
    }
    put(&digits[d..]);
    put(unit);
    put(
        b" failed (the process's memory limit is reached). Raise the limit, or read less at \
          a time (fewer inputs, --since/--until).\n",
    );
    let _ = std::io::stderr().write_all(&buf[..at]);
    std::process::exit(2)
}
