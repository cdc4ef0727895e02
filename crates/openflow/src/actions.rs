//! OpenFlow 1.3 actions (`ofp_action_*`) and instructions (`ofp_instruction_*`): every type
//! the specification defines; an unknown type is a decoding error.

use crate::consts::*;
use crate::oxm::Oxm;
use crate::wire::{pad8, DecodeError, Reader, Writer};

/// An action or an instruction: a type and a length (a multiple of 8) in four bytes, then
/// the body, padded to the length.
pub(crate) trait Tlv: Sized {
    /// The error for a length that is wrong for the item or overruns its list.
    const BAD_LEN: DecodeError;

    /// The type number and the length on the wire.
    fn type_and_len(&self) -> (u16, usize);

    /// Write what follows the type and the length (the padding is added after it).
    fn encode_body(&self, w: &mut Writer);

    /// Read an item of type `ty` and length `len` from its body `b` (all that follows the
    /// type and length).
    fn decode_body(ty: u16, len: usize, b: Reader) -> Result<Self, DecodeError>;

    fn encode(&self, w: &mut Writer) {
        let start = w.len();
        let (ty, len) = self.type_and_len();
        w.u16(ty);
        w.u16(len.min(0xfff8) as u16);
        self.encode_body(w);
        w.pad_from(start);
    }

    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let ty = r.u16()?;
        let len = r.u16()? as usize;
        if len < 8 || len % 8 != 0 {
            return Err(Self::BAD_LEN);
        }
        let b = r.sub(len - 4, Self::BAD_LEN)?;
        Self::decode_body(ty, len, b)
    }
}

/// The body of an experimenter action or instruction: the experimenter id, then its data
/// (with the padding).
fn experimenter_body(b: &mut Reader) -> Result<(u32, Vec<u8>), DecodeError> {
    Ok((b.u32()?, b.rest().to_vec()))
}

/// Encode a list of actions or instructions.
pub(crate) fn encode_list<T: Tlv>(w: &mut Writer, items: &[T]) {
    for i in items {
        i.encode(w);
    }
}

/// Encoded size of a list of actions or instructions.
pub(crate) fn list_wire_len<T: Tlv>(items: &[T]) -> usize {
    items.iter().map(|i| i.type_and_len().1).sum()
}

/// Decode actions or instructions until `r` is empty.
pub(crate) fn decode_list<T: Tlv>(r: Reader) -> Result<Vec<T>, DecodeError> {
    let mut r = Reader::new(r.rest_copy(), T::BAD_LEN);
    let mut out = Vec::new();
    while !r.is_empty() {
        out.push(T::decode(&mut r)?);
    }
    Ok(out)
}

/// One OpenFlow action (named `OfAction` to keep it apart from flowpath's `Action`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum OfAction {
    /// Output to a port; `max_len` is how much of the packet goes to the controller
    /// (OFPP_CONTROLLER only; [`OFPCML_NO_BUFFER`] for all of it).
    Output {
        port: u32,
        max_len: u16,
    },
    CopyTtlOut,
    CopyTtlIn,
    SetMplsTtl(u8),
    DecMplsTtl,
    /// Push a VLAN tag with this ethertype.
    PushVlan(u16),
    PopVlan,
    PushMpls(u16),
    /// Pop an MPLS label; the ethertype of what is left.
    PopMpls(u16),
    SetQueue(u32),
    Group(u32),
    SetNwTtl(u8),
    DecNwTtl,
    /// Set a field from one OXM (no mask).
    SetField(Oxm),
    PushPbb(u16),
    PopPbb,
    /// An experimenter action; `data` is what follows the experimenter id (with the
    /// padding that makes the action a multiple of 8 bytes).
    Experimenter {
        experimenter: u32,
        data: Vec<u8>,
    },
}

impl OfAction {
    /// Output to `port` (max_len 0, as for every port but the controller).
    pub fn output(port: u32) -> OfAction {
        OfAction::Output { port, max_len: 0 }
    }

    /// The action's type number.
    pub fn type_(&self) -> u16 {
        match self {
            OfAction::Output { .. } => act::OUTPUT,
            OfAction::CopyTtlOut => act::COPY_TTL_OUT,
            OfAction::CopyTtlIn => act::COPY_TTL_IN,
            OfAction::SetMplsTtl(_) => act::SET_MPLS_TTL,
            OfAction::DecMplsTtl => act::DEC_MPLS_TTL,
            OfAction::PushVlan(_) => act::PUSH_VLAN,
            OfAction::PopVlan => act::POP_VLAN,
            OfAction::PushMpls(_) => act::PUSH_MPLS,
            OfAction::PopMpls(_) => act::POP_MPLS,
            OfAction::SetQueue(_) => act::SET_QUEUE,
            OfAction::Group(_) => act::GROUP,
            OfAction::SetNwTtl(_) => act::SET_NW_TTL,
            OfAction::DecNwTtl => act::DEC_NW_TTL,
            OfAction::SetField(_) => act::SET_FIELD,
            OfAction::PushPbb(_) => act::PUSH_PBB,
            OfAction::PopPbb => act::POP_PBB,
            OfAction::Experimenter { .. } => act::EXPERIMENTER,
        }
    }

    /// Length on the wire.
    pub fn wire_len(&self) -> usize {
        match self {
            OfAction::Output { .. } => 16,
            OfAction::SetField(o) => {
                let l = 4 + o.wire_len();
                l + pad8(l)
            }
            OfAction::Experimenter { data, .. } => {
                let l = 8 + data.len();
                l + pad8(l)
            }
            _ => 8,
        }
    }
}

impl Tlv for OfAction {
    fn encode_body(&self, w: &mut Writer) {
        match self {
            OfAction::Output { port, max_len } => {
                w.u32(*port);
                w.u16(*max_len);
                w.zeros(6);
            }
            OfAction::SetMplsTtl(t) | OfAction::SetNwTtl(t) => {
                w.u8(*t);
                w.zeros(3);
            }
            OfAction::PushVlan(e)
            | OfAction::PushMpls(e)
            | OfAction::PopMpls(e)
            | OfAction::PushPbb(e) => {
                w.u16(*e);
                w.zeros(2);
            }
            OfAction::SetQueue(n) | OfAction::Group(n) => w.u32(*n),
            OfAction::SetField(o) => o.encode(w),
            OfAction::Experimenter { experimenter, data } => {
                w.u32(*experimenter);
                w.bytes(data);
            }
            OfAction::CopyTtlOut
            | OfAction::CopyTtlIn
            | OfAction::DecMplsTtl
            | OfAction::PopVlan
            | OfAction::DecNwTtl
            | OfAction::PopPbb => w.zeros(4),
        }
    }

    fn decode_body(ty: u16, len: usize, mut b: Reader) -> Result<OfAction, DecodeError> {
        let e = Self::BAD_LEN;
        let fixed = |want: usize| if len == want { Ok(()) } else { Err(e) };
        let a = match ty {
            act::OUTPUT => {
                fixed(16)?;
                let port = b.u32()?;
                let max_len = b.u16()?;
                OfAction::Output { port, max_len }
            }
            act::COPY_TTL_OUT => fixed(8).map(|_| OfAction::CopyTtlOut)?,
            act::COPY_TTL_IN => fixed(8).map(|_| OfAction::CopyTtlIn)?,
            act::DEC_MPLS_TTL => fixed(8).map(|_| OfAction::DecMplsTtl)?,
            act::POP_VLAN => fixed(8).map(|_| OfAction::PopVlan)?,
            act::DEC_NW_TTL => fixed(8).map(|_| OfAction::DecNwTtl)?,
            act::POP_PBB => fixed(8).map(|_| OfAction::PopPbb)?,
            act::SET_MPLS_TTL => OfAction::SetMplsTtl(fixed(8).and_then(|_| b.u8())?),
            act::SET_NW_TTL => OfAction::SetNwTtl(fixed(8).and_then(|_| b.u8())?),
            act::PUSH_VLAN => OfAction::PushVlan(fixed(8).and_then(|_| b.u16())?),
            act::PUSH_MPLS => OfAction::PushMpls(fixed(8).and_then(|_| b.u16())?),
            act::POP_MPLS => OfAction::PopMpls(fixed(8).and_then(|_| b.u16())?),
            act::PUSH_PBB => OfAction::PushPbb(fixed(8).and_then(|_| b.u16())?),
            act::SET_QUEUE => OfAction::SetQueue(fixed(8).and_then(|_| b.u32())?),
            act::GROUP => OfAction::Group(fixed(8).and_then(|_| b.u32())?),
            act::SET_FIELD => {
                let se = DecodeError::BadSetLen;
                let o = Oxm::decode(&mut b, se)?;
                // What follows the OXM is padding to the next multiple of 8.
                let used = 4 + o.wire_len();
                if len != used + pad8(used) {
                    return Err(se);
                }
                match &o {
                    Oxm::Basic { mask: Some(_), .. } => return Err(DecodeError::BadSetArgument),
                    Oxm::Unknown { has_mask: true, .. } => return Err(DecodeError::BadSetArgument),
                    _ => {}
                }
                OfAction::SetField(o)
            }
            act::EXPERIMENTER => {
                let (experimenter, data) = experimenter_body(&mut b)?;
                OfAction::Experimenter { experimenter, data }
            }
            other => return Err(DecodeError::BadAction(other)),
        };
        Ok(a)
    }

    fn type_and_len(&self) -> (u16, usize) {
        (self.type_(), self.wire_len())
    }

    const BAD_LEN: DecodeError = DecodeError::BadActionLen;
}

/// One OpenFlow instruction.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Instruction {
    GotoTable(u8),
    WriteMetadata {
        metadata: u64,
        mask: u64,
    },
    WriteActions(Vec<OfAction>),
    ApplyActions(Vec<OfAction>),
    ClearActions,
    Meter(u32),
    /// An experimenter instruction: the id and what follows it (padding included).
    Experimenter {
        experimenter: u32,
        data: Vec<u8>,
    },
}

impl Instruction {
    /// The instruction's type number.
    pub fn type_(&self) -> u16 {
        match self {
            Instruction::GotoTable(_) => inst::GOTO_TABLE,
            Instruction::WriteMetadata { .. } => inst::WRITE_METADATA,
            Instruction::WriteActions(_) => inst::WRITE_ACTIONS,
            Instruction::ApplyActions(_) => inst::APPLY_ACTIONS,
            Instruction::ClearActions => inst::CLEAR_ACTIONS,
            Instruction::Meter(_) => inst::METER,
            Instruction::Experimenter { .. } => inst::EXPERIMENTER,
        }
    }

    /// Length on the wire.
    pub fn wire_len(&self) -> usize {
        match self {
            Instruction::GotoTable(_) | Instruction::ClearActions | Instruction::Meter(_) => 8,
            Instruction::WriteMetadata { .. } => 24,
            Instruction::WriteActions(a) | Instruction::ApplyActions(a) => 8 + list_wire_len(a),
            Instruction::Experimenter { data, .. } => {
                let l = 8 + data.len();
                l + pad8(l)
            }
        }
    }
}

impl Tlv for Instruction {
    fn encode_body(&self, w: &mut Writer) {
        match self {
            Instruction::GotoTable(t) => {
                w.u8(*t);
                w.zeros(3);
            }
            Instruction::WriteMetadata { metadata, mask } => {
                w.zeros(4);
                w.u64(*metadata);
                w.u64(*mask);
            }
            Instruction::WriteActions(a) | Instruction::ApplyActions(a) => {
                w.zeros(4);
                encode_list(w, a);
            }
            Instruction::ClearActions => w.zeros(4),
            Instruction::Meter(m) => w.u32(*m),
            Instruction::Experimenter { experimenter, data } => {
                w.u32(*experimenter);
                w.bytes(data);
            }
        }
    }

    fn decode_body(ty: u16, len: usize, mut b: Reader) -> Result<Instruction, DecodeError> {
        let e = Self::BAD_LEN;
        let fixed = |want: usize| if len == want { Ok(()) } else { Err(e) };
        Ok(match ty {
            inst::GOTO_TABLE => Instruction::GotoTable(fixed(8).and_then(|_| b.u8())?),
            inst::WRITE_METADATA => {
                fixed(24)?;
                b.skip(4)?;
                let metadata = b.u64()?;
                let mask = b.u64()?;
                Instruction::WriteMetadata { metadata, mask }
            }
            inst::WRITE_ACTIONS => {
                b.skip(4)?;
                Instruction::WriteActions(decode_list(b)?)
            }
            inst::APPLY_ACTIONS => {
                b.skip(4)?;
                Instruction::ApplyActions(decode_list(b)?)
            }
            inst::CLEAR_ACTIONS => {
                fixed(8)?;
                Instruction::ClearActions
            }
            inst::METER => Instruction::Meter(fixed(8).and_then(|_| b.u32())?),
            inst::EXPERIMENTER => {
                let (experimenter, data) = experimenter_body(&mut b)?;
                Instruction::Experimenter { experimenter, data }
            }
            other => return Err(DecodeError::BadInstruction(other)),
        })
    }

    fn type_and_len(&self) -> (u16, usize) {
        (self.type_(), self.wire_len())
    }

    const BAD_LEN: DecodeError = DecodeError::BadInstructionLen;
}
