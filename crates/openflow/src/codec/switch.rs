//! The switch's own state: `ofp_switch_features` ([`Features`]), `ofp_switch_config`
//! ([`SwitchConfig`]), `ofp_port_mod` ([`PortMod`]), the controller role ([`Role`]) and
//! the asynchronous message filter ([`AsyncConfig`]).

use crate::wire::{DecodeError, Reader, Writer};

/// `ofp_switch_features` (FEATURES_REPLY).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Features {
    pub datapath_id: u64,
    pub n_buffers: u32,
    pub n_tables: u8,
    pub auxiliary_id: u8,
    pub capabilities: u32,
}

impl Features {
    pub(super) fn encode(&self, w: &mut Writer) {
        w.u64(self.datapath_id);
        w.u32(self.n_buffers);
        w.u8(self.n_tables);
        w.u8(self.auxiliary_id);
        w.zeros(2);
        w.u32(self.capabilities);
        w.u32(0);
    }

    pub(super) fn decode(r: &mut Reader) -> Result<Features, DecodeError> {
        let datapath_id = r.u64()?;
        let n_buffers = r.u32()?;
        let n_tables = r.u8()?;
        let auxiliary_id = r.u8()?;
        r.skip(2)?;
        let capabilities = r.u32()?;
        r.skip(4)?;
        Ok(Features {
            datapath_id,
            n_buffers,
            n_tables,
            auxiliary_id,
            capabilities,
        })
    }
}

/// `ofp_switch_config` (GET_CONFIG_REPLY, SET_CONFIG).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct SwitchConfig {
    pub flags: u16,
    pub miss_send_len: u16,
}

impl SwitchConfig {
    pub(super) fn encode(&self, w: &mut Writer) {
        w.u16(self.flags);
        w.u16(self.miss_send_len);
    }

    pub(super) fn decode(r: &mut Reader) -> Result<SwitchConfig, DecodeError> {
        Ok(SwitchConfig {
            flags: r.u16()?,
            miss_send_len: r.u16()?,
        })
    }
}

/// `ofp_port_mod`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct PortMod {
    pub port_no: u32,
    pub hw_addr: [u8; 6],
    pub config: u32,
    pub mask: u32,
    pub advertise: u32,
}

impl PortMod {
    pub(super) fn encode(&self, w: &mut Writer) {
        w.u32(self.port_no);
        w.zeros(4);
        w.bytes(&self.hw_addr);
        w.zeros(2);
        w.u32(self.config);
        w.u32(self.mask);
        w.u32(self.advertise);
        w.zeros(4);
    }

    pub(super) fn decode(r: &mut Reader) -> Result<PortMod, DecodeError> {
        let port_no = r.u32()?;
        r.skip(4)?;
        let hw_addr = r.array()?;
        r.skip(2)?;
        let p = PortMod {
            port_no,
            hw_addr,
            config: r.u32()?,
            mask: r.u32()?,
            advertise: r.u32()?,
        };
        r.skip(4)?;
        Ok(p)
    }
}

/// `ofp_role_request` / reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Role {
    pub role: u32,
    pub generation_id: u64,
}

impl Role {
    pub(super) fn encode(&self, w: &mut Writer) {
        w.u32(self.role);
        w.zeros(4);
        w.u64(self.generation_id);
    }

    pub(super) fn decode(r: &mut Reader) -> Result<Role, DecodeError> {
        let role = r.u32()?;
        r.skip(4)?;
        Ok(Role {
            role,
            generation_id: r.u64()?,
        })
    }
}

/// `ofp_async_config`: index 0 is for the master/equal role, 1 for the slave role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct AsyncConfig {
    pub packet_in_mask: [u32; 2],
    pub port_status_mask: [u32; 2],
    pub flow_removed_mask: [u32; 2],
}

impl AsyncConfig {
    pub(super) fn encode(&self, w: &mut Writer) {
        for x in self
            .packet_in_mask
            .iter()
            .chain(&self.port_status_mask)
            .chain(&self.flow_removed_mask)
        {
            w.u32(*x);
        }
    }

    pub(super) fn decode(r: &mut Reader) -> Result<AsyncConfig, DecodeError> {
        Ok(AsyncConfig {
            packet_in_mask: [r.u32()?, r.u32()?],
            port_status_mask: [r.u32()?, r.u32()?],
            flow_removed_mask: [r.u32()?, r.u32()?],
        })
    }
}
