//! `ofp_table_features` ([`TableFeatures`]) and its properties ([`TableFeatureProp`]): the
//! body of a TABLE_FEATURES request (a controller setting them) and reply.

use crate::consts::*;
use crate::wire::{pad8, DecodeError, Reader, Writer};

/// One table features property. Instruction and action ids are their type numbers;
/// OXM ids are 32-bit OXM headers ([`crate::OxmField::header`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TableFeatureProp {
    Instructions {
        miss: bool,
        ids: Vec<u16>,
    },
    NextTables {
        miss: bool,
        tables: Vec<u8>,
    },
    WriteActions {
        miss: bool,
        ids: Vec<u16>,
    },
    ApplyActions {
        miss: bool,
        ids: Vec<u16>,
    },
    Match(Vec<u32>),
    Wildcards(Vec<u32>),
    WriteSetfield {
        miss: bool,
        oxms: Vec<u32>,
    },
    ApplySetfield {
        miss: bool,
        oxms: Vec<u32>,
    },
    /// Experimenter and unknown properties, as they came (without padding).
    Other {
        type_: u16,
        data: Vec<u8>,
    },
}

impl TableFeatureProp {
    fn type_(&self) -> u16 {
        use TableFeatureProp::*;
        let m = |miss: &bool, base: u16| base + *miss as u16;
        match self {
            Instructions { miss, .. } => m(miss, tfpt::INSTRUCTIONS),
            NextTables { miss, .. } => m(miss, tfpt::NEXT_TABLES),
            WriteActions { miss, .. } => m(miss, tfpt::WRITE_ACTIONS),
            ApplyActions { miss, .. } => m(miss, tfpt::APPLY_ACTIONS),
            Match(_) => tfpt::MATCH,
            Wildcards(_) => tfpt::WILDCARDS,
            WriteSetfield { miss, .. } => m(miss, tfpt::WRITE_SETFIELD),
            ApplySetfield { miss, .. } => m(miss, tfpt::APPLY_SETFIELD),
            Other { type_, .. } => *type_,
        }
    }

    /// Length without padding.
    fn body_len(&self) -> usize {
        use TableFeatureProp::*;
        4 + match self {
            Instructions { ids, .. } | WriteActions { ids, .. } | ApplyActions { ids, .. } => {
                4 * ids.len()
            }
            NextTables { tables, .. } => tables.len(),
            Match(o)
            | Wildcards(o)
            | WriteSetfield { oxms: o, .. }
            | ApplySetfield { oxms: o, .. } => 4 * o.len(),
            Other { data, .. } => data.len(),
        }
    }

    fn wire_len(&self) -> usize {
        let l = self.body_len();
        l + pad8(l)
    }

    fn encode(&self, w: &mut Writer) {
        use TableFeatureProp::*;
        let start = w.len();
        w.u16(self.type_());
        w.u16(self.body_len().min(0xffff) as u16);
        match self {
            Instructions { ids, .. } | WriteActions { ids, .. } | ApplyActions { ids, .. } => {
                for id in ids {
                    w.u16(*id);
                    w.u16(4);
                }
            }
            NextTables { tables, .. } => w.bytes(tables),
            Match(o)
            | Wildcards(o)
            | WriteSetfield { oxms: o, .. }
            | ApplySetfield { oxms: o, .. } => {
                for x in o {
                    w.u32(*x);
                }
            }
            Other { data, .. } => w.bytes(data),
        }
        w.pad_from(start);
    }

    fn decode(r: &mut Reader) -> Result<TableFeatureProp, DecodeError> {
        let e = DecodeError::BadTableFeaturesLen;
        let ty = r.u16()?;
        let len = r.u16()? as usize;
        if len < 4 {
            return Err(e);
        }
        let body = r.bytes(len - 4)?;
        r.skip(pad8(len))?;
        let miss = ty & 1 == 1;
        let ids = |b: &[u8]| -> Result<Vec<u16>, DecodeError> {
            let mut r = Reader::new(b, e);
            let mut out = Vec::new();
            while !r.is_empty() {
                let t = r.u16()?;
                let l = r.u16()? as usize;
                if l < 4 {
                    return Err(e);
                }
                r.skip(l - 4)?;
                out.push(t);
            }
            Ok(out)
        };
        let oxms = |b: &[u8]| -> Result<Vec<u32>, DecodeError> {
            if b.len() % 4 != 0 {
                return Err(e);
            }
            Ok(b.chunks_exact(4)
                .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                .collect())
        };
        use TableFeatureProp::*;
        Ok(match ty {
            tfpt::INSTRUCTIONS | tfpt::INSTRUCTIONS_MISS => Instructions {
                miss,
                ids: ids(body)?,
            },
            tfpt::NEXT_TABLES | tfpt::NEXT_TABLES_MISS => NextTables {
                miss,
                tables: body.to_vec(),
            },
            tfpt::WRITE_ACTIONS | tfpt::WRITE_ACTIONS_MISS => WriteActions {
                miss,
                ids: ids(body)?,
            },
            tfpt::APPLY_ACTIONS | tfpt::APPLY_ACTIONS_MISS => ApplyActions {
                miss,
                ids: ids(body)?,
            },
            tfpt::MATCH => Match(oxms(body)?),
            tfpt::WILDCARDS => Wildcards(oxms(body)?),
            tfpt::WRITE_SETFIELD | tfpt::WRITE_SETFIELD_MISS => WriteSetfield {
                miss,
                oxms: oxms(body)?,
            },
            tfpt::APPLY_SETFIELD | tfpt::APPLY_SETFIELD_MISS => ApplySetfield {
                miss,
                oxms: oxms(body)?,
            },
            _ => Other {
                type_: ty,
                data: body.to_vec(),
            },
        })
    }
}

/// `ofp_table_features`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct TableFeatures {
    pub table_id: u8,
    /// At most 31 bytes on the wire.
    pub name: String,
    pub metadata_match: u64,
    pub metadata_write: u64,
    pub config: u32,
    pub max_entries: u32,
    pub properties: Vec<TableFeatureProp>,
}

impl TableFeatures {
    pub(super) fn wire_len(&self) -> usize {
        64 + self
            .properties
            .iter()
            .map(TableFeatureProp::wire_len)
            .sum::<usize>()
    }

    pub(super) fn encode(&self, w: &mut Writer) {
        w.u16(self.wire_len().min(0xffff) as u16);
        w.u8(self.table_id);
        w.zeros(5);
        w.string(&self.name, 32);
        w.u64(self.metadata_match);
        w.u64(self.metadata_write);
        w.u32(self.config);
        w.u32(self.max_entries);
        for p in &self.properties {
            p.encode(w);
        }
    }

    pub(super) fn decode_list(r: &mut Reader) -> Result<Vec<TableFeatures>, DecodeError> {
        let e = DecodeError::BadTableFeaturesLen;
        let mut out = Vec::new();
        while !r.is_empty() {
            let mut b = r.record(e, |len| len >= 64 && len % 8 == 0)?;
            let table_id = b.u8()?;
            b.skip(5)?;
            let name = b.string(32)?;
            let mut t = TableFeatures {
                table_id,
                name,
                metadata_match: b.u64()?,
                metadata_write: b.u64()?,
                config: b.u32()?,
                max_entries: b.u32()?,
                properties: Vec::new(),
            };
            while !b.is_empty() {
                t.properties.push(TableFeatureProp::decode(&mut b)?);
            }
            out.push(t);
        }
        Ok(out)
    }
}
