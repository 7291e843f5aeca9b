//! Properties of every policy on arbitrary traces: work is conserved, billing covers work, and
//! greedy and uniform progress meet every deadline that on demand alone could meet.

use gpuwise_sim::montecarlo::PolicyKind;
use gpuwise_sim::spot::{Greedy, Job, OnDemand, Policy, SpotOnly, UniformProgress, simulate};
use proptest::prelude::*;

fn policy(k: PolicyKind) -> Box<dyn Policy> {
    match k {
        PolicyKind::OnDemand => Box::new(OnDemand),
        PolicyKind::SpotOnly => Box::new(SpotOnly),
        PolicyKind::Greedy => Box::new(Greedy::default()),
        PolicyKind::UniformProgress | PolicyKind::MultiZone => Box::new(UniformProgress::default()),
        PolicyKind::Omniscient => unreachable!("not an online policy"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn policies_conserve_work_and_meet_feasible_deadlines(
        trace in proptest::collection::vec(0u32..3, 60..200),
        gap_min in prop::sample::select(vec![5.0_f64, 10.0, 30.0, 60.0]),
        work_ticks in 4usize..40,
        slack in 1.0_f64..2.5,
        changeover_min in prop::sample::select(vec![0.0_f64, 3.0, 12.0, 45.0]),
        checkpoint_min in prop::sample::select(vec![0.0_f64, 20.0, 90.0]),
        nodes in 1u32..3,
    ) {
        let gap = gap_min * 60.0;
        #[allow(clippy::cast_precision_loss)]
        let work = work_ticks as f64 * gap * 0.9;
        let deadline = (work + changeover_min * 60.0) * slack + 2.0 * gap;
        let job = Job {
            work_s: work,
            deadline_s: Some(deadline),
            changeover_s: changeover_min * 60.0,
            checkpoint_interval_s: checkpoint_min * 60.0,
            checkpoint_cost_s: if checkpoint_min > 0.0 { 60.0 } else { 0.0 },
            nodes,
        };
        for k in PolicyKind::ALL.into_iter().filter(|k| *k != PolicyKind::Omniscient) {
            let r = simulate(&job, &trace, 0, gap, policy(k).as_mut());
            if r.done {
                prop_assert!((r.spot_work_s + r.on_demand_work_s - work).abs() < 1e-6, "{k:?} {r:?}");
            }
            prop_assert!(r.spot_billed_s + 1e-6 >= r.spot_work_s * f64::from(nodes));
            prop_assert!(r.on_demand_billed_s + 1e-6 >= r.on_demand_work_s * f64::from(nodes));
            // On demand alone meets this deadline (the window has room for the work, one
            // changeover and every checkpoint), so greedy and uniform progress must.
            let on_demand = simulate(&job, &trace, 0, gap, &mut OnDemand);
            if on_demand.met(&job) && (deadline / gap) as usize <= trace.len()
                && matches!(k, PolicyKind::Greedy | PolicyKind::UniformProgress)
            {
                prop_assert!(r.met(&job), "{k:?} missed a feasible deadline: {r:?} (on demand: {on_demand:?})");
            }
        }
    }
}
