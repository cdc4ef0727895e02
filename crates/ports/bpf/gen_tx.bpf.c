// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Traffic transmitter for `flowpath gen --tx`: run with BPF_PROG_TEST_RUN in XDP live-frame
 * mode, it rewrites the template frame's flow (source port, then source address) from a
 * packet counter and returns XDP_TX, so the kernel transmits it out of ingress_ifindex.
 *
 * Live-frame pages are recycled within one run WITHOUT being re-copied from the template,
 * so every field is written as an absolute value derived from the template's original
 * fields (kept in gen_cfg), and checksums are updated incrementally from the template's
 * original checksums (RFC 1624, eqn. 3), never from what is currently in the page.
 *
 * Frames from userspace carry 8 bytes of XDP metadata: GEN_MAGIC and the index of their
 * gen_cfg entry. Anything else (real received traffic: the program is also attached in
 * generic mode to the transmit interface, which keeps BPF_PROG_RUN from re-patching the XDP
 * dispatcher on every call, see xdpgen.rs) is passed untouched.
 *
 * Paced runs (gen_pace set): a frame goes out only when it is due by the program's clock;
 * a slot that is not due is dropped before anything is written, so its page goes back to
 * the run's pool as it came. One long call then sends at the asked rate in short bursts:
 * pacing with many short calls instead paid a page pool's setup and teardown per call,
 * which capped a paced veth sender at ~0.7 Mpps (see xdpgen.rs). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* Must match `GenCfg` in src/xdpgen.rs. All 16-bit "raw" fields are the bytes as they sit
 * in the frame, loaded as a native u16 (one's-complement sums do not care about order). */
struct gen_cfg {
	__u32 mode;        /* 0 = send as is, 1 = rewrite the flow per packet */
	__u32 flows;       /* recurring flows, >= 1 */
	__u32 new_share;   /* share of packets that are never-seen flows, 2^-24 units */
	__u32 port_span;   /* source ports used before the address steps, >= 1 */
	__u32 base_src;    /* template's varied 32 address bits, host order */
	__u32 base_src_raw;/* the same bits as in the frame */
	__u16 ip_off;      /* offset of the IP header */
	__u16 src_off;     /* offset of the varied 32 address bits */
	__u16 port_off;    /* offset of the L4 source port, 0 = none */
	__u16 l4_csum_off; /* offset of the L4 checksum, 0 = none (or IPv4 UDP with 0) */
	__u16 base_port;   /* template's source port, host order */
	__u16 base_port_raw;
	__u16 base_ip_csum_raw; /* IPv4 header checksum, raw; unused for IPv6 */
	__u16 base_l4_csum_raw;
	__u8 ip_ver;       /* 4 or 6 */
	__u8 l4_pseudo;    /* L4 checksum covers the source address */
	__u8 order;        /* recurring flows: 0 = round-robin, 1 = at random (uniform) */
	__u8 pad[5];
};

#define GEN_MAGIC 0x66706774 /* "fpgt" */
#define GEN_TEMPLATES 1024

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, GEN_TEMPLATES);
	__type(key, __u32);
	__type(value, struct gen_cfg);
} gen_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} gen_ctr SEC(".maps");

/* Must match `GenPace` in src/xdpgen.rs. Written by user space before each run; the
 * program advances next_ns/next_frac as it sends. An interval of 0 is unpaced. */
struct gen_pace {
	__u64 interval_ns;   /* whole ns from one frame to the next */
	__u64 next_ns;       /* bpf_ktime_get_ns() when the next frame is due; 0: at once */
	__u64 max_lag_ns;    /* a program running late catches up at most this much */
	__u32 interval_frac; /* and this many 2^-32 ns */
	__u32 next_frac;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_pace);
} gen_pace SEC(".maps");

static __always_inline __u32 fold(__u32 s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return s;
}

/* ~(~check + ~old + new) over the two 16-bit halves of a 32-bit raw field. */
static __always_inline __u32 add32(__u32 sum, __u32 old_raw, __u32 new_raw)
{
	sum += (~old_raw & 0xffff) + (~old_raw >> 16);
	sum += (new_raw & 0xffff) + (new_raw >> 16);
	return sum;
}

/* A 64-bit finaliser (splitmix64's): a bijection, so consecutive counts give unrelated
 * values. */
static __always_inline __u64 mix64(__u64 x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

SEC("xdp")
int gen_tx(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 *meta = (void *)(long)ctx->data_meta;
	if ((void *)(meta + 2) > data || meta[0] != GEN_MAGIC)
		return XDP_PASS;
	__u32 zero = 0, idx = meta[1];
	struct gen_cfg *cfg = bpf_map_lookup_elem(&gen_cfg, &idx);
	__u64 *ctr = bpf_map_lookup_elem(&gen_ctr, &zero);
	struct gen_pace *pace = bpf_map_lookup_elem(&gen_pace, &zero);
	if (!cfg || !ctr || !pace)
		return XDP_ABORTED;
	if (pace->interval_ns | pace->interval_frac) {
		__u64 now = bpf_ktime_get_ns(), next = pace->next_ns;
		if (next == 0)
			next = now;
		if (now < next)
			return XDP_DROP; /* not due: the slot passes, nothing is sent or counted */
		if (now - next > pace->max_lag_ns)
			next = now - pace->max_lag_ns;
		__u64 f = (__u64)pace->next_frac + pace->interval_frac;
		pace->next_frac = (__u32)f;
		pace->next_ns = next + pace->interval_ns + (f >> 32);
	}
	__u64 c = *ctr;
	*ctr = c + 1;
	if (cfg->mode == 0)
		return XDP_TX;

	/* Which flow: new ones spread evenly (Bresenham), recurring ones round-robin or at
	 * random (a mix of their packet number: uniform over the flows, no cycle a cache
	 * laid out in the order flows arrived could stream through). */
	__u32 flows = cfg->flows ? cfg->flows : 1, f;
	/* a = new flows before packet c; the recurring ones take the other packets in turn,
	 * so each of them keeps its share (c - a of them came before this one). */
	__u64 a = (c * cfg->new_share) >> 24, b = ((c + 1) * cfg->new_share) >> 24;
	if (a != b)
		f = flows + (__u32)b;
	else
		f = (__u32)((cfg->order ? mix64(c - a) : c - a) % flows);
	__u32 span = cfg->port_span ? cfg->port_span : 1;
	__u32 src = cfg->base_src + f / span;
	__u16 port = cfg->base_port + (__u16)(f % span);
	__u32 src_raw = bpf_htonl(src);
	__u16 port_raw = bpf_htons(port);

	__u32 off = cfg->src_off & 0x1ff;
	__u32 *sp = data + off;
	if ((void *)(sp + 1) > data_end)
		return XDP_ABORTED;
	*sp = src_raw;

	if (cfg->ip_ver == 4) {
		off = (cfg->ip_off + 10) & 0x1ff;
		__u16 *ck = data + off;
		if ((void *)(ck + 1) > data_end)
			return XDP_ABORTED;
		__u32 s = ~cfg->base_ip_csum_raw & 0xffff;
		s = add32(s, cfg->base_src_raw, src_raw);
		*ck = ~fold(s) & 0xffff;
	}

	if (cfg->port_off) {
		off = cfg->port_off & 0x1ff;
		__u16 *pp = data + off;
		if ((void *)(pp + 1) > data_end)
			return XDP_ABORTED;
		*pp = port_raw;
	}

	if (cfg->l4_csum_off) {
		off = cfg->l4_csum_off & 0x1ff;
		__u16 *ck = data + off;
		if ((void *)(ck + 1) > data_end)
			return XDP_ABORTED;
		__u32 s = ~cfg->base_l4_csum_raw & 0xffff;
		if (cfg->l4_pseudo)
			s = add32(s, cfg->base_src_raw, src_raw);
		if (cfg->port_off) {
			s += ~cfg->base_port_raw & 0xffff;
			s += port_raw;
		}
		__u16 r = ~fold(s) & 0xffff;
		*ck = r ? r : 0xffff;
	}
	return XDP_TX;
}

char _license[] SEC("license") = "Dual BSD/GPL";
