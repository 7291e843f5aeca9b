#![no_main]
//! Fuzz the dcgm reader: any bytes, no panic.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    gpuwise_sources::fuzzing::dcgm(data);
});
