//! Where `Output` actions send packets ([`OutputSink`]), and the sinks that need no ports:
//! counting (for benches) and capturing (for tests).

/// Where `Output` actions send packets. Implemented by port sets, counting sinks and test
/// captures; generic (not `dyn`) so the call is inlined on the hot path.
pub trait OutputSink {
    fn output(&mut self, port: u32, data: &[u8]);
}

/// Counts packets and bytes per output port; touches the packet only to read its length.
#[derive(Clone, Debug, Default)]
pub struct CountingSink {
    pub packets: u64,
    pub bytes: u64,
    /// Packets per port number (grown on demand; ports are small integers).
    pub per_port: Vec<u64>,
}

impl OutputSink for CountingSink {
    #[inline(always)]
    fn output(&mut self, port: u32, data: &[u8]) {
        self.packets += 1;
        self.bytes += data.len() as u64;
        let p = port as usize;
        if p < self.per_port.len() {
            self.per_port[p] += 1;
        } else if p < 4096 {
            self.per_port.resize(p + 1, 0);
            self.per_port[p] += 1;
        }
    }
}

/// Keeps a copy of every output, in order: (port, bytes).
#[derive(Clone, Debug, Default)]
pub struct CaptureSink {
    pub packets: Vec<(u32, Vec<u8>)>,
}

impl OutputSink for CaptureSink {
    fn output(&mut self, port: u32, data: &[u8]) {
        self.packets.push((port, data.to_vec()));
    }
}
