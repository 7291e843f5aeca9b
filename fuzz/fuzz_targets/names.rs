#![no_main]
//! Fuzz file-name handling (host stems, rotation suffixes, time stamps): any text, no panic.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    gpuwise_sources::fuzzing::file_names(data);
});
