//! The bench: the measurement harness and its cases on the real datapath with generated traffic
//! (Mpps, TSC cycles per packet), the [`suite`], the classifier bench, the attacks, rule-change timing.

pub mod attack;
pub mod classifier;
pub mod command;
pub mod ct;
pub mod harness;
pub mod machine;
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
