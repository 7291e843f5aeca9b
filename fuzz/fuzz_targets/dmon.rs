#![no_main]
//! Fuzz the dmon reader: any bytes, no panic.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    gpuwise_sources::fuzzing::dmon(data);
});
