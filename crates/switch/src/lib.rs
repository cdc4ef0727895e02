//! The running switch: the control socket that programs the datapath's flows in
//! `ovs-ofctl` syntax, flow timeouts, and the state file that keeps flows across restarts.

pub mod control;
pub mod daemon;
pub mod pmd;
pub mod state;
pub mod switch;
pub mod tier;

pub use control::{call, ControlSocket, Op, Request, Response};
pub use daemon::{format_stats, prometheus_text, Daemon, DaemonConfig};
pub use pmd::{spawn_worker, spawn_worker_with_tier, WorkerConfig, WorkerPort, WorkerSnapshot};
pub use state::{StateError, StateFile};
pub use switch::{
    spawn_control_with, RuleChangeHook, StatsSync, StatsTicket, Switch, SwitchConfig,
};
