//! The running switch: the control socket that programs the datapath's flows in
//! `ovs-ofctl` syntax, flow timeouts, and the state file that keeps flows across restarts.

pub mod control;
pub mod state;
pub mod switch;

pub use control::{call, ControlSocket, Op, Request, Response};
pub use state::{StateError, StateFile};
pub use switch::{
    spawn_generated_worker, time_replace, ReplaceTiming, StatsSync, StatsTicket, Switch,
    SwitchConfig,
};
