#![no_main]
//! Fuzz the smi reader: any bytes, no panic.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    gpuwise_sources::fuzzing::smi(data);
});
