//! The running switch: datapath workers, the control socket and OpenFlow channel that
//! program their flows, flow timeouts, metrics, and the state file that keeps the flows.

pub mod config;
pub mod conntrack;
pub mod control;
pub mod control_server;
pub mod daemon;
pub mod journal;
pub mod metrics;
pub mod openflow;
pub mod pmd;
pub mod state;
pub mod switch;
pub mod tier;

pub use config::DaemonConfig;
pub use control::{call, ControlSocket, Op, Request, Response};
pub use daemon::Daemon;
pub use metrics::{format_stats, prometheus_text, prometheus_text_with, ExtraMetrics};
pub use pmd::{spawn_worker, spawn_worker_with_tier, WorkerConfig, WorkerPort, WorkerSnapshot};
pub use state::{StateError, StateFile};
pub use switch::{
    spawn_control_with, RuleChangeHook, StatsSync, StatsTicket, Switch, SwitchConfig,
};
