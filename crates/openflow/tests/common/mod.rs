//! Random OpenFlow values for the property tests.
#![allow(dead_code)]

use flowpath_openflow::consts::*;
use flowpath_openflow::*;
use proptest::collection::vec;
use proptest::prelude::*;

pub fn arb_string(max: usize) -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!("[a-zA-Z0-9 _.-]{{0,{max}}}")).unwrap()
}

pub fn arb_oxm() -> impl Strategy<Value = Oxm> {
    let basic =
        (0usize..40, any::<u128>(), any::<u128>(), any::<bool>()).prop_map(|(i, v, m, masked)| {
            let f = OxmField::ALL[i];
            if masked {
                Oxm::masked(f, v, m)
            } else {
                Oxm::exact(f, v)
            }
        });
    let unknown = (
        prop_oneof![
            Just(0x0000u16),
            Just(0x0001),
            Just(0x8000),
            Just(0xffff),
            Just(0x1234)
        ],
        0u8..128,
        any::<bool>(),
        vec(any::<u8>(), 4..40),
    )
        .prop_map(|(class, field, has_mask, mut payload)| {
            let field = if class == OFPXMC_OPENFLOW_BASIC {
                40 + field % 88
            } else {
                field
            };
            if has_mask && payload.len() % 2 == 1 {
                payload.pop();
            }
            Oxm::Unknown {
                class,
                field,
                has_mask,
                payload,
            }
        });
    prop_oneof![4 => basic, 1 => unknown]
}

pub fn arb_setfield_oxm() -> impl Strategy<Value = Oxm> {
    arb_oxm().prop_map(|o| match o {
        Oxm::Basic { field, value, .. } => Oxm::exact(field, value),
        Oxm::Unknown {
            class,
            field,
            payload,
            ..
        } => Oxm::Unknown {
            class,
            field,
            has_mask: false,
            payload,
        },
    })
}

pub fn arb_action() -> impl Strategy<Value = OfAction> {
    prop_oneof![
        (any::<u32>(), any::<u16>()).prop_map(|(port, max_len)| OfAction::Output { port, max_len }),
        Just(OfAction::CopyTtlOut),
        Just(OfAction::CopyTtlIn),
        any::<u8>().prop_map(OfAction::SetMplsTtl),
        Just(OfAction::DecMplsTtl),
        any::<u16>().prop_map(OfAction::PushVlan),
        Just(OfAction::PopVlan),
        any::<u16>().prop_map(OfAction::PushMpls),
        any::<u16>().prop_map(OfAction::PopMpls),
        any::<u32>().prop_map(OfAction::SetQueue),
        any::<u32>().prop_map(OfAction::Group),
        any::<u8>().prop_map(OfAction::SetNwTtl),
        Just(OfAction::DecNwTtl),
        arb_setfield_oxm().prop_map(OfAction::SetField),
        any::<u16>().prop_map(OfAction::PushPbb),
        Just(OfAction::PopPbb),
        arb_experimenter()
            .prop_map(|(experimenter, data)| OfAction::Experimenter { experimenter, data }),
    ]
}

/// An experimenter id and its data: whole 8-byte words, as an action or instruction
/// carries them.
fn arb_experimenter() -> impl Strategy<Value = (u32, Vec<u8>)> {
    (any::<u32>(), vec(any::<[u8; 8]>(), 0..3)).prop_map(|(id, d)| (id, d.concat()))
}

pub fn arb_actions() -> impl Strategy<Value = Vec<OfAction>> {
    vec(arb_action(), 0..6)
}

pub fn arb_instruction() -> impl Strategy<Value = Instruction> {
    prop_oneof![
        any::<u8>().prop_map(Instruction::GotoTable),
        (any::<u64>(), any::<u64>())
            .prop_map(|(metadata, mask)| Instruction::WriteMetadata { metadata, mask }),
        arb_actions().prop_map(Instruction::WriteActions),
        arb_actions().prop_map(Instruction::ApplyActions),
        Just(Instruction::ClearActions),
        any::<u32>().prop_map(Instruction::Meter),
        arb_experimenter()
            .prop_map(|(experimenter, data)| Instruction::Experimenter { experimenter, data }),
    ]
}

pub fn arb_match() -> impl Strategy<Value = Vec<Oxm>> {
    vec(arb_oxm(), 0..6)
}

pub fn arb_port() -> impl Strategy<Value = Port> {
    (
        any::<u32>(),
        any::<[u8; 6]>(),
        arb_string(15),
        any::<[u32; 8]>(),
    )
        .prop_map(|(port_no, hw_addr, name, x)| Port {
            port_no,
            hw_addr,
            name,
            config: x[0],
            state: x[1],
            curr: x[2],
            advertised: x[3],
            supported: x[4],
            peer: x[5],
            curr_speed: x[6],
            max_speed: x[7],
        })
}

pub fn arb_bucket() -> impl Strategy<Value = Bucket> {
    (any::<u16>(), any::<u32>(), any::<u32>(), arb_actions()).prop_map(
        |(weight, watch_port, watch_group, actions)| Bucket {
            weight,
            watch_port,
            watch_group,
            actions,
        },
    )
}

pub fn arb_flow_stats_request() -> impl Strategy<Value = FlowStatsRequest> {
    (any::<(u8, u32, u32, u64, u64)>(), arb_match()).prop_map(|(x, match_)| FlowStatsRequest {
        table_id: x.0,
        out_port: x.1,
        out_group: x.2,
        cookie: x.3,
        cookie_mask: x.4,
        match_,
    })
}

pub fn arb_table_features() -> impl Strategy<Value = TableFeatures> {
    let prop = prop_oneof![
        (any::<bool>(), vec(0u16..0xfffe, 0..5))
            .prop_map(|(miss, ids)| TableFeatureProp::Instructions { miss, ids }),
        (any::<bool>(), vec(any::<u8>(), 0..20))
            .prop_map(|(miss, tables)| TableFeatureProp::NextTables { miss, tables }),
        (any::<bool>(), vec(any::<u16>(), 0..5))
            .prop_map(|(miss, ids)| TableFeatureProp::WriteActions { miss, ids }),
        (any::<bool>(), vec(any::<u16>(), 0..5))
            .prop_map(|(miss, ids)| TableFeatureProp::ApplyActions { miss, ids }),
        vec(any::<u32>(), 0..5).prop_map(TableFeatureProp::Match),
        vec(any::<u32>(), 0..5).prop_map(TableFeatureProp::Wildcards),
        (any::<bool>(), vec(any::<u32>(), 0..5))
            .prop_map(|(miss, oxms)| TableFeatureProp::WriteSetfield { miss, oxms }),
        (any::<bool>(), vec(any::<u32>(), 0..5))
            .prop_map(|(miss, oxms)| TableFeatureProp::ApplySetfield { miss, oxms }),
        (
            prop_oneof![Just(9u16), Just(11), Just(0xfffe), Just(0xffff)],
            vec(any::<u8>(), 0..12)
        )
            .prop_map(|(type_, data)| TableFeatureProp::Other { type_, data }),
    ];
    (
        any::<(u8, u64, u64, u32, u32)>(),
        arb_string(31),
        vec(prop, 0..5),
    )
        .prop_map(|(x, name, properties)| TableFeatures {
            table_id: x.0,
            name,
            metadata_match: x.1,
            metadata_write: x.2,
            config: x.3,
            max_entries: x.4,
            properties,
        })
}

pub fn arb_mp_request() -> impl Strategy<Value = MultipartRequest> {
    prop_oneof![
        Just(MultipartRequest::Desc),
        arb_flow_stats_request().prop_map(MultipartRequest::Flow),
        arb_flow_stats_request().prop_map(MultipartRequest::Aggregate),
        Just(MultipartRequest::Table),
        any::<u32>().prop_map(|port_no| MultipartRequest::PortStats { port_no }),
        Just(MultipartRequest::PortDesc),
        Just(MultipartRequest::GroupDesc),
        any::<u32>().prop_map(|group_id| MultipartRequest::Group { group_id }),
        vec(arb_table_features(), 0..3).prop_map(MultipartRequest::TableFeatures),
    ]
}

pub fn arb_flow_stats() -> impl Strategy<Value = FlowStats> {
    (
        any::<(u8, u32, u32, u16, u16, u16, u16)>(),
        any::<(u64, u64, u64)>(),
        arb_match(),
        vec(arb_instruction(), 0..4),
    )
        .prop_map(|(a, b, match_, instructions)| FlowStats {
            table_id: a.0,
            duration_sec: a.1,
            duration_nsec: a.2,
            priority: a.3,
            idle_timeout: a.4,
            hard_timeout: a.5,
            flags: a.6,
            cookie: b.0,
            packet_count: b.1,
            byte_count: b.2,
            match_,
            instructions,
        })
}

pub fn arb_mp_reply() -> impl Strategy<Value = MultipartReply> {
    prop_oneof![
        (
            arb_string(255),
            arb_string(255),
            arb_string(255),
            arb_string(31),
            arb_string(255)
        )
            .prop_map(|(a, b, c, d, e)| MultipartReply::Desc(Desc {
                mfr_desc: a,
                hw_desc: b,
                sw_desc: c,
                serial_num: d,
                dp_desc: e,
            })),
        vec(arb_flow_stats(), 0..4).prop_map(MultipartReply::Flow),
        any::<(u64, u64, u32)>().prop_map(|(p, b, f)| MultipartReply::Aggregate {
            packet_count: p,
            byte_count: b,
            flow_count: f,
        }),
        vec(any::<(u8, u32, u64, u64)>(), 0..4).prop_map(|v| MultipartReply::Table(
            v.into_iter()
                .map(|(a, b, c, d)| TableStats {
                    table_id: a,
                    active_count: b,
                    lookup_count: c,
                    matched_count: d,
                })
                .collect()
        )),
        vec(
            (any::<u32>(), any::<[u64; 12]>(), any::<(u32, u32)>()),
            0..4
        )
        .prop_map(|v| {
            MultipartReply::PortStats(
                v.into_iter()
                    .map(|(port_no, c, d)| PortStats {
                        port_no,
                        rx_packets: c[0],
                        tx_packets: c[1],
                        rx_bytes: c[2],
                        tx_bytes: c[3],
                        rx_dropped: c[4],
                        tx_dropped: c[5],
                        rx_errors: c[6],
                        tx_errors: c[7],
                        rx_frame_err: c[8],
                        rx_over_err: c[9],
                        rx_crc_err: c[10],
                        collisions: c[11],
                        duration_sec: d.0,
                        duration_nsec: d.1,
                    })
                    .collect(),
            )
        }),
        vec(arb_port(), 0..4).prop_map(MultipartReply::PortDesc),
        vec((any::<u8>(), any::<u32>(), vec(arb_bucket(), 0..3)), 0..3).prop_map(|v| {
            MultipartReply::GroupDesc(
                v.into_iter()
                    .map(|(group_type, group_id, buckets)| GroupDesc {
                        group_type,
                        group_id,
                        buckets,
                    })
                    .collect(),
            )
        }),
        vec(
            (
                any::<(u32, u32, u64, u64, u32, u32)>(),
                vec(any::<(u64, u64)>(), 0..3)
            ),
            0..3
        )
        .prop_map(|v| MultipartReply::Group(
            v.into_iter()
                .map(|(x, bucket_stats)| GroupStats {
                    group_id: x.0,
                    ref_count: x.1,
                    packet_count: x.2,
                    byte_count: x.3,
                    duration_sec: x.4,
                    duration_nsec: x.5,
                    bucket_stats,
                })
                .collect()
        )),
        vec(arb_table_features(), 0..3).prop_map(MultipartReply::TableFeatures),
    ]
}

pub fn arb_message() -> impl Strategy<Value = Message> {
    let bytes = || vec(any::<u8>(), 0..64);
    let hello = vec(
        prop_oneof![
            vec(any::<u32>(), 0..3).prop_map(HelloElement::VersionBitmap),
            (2u16..100, vec(any::<u8>(), 0..12))
                .prop_map(|(type_, data)| HelloElement::Unknown { type_, data }),
        ],
        0..3,
    )
    .prop_map(Message::Hello);
    let async_cfg = any::<[u32; 6]>().prop_map(|x| AsyncConfig {
        packet_in_mask: [x[0], x[1]],
        port_status_mask: [x[2], x[3]],
        flow_removed_mask: [x[4], x[5]],
    });
    prop_oneof![
        hello,
        (any::<u16>(), any::<u16>(), bytes()).prop_map(|(type_, code, data)| Message::Error {
            type_,
            code,
            data
        }),
        bytes().prop_map(Message::EchoRequest),
        bytes().prop_map(Message::EchoReply),
        (any::<u32>(), any::<u32>(), bytes()).prop_map(|(experimenter, exp_type, data)| {
            Message::Experimenter {
                experimenter,
                exp_type,
                data,
            }
        }),
        Just(Message::FeaturesRequest),
        any::<(u64, u32, u8, u8, u32)>().prop_map(|x| Message::FeaturesReply(Features {
            datapath_id: x.0,
            n_buffers: x.1,
            n_tables: x.2,
            auxiliary_id: x.3,
            capabilities: x.4,
        })),
        Just(Message::GetConfigRequest),
        any::<(u16, u16)>().prop_map(|(flags, miss_send_len)| Message::GetConfigReply(
            SwitchConfig {
                flags,
                miss_send_len
            }
        )),
        any::<(u16, u16)>().prop_map(|(flags, miss_send_len)| Message::SetConfig(SwitchConfig {
            flags,
            miss_send_len
        })),
        (any::<(u32, u16, u8, u8, u64)>(), arb_match(), bytes()).prop_map(|(x, match_, data)| {
            Message::PacketIn(PacketIn {
                buffer_id: x.0,
                total_len: x.1,
                reason: x.2,
                table_id: x.3,
                cookie: x.4,
                match_,
                data,
            })
        }),
        (
            any::<(u64, u16, u8, u8, u32, u32)>(),
            any::<(u16, u16, u64, u64)>(),
            arb_match()
        )
            .prop_map(|(a, b, match_)| Message::FlowRemoved(FlowRemoved {
                cookie: a.0,
                priority: a.1,
                reason: a.2,
                table_id: a.3,
                duration_sec: a.4,
                duration_nsec: a.5,
                idle_timeout: b.0,
                hard_timeout: b.1,
                packet_count: b.2,
                byte_count: b.3,
                match_,
            })),
        (any::<u8>(), arb_port()).prop_map(|(reason, port)| Message::PortStatus { reason, port }),
        (any::<(u32, u32)>(), arb_actions(), bytes()).prop_map(|(x, actions, data)| {
            Message::PacketOut(PacketOut {
                buffer_id: x.0,
                in_port: x.1,
                actions,
                data,
            })
        }),
        (
            any::<(u64, u64, u8, u8, u16, u16)>(),
            any::<(u16, u32, u32, u32, u16)>(),
            arb_match(),
            vec(arb_instruction(), 0..4)
        )
            .prop_map(|(a, b, match_, instructions)| Message::FlowMod(FlowMod {
                cookie: a.0,
                cookie_mask: a.1,
                table_id: a.2,
                command: a.3,
                idle_timeout: a.4,
                hard_timeout: a.5,
                priority: b.0,
                buffer_id: b.1,
                out_port: b.2,
                out_group: b.3,
                flags: b.4,
                match_,
                instructions,
            })),
        (any::<(u16, u8, u32)>(), vec(arb_bucket(), 0..3)).prop_map(|(x, buckets)| {
            Message::GroupMod(GroupMod {
                command: x.0,
                group_type: x.1,
                group_id: x.2,
                buckets,
            })
        }),
        (any::<u32>(), any::<[u8; 6]>(), any::<(u32, u32, u32)>()).prop_map(|(p, hw, c)| {
            Message::PortMod(PortMod {
                port_no: p,
                hw_addr: hw,
                config: c.0,
                mask: c.1,
                advertise: c.2,
            })
        }),
        any::<(u8, u32)>().prop_map(|(table_id, config)| Message::TableMod { table_id, config }),
        (any::<u16>(), arb_mp_request())
            .prop_map(|(flags, body)| Message::MultipartRequest { flags, body }),
        (any::<u16>(), arb_mp_reply())
            .prop_map(|(flags, body)| Message::MultipartReply { flags, body }),
        Just(Message::BarrierRequest),
        Just(Message::BarrierReply),
        any::<(u32, u64)>().prop_map(|(role, generation_id)| Message::RoleRequest(Role {
            role,
            generation_id
        })),
        any::<(u32, u64)>().prop_map(|(role, generation_id)| Message::RoleReply(Role {
            role,
            generation_id
        })),
        Just(Message::GetAsyncRequest),
        async_cfg.clone().prop_map(Message::GetAsyncReply),
        async_cfg.prop_map(Message::SetAsync),
        (
            any::<(u16, u16, u32)>(),
            vec((any::<(u16, u32, u32)>(), vec(any::<u8>(), 0..8)), 0..3)
        )
            .prop_map(|(x, bands)| Message::MeterMod(MeterMod {
                command: x.0,
                flags: x.1,
                meter_id: x.2,
                bands: bands
                    .into_iter()
                    .map(|(b, data)| MeterBand {
                        type_: b.0,
                        rate: b.1,
                        burst_size: b.2,
                        data,
                    })
                    .collect(),
            })),
    ]
}
