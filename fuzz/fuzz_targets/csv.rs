#![no_main]
//! Fuzz the csv reader: any bytes, no panic.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    gpuwise_sources::fuzzing::csv(data);
});
