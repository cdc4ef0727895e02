//! The core-cost planner: the fewest server cores a network service needs at a given rate,
//! frame size, miss rate and traffic class, from a calibration profile of cycles per packet.

pub mod calibrate;
pub mod check;
pub mod input;
pub mod interval;
pub mod plan;
pub mod profile;
pub mod report;
pub mod stateful;
pub mod units;

pub use plan::{amdahl, plan, solve, Options, Outcome, Plan, Workload};
pub use profile::{load, Profile};
