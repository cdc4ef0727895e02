//! The bench: drives the real datapath with generated traffic and reports Mpps and TSC
//! cycles per packet (median, min, max over repeated runs); [`suite`] runs the "Core
//! Cost" experiments (scaling, frame sizes, hit vs miss, miss-rate curve vs model).

pub mod attack;
pub mod classifier;
pub mod harness;
pub mod machine;
pub mod openflow;
pub mod replace;
pub mod report;
pub mod runner;
pub mod suite;
pub mod workload;

pub use attack::{run_attack, Attack, AttackConfig, AttackResult, Defence};
pub use harness::Harness;
pub use machine::Machine;
pub use runner::{
    measure_first_flood, measure_rule_change, pool, run_case, BenchConfig, Case, CaseResult,
    FirstFloodResult, RuleChangeResult,
};
