//! No input makes a reader panic: random bytes, and valid lines with random damage, through
//! every reader. (Coverage-guided fuzzing with cargo-fuzz is the next step; these run on
//! stable in every CI run.)

use gpuwise_sources::fuzzing;
use proptest::prelude::*;

const SMI: &str = "timestamp, name, uuid, index, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W]\n\
2026/01/05 10:00:00.000, NVIDIA A10G, GPU-1, 0, 50 %, 1000 MiB, 23028 MiB, 100.00 W\n\
2026/01/05 10:00:30.000, NVIDIA A10G, GPU-1, 0, [N/A], 1000 MiB, 23028 MiB, 100.00 W\n";
const DMON: &str = "#Date       Time        gpu    pwr     sm    mem     fb\n#YYYYMMDD   HH:MM:SS    Idx      W      %      %     MB\n 20260105   10:00:00      0    100     50     10   1000\n 20260105   10:00:01      0      -     50      -   1000\n";
const DCGM: &str = "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\nDCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-1\",Hostname=\"h\",GPU_I_ID=\"3\"} 50 1767607200000\nDCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"0\",UUID=\"GPU-1\",Hostname=\"h\",pod=\"p\"} 0.5 1767607200000\nDCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-1\",Hostname=\"h\"} 1000 1767607260000\n";
const CSV: &str = "ts,gpu,util,mem\n2026-01-05T10:00:00Z,g0,50,1000\n1767607260,g0,\"60\",1000\n";

fn run_all(data: &[u8]) {
    fuzzing::smi(data);
    fuzzing::dmon(data);
    fuzzing::dcgm(data);
    fuzzing::csv(data);
}

fn damaged(base: &'static str) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 0..12).prop_map(
        move |edits| {
            let mut v = base.as_bytes().to_vec();
            for (at, byte, kind) in edits {
                if v.is_empty() {
                    v.push(byte);
                    continue;
                }
                let i = at.index(v.len());
                match kind {
                    0 => v[i] = byte,
                    1 => v.insert(i, byte),
                    _ => {
                        v.remove(i);
                    }
                }
            }
            v
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn random_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..600)) {
        run_all(&data);
    }

    #[test]
    fn any_file_name_is_handled(name in any::<String>(), bytes in prop::collection::vec(any::<u8>(), 0..80)) {
        fuzzing::file_names(name.as_bytes());
        fuzzing::file_names(&bytes);
    }

    #[test]
    fn damaged_lines_never_panic(data in prop_oneof![damaged(SMI), damaged(DMON), damaged(DCGM), damaged(CSV)]) {
        run_all(&data);
    }
}
