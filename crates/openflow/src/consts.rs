//! OpenFlow 1.3 numbers: message types, reserved ports, flags, error types and codes, as
//! named constants (the names are the specification's, from `openflow.h` of OF 1.3.5).

/// Wire version of OpenFlow 1.3.
pub const OFP_VERSION: u8 = 0x04;
/// Size of `ofp_header`.
pub const OFP_HEADER_LEN: usize = 8;
/// Largest message (`ofp_header.length` is 16 bits).
pub const OFP_MAX_MSG_LEN: usize = 65535;

/// `ofp_type`.
pub mod msg {
    pub const HELLO: u8 = 0;
    pub const ERROR: u8 = 1;
    pub const ECHO_REQUEST: u8 = 2;
    pub const ECHO_REPLY: u8 = 3;
    pub const EXPERIMENTER: u8 = 4;
    pub const FEATURES_REQUEST: u8 = 5;
    pub const FEATURES_REPLY: u8 = 6;
    pub const GET_CONFIG_REQUEST: u8 = 7;
    pub const GET_CONFIG_REPLY: u8 = 8;
    pub const SET_CONFIG: u8 = 9;
    pub const PACKET_IN: u8 = 10;
    pub const FLOW_REMOVED: u8 = 11;
    pub const PORT_STATUS: u8 = 12;
    pub const PACKET_OUT: u8 = 13;
    pub const FLOW_MOD: u8 = 14;
    pub const GROUP_MOD: u8 = 15;
    pub const PORT_MOD: u8 = 16;
    pub const TABLE_MOD: u8 = 17;
    pub const MULTIPART_REQUEST: u8 = 18;
    pub const MULTIPART_REPLY: u8 = 19;
    pub const BARRIER_REQUEST: u8 = 20;
    pub const BARRIER_REPLY: u8 = 21;
    pub const QUEUE_GET_CONFIG_REQUEST: u8 = 22;
    pub const QUEUE_GET_CONFIG_REPLY: u8 = 23;
    pub const ROLE_REQUEST: u8 = 24;
    pub const ROLE_REPLY: u8 = 25;
    pub const GET_ASYNC_REQUEST: u8 = 26;
    pub const GET_ASYNC_REPLY: u8 = 27;
    pub const SET_ASYNC: u8 = 28;
    pub const METER_MOD: u8 = 29;
}

/// Reserved port numbers (`ofp_port_no`).
pub const OFPP_MAX: u32 = 0xffff_ff00;
pub const OFPP_IN_PORT: u32 = 0xffff_fff8;
pub const OFPP_TABLE: u32 = 0xffff_fff9;
pub const OFPP_NORMAL: u32 = 0xffff_fffa;
pub const OFPP_FLOOD: u32 = 0xffff_fffb;
pub const OFPP_ALL: u32 = 0xffff_fffc;
pub const OFPP_CONTROLLER: u32 = 0xffff_fffd;
pub const OFPP_LOCAL: u32 = 0xffff_fffe;
pub const OFPP_ANY: u32 = 0xffff_ffff;

/// `ofp_controller_max_len`: largest max_len that asks for a buffer of that size.
pub const OFPCML_MAX: u16 = 0xffe5;
/// `ofp_controller_max_len`: send the whole packet, do not buffer it.
pub const OFPCML_NO_BUFFER: u16 = 0xffff;
/// `buffer_id` meaning "no buffer" (packet_in, packet_out, flow_mod).
pub const OFP_NO_BUFFER: u32 = 0xffff_ffff;

/// Tables: last usable table number, and "all tables".
pub const OFPTT_MAX: u8 = 0xfe;
pub const OFPTT_ALL: u8 = 0xff;

/// Groups: last usable group, "all groups" (delete), "any group" (flow stats filter).
pub const OFPG_MAX: u32 = 0xffff_ff00;
pub const OFPG_ALL: u32 = 0xffff_fffc;
pub const OFPG_ANY: u32 = 0xffff_ffff;

/// Group types.
pub const OFPGT_ALL: u8 = 0;
pub const OFPGT_SELECT: u8 = 1;
pub const OFPGT_INDIRECT: u8 = 2;
pub const OFPGT_FF: u8 = 3;
/// Group mod commands.
pub const OFPGC_ADD: u16 = 0;
pub const OFPGC_MODIFY: u16 = 1;
pub const OFPGC_DELETE: u16 = 2;

/// Flow mod commands (`ofp_flow_mod_command`).
pub const OFPFC_ADD: u8 = 0;
pub const OFPFC_MODIFY: u8 = 1;
pub const OFPFC_MODIFY_STRICT: u8 = 2;
pub const OFPFC_DELETE: u8 = 3;
pub const OFPFC_DELETE_STRICT: u8 = 4;

/// Flow mod flags (`ofp_flow_mod_flags`).
pub const OFPFF_SEND_FLOW_REM: u16 = 1 << 0;
pub const OFPFF_CHECK_OVERLAP: u16 = 1 << 1;
pub const OFPFF_RESET_COUNTS: u16 = 1 << 2;
pub const OFPFF_NO_PKT_COUNTS: u16 = 1 << 3;
pub const OFPFF_NO_BYT_COUNTS: u16 = 1 << 4;

/// Default flow priority.
pub const OFP_DEFAULT_PRIORITY: u16 = 0x8000;

/// Switch capabilities (`ofp_capabilities`).
pub const OFPC_FLOW_STATS: u32 = 1 << 0;
pub const OFPC_TABLE_STATS: u32 = 1 << 1;
pub const OFPC_PORT_STATS: u32 = 1 << 2;
pub const OFPC_GROUP_STATS: u32 = 1 << 3;
pub const OFPC_IP_REASM: u32 = 1 << 5;
pub const OFPC_QUEUE_STATS: u32 = 1 << 6;
pub const OFPC_PORT_BLOCKED: u32 = 1 << 8;

/// Switch config flags (`ofp_config_flags`).
pub const OFPC_FRAG_NORMAL: u16 = 0;
pub const OFPC_FRAG_DROP: u16 = 1;
pub const OFPC_FRAG_REASM: u16 = 2;
pub const OFPC_FRAG_MASK: u16 = 3;

/// Port config bits (`ofp_port_config`).
pub const OFPPC_PORT_DOWN: u32 = 1 << 0;
pub const OFPPC_NO_RECV: u32 = 1 << 2;
pub const OFPPC_NO_FWD: u32 = 1 << 5;
pub const OFPPC_NO_PACKET_IN: u32 = 1 << 6;
/// Port state bits (`ofp_port_state`).
pub const OFPPS_LINK_DOWN: u32 = 1 << 0;
pub const OFPPS_BLOCKED: u32 = 1 << 1;
pub const OFPPS_LIVE: u32 = 1 << 2;
/// Port feature bits (`ofp_port_features`), the common ones.
pub const OFPPF_10MB_FD: u32 = 1 << 1;
pub const OFPPF_100MB_FD: u32 = 1 << 3;
pub const OFPPF_1GB_FD: u32 = 1 << 5;
pub const OFPPF_10GB_FD: u32 = 1 << 6;
pub const OFPPF_40GB_FD: u32 = 1 << 7;
pub const OFPPF_100GB_FD: u32 = 1 << 8;
pub const OFPPF_OTHER: u32 = 1 << 10;
pub const OFPPF_COPPER: u32 = 1 << 11;
pub const OFPPF_FIBER: u32 = 1 << 12;
/// Port name length (with its NUL).
pub const OFP_MAX_PORT_NAME_LEN: usize = 16;

/// Port status reasons.
pub const OFPPR_ADD: u8 = 0;
pub const OFPPR_DELETE: u8 = 1;
pub const OFPPR_MODIFY: u8 = 2;

/// Packet-in reasons.
pub const OFPR_NO_MATCH: u8 = 0;
pub const OFPR_ACTION: u8 = 1;
pub const OFPR_INVALID_TTL: u8 = 2;

/// Flow removed reasons.
pub const OFPRR_IDLE_TIMEOUT: u8 = 0;
pub const OFPRR_HARD_TIMEOUT: u8 = 1;
pub const OFPRR_DELETE: u8 = 2;
pub const OFPRR_GROUP_DELETE: u8 = 3;

/// Controller roles.
pub const OFPCR_ROLE_NOCHANGE: u32 = 0;
pub const OFPCR_ROLE_EQUAL: u32 = 1;
pub const OFPCR_ROLE_MASTER: u32 = 2;
pub const OFPCR_ROLE_SLAVE: u32 = 3;

/// Hello element types.
pub const OFPHET_VERSIONBITMAP: u16 = 1;

/// Multipart types (`ofp_multipart_type`).
pub mod mp {
    pub const DESC: u16 = 0;
    pub const FLOW: u16 = 1;
    pub const AGGREGATE: u16 = 2;
    pub const TABLE: u16 = 3;
    pub const PORT_STATS: u16 = 4;
    pub const QUEUE: u16 = 5;
    pub const GROUP: u16 = 6;
    pub const GROUP_DESC: u16 = 7;
    pub const GROUP_FEATURES: u16 = 8;
    pub const METER: u16 = 9;
    pub const METER_CONFIG: u16 = 10;
    pub const METER_FEATURES: u16 = 11;
    pub const TABLE_FEATURES: u16 = 12;
    pub const PORT_DESC: u16 = 13;
    pub const EXPERIMENTER: u16 = 0xffff;
}
/// Multipart request flag: more requests follow.
pub const OFPMPF_REQ_MORE: u16 = 1;
/// Multipart reply flag: more replies follow.
pub const OFPMPF_REPLY_MORE: u16 = 1;

/// Table feature property types (`ofp_table_feature_prop_type`).
pub mod tfpt {
    pub const INSTRUCTIONS: u16 = 0;
    pub const INSTRUCTIONS_MISS: u16 = 1;
    pub const NEXT_TABLES: u16 = 2;
    pub const NEXT_TABLES_MISS: u16 = 3;
    pub const WRITE_ACTIONS: u16 = 4;
    pub const WRITE_ACTIONS_MISS: u16 = 5;
    pub const APPLY_ACTIONS: u16 = 6;
    pub const APPLY_ACTIONS_MISS: u16 = 7;
    pub const MATCH: u16 = 8;
    pub const WILDCARDS: u16 = 10;
    pub const WRITE_SETFIELD: u16 = 12;
    pub const WRITE_SETFIELD_MISS: u16 = 13;
    pub const APPLY_SETFIELD: u16 = 14;
    pub const APPLY_SETFIELD_MISS: u16 = 15;
    pub const EXPERIMENTER: u16 = 0xfffe;
    pub const EXPERIMENTER_MISS: u16 = 0xffff;
}

/// Match types.
pub const OFPMT_STANDARD: u16 = 0;
pub const OFPMT_OXM: u16 = 1;

/// OXM classes.
pub const OFPXMC_NXM_0: u16 = 0x0000;
pub const OFPXMC_NXM_1: u16 = 0x0001;
pub const OFPXMC_OPENFLOW_BASIC: u16 = 0x8000;
pub const OFPXMC_EXPERIMENTER: u16 = 0xffff;

/// VLAN id: the "a tag is present" bit, and "no tag".
pub const OFPVID_PRESENT: u16 = 0x1000;
pub const OFPVID_NONE: u16 = 0x0000;

/// Instruction types (`ofp_instruction_type`).
pub mod inst {
    pub const GOTO_TABLE: u16 = 1;
    pub const WRITE_METADATA: u16 = 2;
    pub const WRITE_ACTIONS: u16 = 3;
    pub const APPLY_ACTIONS: u16 = 4;
    pub const CLEAR_ACTIONS: u16 = 5;
    pub const METER: u16 = 6;
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// Action types (`ofp_action_type`).
pub mod act {
    pub const OUTPUT: u16 = 0;
    pub const COPY_TTL_OUT: u16 = 11;
    pub const COPY_TTL_IN: u16 = 12;
    pub const SET_MPLS_TTL: u16 = 15;
    pub const DEC_MPLS_TTL: u16 = 16;
    pub const PUSH_VLAN: u16 = 17;
    pub const POP_VLAN: u16 = 18;
    pub const PUSH_MPLS: u16 = 19;
    pub const POP_MPLS: u16 = 20;
    pub const SET_QUEUE: u16 = 21;
    pub const GROUP: u16 = 22;
    pub const SET_NW_TTL: u16 = 23;
    pub const DEC_NW_TTL: u16 = 24;
    pub const SET_FIELD: u16 = 25;
    pub const PUSH_PBB: u16 = 26;
    pub const POP_PBB: u16 = 27;
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// Meter ids and commands.
pub const OFPM_MAX: u32 = 0xffff_0000;
pub const OFPMC_ADD: u16 = 0;
pub const OFPMC_MODIFY: u16 = 1;
pub const OFPMC_DELETE: u16 = 2;

/// Error types (`ofp_error_type`).
pub mod et {
    pub const HELLO_FAILED: u16 = 0;
    pub const BAD_REQUEST: u16 = 1;
    pub const BAD_ACTION: u16 = 2;
    pub const BAD_INSTRUCTION: u16 = 3;
    pub const BAD_MATCH: u16 = 4;
    pub const FLOW_MOD_FAILED: u16 = 5;
    pub const GROUP_MOD_FAILED: u16 = 6;
    pub const PORT_MOD_FAILED: u16 = 7;
    pub const TABLE_MOD_FAILED: u16 = 8;
    pub const QUEUE_OP_FAILED: u16 = 9;
    pub const SWITCH_CONFIG_FAILED: u16 = 10;
    pub const ROLE_REQUEST_FAILED: u16 = 11;
    pub const METER_MOD_FAILED: u16 = 12;
    pub const TABLE_FEATURES_FAILED: u16 = 13;
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// `OFPET_HELLO_FAILED` codes.
pub mod hfc {
    pub const INCOMPATIBLE: u16 = 0;
    pub const EPERM: u16 = 1;
}

/// `OFPET_BAD_REQUEST` codes.
pub mod brc {
    pub const BAD_VERSION: u16 = 0;
    pub const BAD_TYPE: u16 = 1;
    pub const BAD_MULTIPART: u16 = 2;
    pub const BAD_EXPERIMENTER: u16 = 3;
    pub const BAD_EXP_TYPE: u16 = 4;
    pub const EPERM: u16 = 5;
    pub const BAD_LEN: u16 = 6;
    pub const BUFFER_EMPTY: u16 = 7;
    pub const BUFFER_UNKNOWN: u16 = 8;
    pub const BAD_TABLE_ID: u16 = 9;
    pub const IS_SLAVE: u16 = 10;
    pub const BAD_PORT: u16 = 11;
    pub const BAD_PACKET: u16 = 12;
    pub const MULTIPART_BUFFER_OVERFLOW: u16 = 13;
}

/// `OFPET_BAD_ACTION` codes.
pub mod bac {
    pub const BAD_TYPE: u16 = 0;
    pub const BAD_LEN: u16 = 1;
    pub const BAD_EXPERIMENTER: u16 = 2;
    pub const BAD_EXP_TYPE: u16 = 3;
    pub const BAD_OUT_PORT: u16 = 4;
    pub const BAD_ARGUMENT: u16 = 5;
    pub const EPERM: u16 = 6;
    pub const TOO_MANY: u16 = 7;
    pub const BAD_QUEUE: u16 = 8;
    pub const BAD_OUT_GROUP: u16 = 9;
    pub const MATCH_INCONSISTENT: u16 = 10;
    pub const UNSUPPORTED_ORDER: u16 = 11;
    pub const BAD_TAG: u16 = 12;
    pub const BAD_SET_TYPE: u16 = 13;
    pub const BAD_SET_LEN: u16 = 14;
    pub const BAD_SET_ARGUMENT: u16 = 15;
}

/// `OFPET_BAD_INSTRUCTION` codes.
pub mod bic {
    pub const UNKNOWN_INST: u16 = 0;
    pub const UNSUP_INST: u16 = 1;
    pub const BAD_TABLE_ID: u16 = 2;
    pub const UNSUP_METADATA: u16 = 3;
    pub const UNSUP_METADATA_MASK: u16 = 4;
    pub const BAD_EXPERIMENTER: u16 = 5;
    pub const BAD_EXP_TYPE: u16 = 6;
    pub const BAD_LEN: u16 = 7;
    pub const EPERM: u16 = 8;
}

/// `OFPET_BAD_MATCH` codes.
pub mod bmc {
    pub const BAD_TYPE: u16 = 0;
    pub const BAD_LEN: u16 = 1;
    pub const BAD_TAG: u16 = 2;
    pub const BAD_DL_ADDR_MASK: u16 = 3;
    pub const BAD_NW_ADDR_MASK: u16 = 4;
    pub const BAD_WILDCARDS: u16 = 5;
    pub const BAD_FIELD: u16 = 6;
    pub const BAD_VALUE: u16 = 7;
    pub const BAD_MASK: u16 = 8;
    pub const BAD_PREREQ: u16 = 9;
    pub const DUP_FIELD: u16 = 10;
    pub const EPERM: u16 = 11;
}

/// `OFPET_FLOW_MOD_FAILED` codes.
pub mod fmfc {
    pub const UNKNOWN: u16 = 0;
    pub const TABLE_FULL: u16 = 1;
    pub const BAD_TABLE_ID: u16 = 2;
    pub const OVERLAP: u16 = 3;
    pub const EPERM: u16 = 4;
    pub const BAD_TIMEOUT: u16 = 5;
    pub const BAD_COMMAND: u16 = 6;
    pub const BAD_FLAGS: u16 = 7;
}

/// `OFPET_GROUP_MOD_FAILED` codes.
pub mod gmfc {
    pub const GROUP_EXISTS: u16 = 0;
    pub const INVALID_GROUP: u16 = 1;
    pub const WEIGHT_UNSUPPORTED: u16 = 2;
    pub const OUT_OF_GROUPS: u16 = 3;
    pub const OUT_OF_BUCKETS: u16 = 4;
    pub const CHAINING_UNSUPPORTED: u16 = 5;
    pub const WATCH_UNSUPPORTED: u16 = 6;
    pub const LOOP: u16 = 7;
    pub const UNKNOWN_GROUP: u16 = 8;
    pub const CHAINED_GROUP: u16 = 9;
    pub const BAD_TYPE: u16 = 10;
    pub const BAD_COMMAND: u16 = 11;
    pub const BAD_BUCKET: u16 = 12;
    pub const BAD_WATCH: u16 = 13;
    pub const EPERM: u16 = 14;
}

/// `OFPET_PORT_MOD_FAILED` codes.
pub mod pmfc {
    pub const BAD_PORT: u16 = 0;
    pub const BAD_HW_ADDR: u16 = 1;
    pub const BAD_CONFIG: u16 = 2;
    pub const BAD_ADVERTISE: u16 = 3;
    pub const EPERM: u16 = 4;
}

/// `OFPET_TABLE_MOD_FAILED` codes.
pub mod tmfc {
    pub const BAD_TABLE: u16 = 0;
    pub const BAD_CONFIG: u16 = 1;
    pub const EPERM: u16 = 2;
}

/// `OFPET_SWITCH_CONFIG_FAILED` codes.
pub mod scfc {
    pub const BAD_FLAGS: u16 = 0;
    pub const BAD_LEN: u16 = 1;
    pub const EPERM: u16 = 2;
}

/// `OFPET_ROLE_REQUEST_FAILED` codes.
pub mod rrfc {
    pub const STALE: u16 = 0;
    pub const UNSUP: u16 = 1;
    pub const BAD_ROLE: u16 = 2;
}

/// `OFPET_METER_MOD_FAILED` codes.
pub mod mmfc {
    pub const UNKNOWN: u16 = 0;
    pub const METER_EXISTS: u16 = 1;
    pub const INVALID_METER: u16 = 2;
    pub const UNKNOWN_METER: u16 = 3;
    pub const BAD_COMMAND: u16 = 4;
    pub const BAD_FLAGS: u16 = 5;
    pub const BAD_RATE: u16 = 6;
    pub const BAD_BURST: u16 = 7;
    pub const BAD_BAND: u16 = 8;
    pub const BAD_BAND_VALUE: u16 = 9;
    pub const OUT_OF_METERS: u16 = 10;
    pub const OUT_OF_BANDS: u16 = 11;
}

/// `OFPET_TABLE_FEATURES_FAILED` codes.
pub mod tffc {
    pub const BAD_TABLE: u16 = 0;
    pub const BAD_METADATA: u16 = 1;
    pub const BAD_TYPE: u16 = 2;
    pub const BAD_LEN: u16 = 3;
    pub const BAD_ARGUMENT: u16 = 4;
    pub const EPERM: u16 = 5;
}

/// Length of the `data` an error message carries of the request it answers (the spec asks
/// for at least 64 bytes of it).
pub const OFP_ERROR_DATA_LEN: usize = 64;
