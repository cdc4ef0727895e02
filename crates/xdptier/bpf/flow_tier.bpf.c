// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* flowpath XDP tier: parse each frame into flowpath's FlowKey (flowkey.h), look it up in
 * the cached flows under each megaflow mask in order, and run the cached actions (VLAN
 * push/pop/TCI, MAC/IP/port/TOS rewrites with incremental checksums, TTL decrement, then
 * redirect through fp_ports or drop), counting per slot per CPU. Everything it cannot do
 * exactly as flowpath's user-space datapath would goes, unmodified, to the AF_XDP socket
 * of the rx queue (xsks_map; XDP_PASS when none is registered). Map contract:
 * docs/xdp-tier.md. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "flowkey.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FP_TABLE_ENTRIES);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct fp_entry);
} fp_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FP_INDEX_BUCKETS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct fp_bucket);
} fp_index SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FP_HOT_LINES);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct fp_hot);
} fp_hot SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FP_MAX_MASKS);
	__uint(map_flags, BPF_F_MMAPABLE); /* for its page-aligned values, not for an mmap */
	__type(key, __u32);
	__type(value, struct fp_mask);
} fp_masks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct fp_stat);
} fp_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct bpf_devmap_val);
} fp_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fp_config);
} fp_config SEC(".maps");

/* Per-CPU room for the copy of a hit's value (too big for the 512-byte stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fp_flow_value);
} fp_scratch SEC(".maps");

/* ingress ifindex -> flowpath port number (the key's in_port) and xsks_map base: an array
 * for ifindex < FP_INPORT_DIRECT (one inlined load per packet), a hash above. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FP_INPORT_DIRECT);
	__type(key, __u32);
	__type(value, struct fp_inport);
} fp_inport SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct fp_inport);
} fp_inport_hash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FP_R_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} fp_reasons SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fp_debug);
} fp_debug SEC(".maps");

/* Where the parser found the headers (offsets from the frame start). */
struct meta {
	__u32 l3;     /* 0: none */
	__u32 l4;     /* 0: none (other protocols, later fragments) */
	__u32 vlans;
};

union key_words {
	struct fp_key k;
	__u64 w[FP_KEY_WORDS];
};

#define ETH_P_QINQ 0x88A8
#define IS_VLAN(t) ((t) == bpf_htons(ETH_P_8021Q) || (t) == bpf_htons(ETH_P_QINQ))
#define MAX_OFF 1024 /* headers deeper than this go to user space (cannot happen: <= 162) */

static __always_inline void copy6(__u8 *d, const __u8 *s)
{
	*(__u32 *)d = *(const __u32 *)s;
	*(__u16 *)(d + 4) = *(const __u16 *)(s + 4);
}

/* flowpath's parse(), restricted: returns 0 (key complete) or an FP_R_UP_* reason. */
static __always_inline int parse(struct xdp_md *ctx, struct fp_key *k, struct meta *m,
				 __u16 vxlan_port)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 len = data_end - data;
	__u8 *p = data;

	if (data + 14 > data_end)
		return FP_R_UP_PARSE;
	copy6(k->eth_dst, p);
	copy6(k->eth_src, p + 6);
	__be16 etype = *(__be16 *)(p + 12);
	__u32 l3 = 14;
	m->vlans = 0;
	if (IS_VLAN(etype)) {
		if (data + 18 > data_end)
			return FP_R_UP_PARSE;
		k->vlan_tci = *(__be16 *)(p + 14) | bpf_htons(FP_VLAN_PRESENT);
		etype = *(__be16 *)(p + 16);
		l3 = 18;
		m->vlans = 1;
		if (IS_VLAN(etype)) {
			if (data + 22 > data_end)
				return FP_R_UP_PARSE;
			k->vlan_inner_tci = *(__be16 *)(p + 18) | bpf_htons(FP_VLAN_PRESENT);
			etype = *(__be16 *)(p + 20);
			l3 = 22;
			m->vlans = 2;
			if (IS_VLAN(etype))
				return FP_R_UP_PARSE; /* TooManyVlans */
		}
	}
	/* An 802.3 length is keyed as 0x05ff, as the user-space parser and OVS key it. */
	if (bpf_ntohs(etype) < 0x0600)
		etype = bpf_htons(0x05ff);
	k->eth_type = etype;

	__u32 l4, ip_end, proto;
	int v6, vx = vxlan_port != 0;
	__u8 *ip = data + l3;
	if (etype == bpf_htons(ETH_P_ARP)) {
		if ((void *)(ip + 28) > data_end)
			return FP_R_UP_PARSE;
		m->l3 = l3;
		/* Not Ethernet/IPv4 ARP: keyed on the ethertype alone (as user space and OVS). */
		if (ip[0] != 0 || ip[1] != 1 || ip[2] != 8 || ip[3] != 0 || ip[4] != 6 ||
		    ip[5] != 4)
			return 0;
		k->nw_proto = ip[7];
		*(__u32 *)k->ip_src = *(__u32 *)(ip + 14);
		*(__u32 *)k->ip_dst = *(__u32 *)(ip + 24);
		return 0;
	} else if (etype == bpf_htons(ETH_P_IP)) {
		if ((void *)(ip + 20) > data_end)
			return FP_R_UP_PARSE;
		if ((ip[0] >> 4) != 4)
			return FP_R_UP_PARSE;
		__u32 hlen = (ip[0] & 0x0f) * 4;
		if (hlen < 20)
			return FP_R_UP_PARSE;
		__u32 avail = len - l3;
		if (hlen > avail)
			return FP_R_UP_PARSE;
		__u32 total = bpf_ntohs(*(__be16 *)(ip + 2));
		if (total < hlen || total > avail)
			return FP_R_UP_PARSE;
		proto = ip[9];
		k->nw_proto = proto;
		k->nw_tos = ip[1];
		k->nw_ttl = ip[8];
		*(__u32 *)k->ip_src = *(__u32 *)(ip + 12);
		*(__u32 *)k->ip_dst = *(__u32 *)(ip + 16);
		m->l3 = l3;
		__u16 frag = bpf_ntohs(*(__be16 *)(ip + 6));
		if (frag & 0x3fff) {
			vx = 0;
			if (frag & 0x1fff) {
				k->nw_frag = FP_FRAG_ANY | FP_FRAG_LATER;
				return 0;
			}
			k->nw_frag = FP_FRAG_ANY;
		}
		l4 = l3 + hlen;
		ip_end = l3 + total;
		v6 = 0;
	} else if (etype == bpf_htons(ETH_P_IPV6)) {
		if ((void *)(ip + 40) > data_end)
			return FP_R_UP_PARSE;
		if ((ip[0] >> 4) != 6)
			return FP_R_UP_PARSE;
		ip_end = l3 + 40 + bpf_ntohs(*(__be16 *)(ip + 4));
		if (ip_end > len)
			return FP_R_UP_PARSE;
		k->nw_tos = (ip[0] << 4) | (ip[1] >> 4);
		k->nw_ttl = ip[7];
		__builtin_memcpy(k->ip_src, ip + 8, 16);
		__builtin_memcpy(k->ip_dst, ip + 24, 16);
		m->l3 = l3;
		proto = ip[6];
		/* Hop-by-hop, routing, fragment, destination options: user space walks them. */
		if (proto == 0 || proto == 43 || proto == 44 || proto == 60)
			return FP_R_UP_UNSUPPORTED;
		k->nw_proto = proto;
		l4 = l3 + 40;
		v6 = 1;
	} else {
		return 0; /* keyed on the ethertype alone */
	}

	/* L4: bounded by the IP payload (ip_end <= len), as the Rust parser does. */
	if (l4 > MAX_OFF)
		return FP_R_UP_UNSUPPORTED;
	__u8 *t = data + l4;
	if (proto == 17) {
		if (l4 + 8 > ip_end || (void *)(t + 8) > data_end)
			return FP_R_UP_PARSE;
		__u32 ulen = bpf_ntohs(*(__be16 *)(t + 4));
		/* A first fragment's UDP length covers the whole datagram. */
		if (ulen < 8 || (!k->nw_frag && ulen > ip_end - l4))
			return FP_R_UP_PARSE;
		k->tp_src = *(__be16 *)t;
		k->tp_dst = *(__be16 *)(t + 2);
		m->l4 = l4;
		if (vx && k->tp_dst == bpf_htons(vxlan_port))
			return FP_R_UP_UNSUPPORTED;
	} else if (proto == 6) {
		if (l4 + 20 > ip_end || (void *)(t + 20) > data_end)
			return FP_R_UP_PARSE;
		__u32 doff = (t[12] >> 4) * 4;
		if (doff < 20 || doff > ip_end - l4)
			return FP_R_UP_PARSE;
		k->tp_src = *(__be16 *)t;
		k->tp_dst = *(__be16 *)(t + 2);
		k->tcp_flags = *(__be16 *)(t + 12) & bpf_htons(0x0fff);
		m->l4 = l4;
	} else if ((proto == 1 && !v6) || (proto == 58 && v6)) {
		if (l4 + 4 > ip_end || (void *)(t + 4) > data_end)
			return FP_R_UP_PARSE;
		k->tp_src = bpf_htons(t[0]);
		k->tp_dst = bpf_htons(t[1]);
		m->l4 = l4;
	}
	return 0;
}

/* The shape most traffic has: untagged Ethernet, IPv4 with a 20-byte header and not a
 * fragment, or IPv6 without extension headers, carrying UDP (not to the VXLAN port) or
 * TCP, every length consistent. Its lookup words 0..7 are built in registers and stored
 * whole: the general parser's narrow stores (bytes and halves into the key) made the mask
 * loop's 8-byte loads of the same words wait for them (no store-to-load forwarding from
 * several smaller stores), and it zeroed the key first. Returns 1 with kw.w[0..8] and `m`
 * set, or 0 having decided nothing (the general parser then keys the frame or names its
 * reason); what this accepts, parse() accepts with the same key (tests/key_layout.rs
 * compares both with user space's parser). */
static __always_inline int parse_fast(struct xdp_md *ctx, union key_words *kw, struct meta *m,
				      __u32 in_port, __u16 vxlan_port)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *p = data;
	if (data + 14 + 20 + 8 > data_end)
		return 0;
	__be16 etype = *(__be16 *)(p + 12);
	__u8 *ip = p + 14, *t;
	__u32 len = data_end - data, room, proto, l4;
	__u64 tos, ttl, src0, src1, dst0, dst1;
	if (etype == bpf_htons(ETH_P_IP)) {
		if (ip[0] != 0x45)
			return 0;
		__u32 total = bpf_ntohs(*(__be16 *)(ip + 2));
		if (total < 20 || total > len - 14)
			return 0;
		if (bpf_ntohs(*(__be16 *)(ip + 6)) & 0x3fff)
			return 0;
		proto = ip[9];
		room = total - 20; /* transport bytes inside the IP payload */
		t = ip + 20;
		l4 = 14 + 20;
		tos = ip[1];
		ttl = ip[8];
		src0 = *(__u32 *)(ip + 12);
		dst0 = *(__u32 *)(ip + 16);
		src1 = 0;
		dst1 = 0;
	} else if (etype == bpf_htons(ETH_P_IPV6)) {
		if (data + 14 + 40 + 8 > data_end)
			return 0;
		if ((ip[0] >> 4) != 6)
			return 0;
		room = bpf_ntohs(*(__be16 *)(ip + 4));
		if (room > len - 14 - 40)
			return 0;
		proto = ip[6];
		t = ip + 40;
		l4 = 14 + 40;
		tos = (__u8)((ip[0] << 4) | (ip[1] >> 4));
		ttl = ip[7];
		src0 = *(__u64 *)(ip + 8);
		src1 = *(__u64 *)(ip + 16);
		dst0 = *(__u64 *)(ip + 24);
		dst1 = *(__u64 *)(ip + 32);
	} else {
		return 0;
	}
	__u64 flags = 0;
	if (proto == 17) {
		if ((void *)(t + 8) > data_end)
			return 0;
		__u32 ulen = bpf_ntohs(*(__be16 *)(t + 4));
		if (room < 8 || ulen < 8 || ulen > room)
			return 0;
		if (vxlan_port && *(__be16 *)(t + 2) == bpf_htons(vxlan_port))
			return 0;
	} else if (proto == 6) {
		if ((void *)(t + 20) > data_end || room < 20)
			return 0;
		__u32 doff = (t[12] >> 4) * 4;
		if (doff < 20 || doff > room)
			return 0;
		flags = *(__be16 *)(t + 12) & bpf_htons(0x0fff);
	} else {
		return 0;
	}
	/* Little-endian words of struct fp_key (x86 and arm64 BPF are little-endian). */
	kw->w[0] = (__u64)bpf_htonl(in_port) | ((__u64)etype << 32);
	kw->w[1] = (__u64)*(__u32 *)p | ((__u64)*(__u16 *)(p + 4) << 32);
	kw->w[2] = (__u64)*(__u32 *)(p + 6) | ((__u64)*(__u16 *)(p + 10) << 32) | (flags << 48);
	kw->w[3] = (__u64)proto | (tos << 8) | (ttl << 16) | ((__u64)*(__u16 *)t << 32) |
		   ((__u64)*(__u16 *)(t + 2) << 48);
	kw->w[4] = src0;
	kw->w[5] = src1;
	kw->w[6] = dst0;
	kw->w[7] = dst1;
	m->l3 = 14;
	m->l4 = l4;
	m->vlans = 0;
	return 1;
}

/* ---- checksums: RFC 1624 eqn. 3 on raw (as in the frame) 16-bit words; one's-complement
 * sums do not care about byte order. */
static __always_inline __u32 fold(__u32 s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return s;
}

static __always_inline __u32 sum_words(__u32 s, const __u16 *old, const __u16 *new, int n)
{
#pragma unroll
	for (int i = 0; i < n; i++) {
		s += (~old[i]) & 0xffff;
		s += new[i];
	}
	return s;
}

/* Finish an update begun with s = ~hc. */
static __always_inline __u16 finish(__u32 s)
{
	return ~fold(s) & 0xffff;
}

/* Transport checksum update; UDP: 0 stays 0 ("none"), a result of 0 becomes 0xffff. */
static __always_inline void l4_update(__u16 *ck, const __u16 *old, const __u16 *new, int n,
				      int udp)
{
	__u16 cur = *ck;
	if (udp && cur == 0)
		return;
	__u16 r = finish(sum_words(~cur & 0xffff, old, new, n));
	if (udp && r == 0)
		r = 0xffff;
	*ck = r;
}

#define barrier() asm volatile("" ::: "memory")
#define READ_ONCE_U32(x) (*(volatile __u32 *)&(x))

/* Find `lk` in fp_flows: the entry holding it, with the (even) seq read before its key was
 * compared in *seq, or NULL: not there, or being written by user space right now (seq
 * odd). The caller reads what it needs of the value and then checks the seq again. User
 * space never puts two slots with one signature in a bucket, so the first slot whose
 * signature matches is the only candidate (a slot that changes under us names an entry
 * whose key or seq then says so); the scan keeps nothing but the slot past the loop, so
 * the verifier walks what follows once, not once per way. */
static __always_inline struct fp_entry *table_find(const struct fp_flow_key *lk, __u64 h,
						   __u32 *seq)
{
	__u32 b = h & (FP_INDEX_BUCKETS - 1), sig = FP_SIG(h), s = 0;
	struct fp_bucket *bk = bpf_map_lookup_elem(&fp_index, &b);
	if (!bk)
		return NULL;
	for (__u32 way = 0; way < FP_INDEX_WAYS; way++) {
		__u32 v = READ_ONCE_U32(bk->slot[way]);
		if ((v >> 16) == sig) {
			s = v;
			break;
		}
	}
	if (!s)
		return NULL;
	__u32 i = s & 0xffff;
	struct fp_entry *e = bpf_map_lookup_elem(&fp_flows, &i);
	if (!e)
		return NULL;
	__u32 s1 = READ_ONCE_U32(e->seq);
	barrier();
	if ((s1 & 1) || !e->used)
		return NULL;
	const __u64 *ew = (const __u64 *)&e->key;
	const __u64 *kw = (const __u64 *)lk;
	/* The stored key's pad holds the stats slot: compare mask_id only there. */
	__u64 diff = (__u32)(ew[0] ^ kw[0]);
#pragma unroll
	for (int w = 1; w < 1 + FP_LOOKUP_WORDS; w++)
		diff |= ew[w] ^ kw[w];
	if (diff)
		return NULL;
	*seq = s1;
	return e;
}

/* What a plain hit (an output or a drop that changes nothing) needs. */
struct plain_hit {
	__u32 version;
	__u32 flags;
	__u32 out_port;
	__u32 out_dev;
	__u32 slot;
};

/* Is `lk` the flow of its bucket's hot line (fp_hot[h & (FP_HOT_LINES - 1)])? Then 1, with
 * what the hit needs in *hit, read between two equal even seqs of the line; -1 when it
 * is not and the line says the bucket holds nothing else (FP_HOT_ALONE, read between
 * equal even seqs too): `lk` is absent; else 0 (the caller looks in the bucket). Only
 * keys whose words 5 and 7 are zero can be there. One line read, where the bucket and
 * the entry are two dependent reads (three lines): with the flows in random order, ~24 ns
 * a hit (docs/xdp-tier.md, the hot line). */
static __always_inline int hot_find(const struct fp_flow_key *lk, __u64 h, struct plain_hit *hit)
{
	if (lk->w[5] | lk->w[7])
		return 0;
	__u32 b = h & (FP_HOT_LINES - 1);
	struct fp_hot *ht = bpf_map_lookup_elem(&fp_hot, &b);
	if (!ht)
		return 0;
	__u32 s1 = READ_ONCE_U32(ht->seq);
	barrier();
	__u64 d = (__u64)(ht->mask_id ^ lk->mask_id) | (s1 & 1) |
		  ((ht->flags & FP_HOT_USED) ^ FP_HOT_USED);
	d |= (ht->w[0] ^ lk->w[0]) | (ht->w[1] ^ lk->w[1]) | (ht->w[2] ^ lk->w[2]) |
	     (ht->w[3] ^ lk->w[3]) | (ht->w[4] ^ lk->w[4]) | (ht->w[5] ^ lk->w[6]);
	if (d) {
		if ((s1 & 1) || !(ht->flags & FP_HOT_ALONE))
			return 0;
		barrier();
		return READ_ONCE_U32(ht->seq) == s1 ? -1 : 0;
	}
	hit->version = ht->version;
	hit->flags = ht->flags & FP_ACT_OUTPUT;
	hit->out_port = ht->out_port;
	hit->out_dev = ht->out_dev;
	hit->slot = ht->slot;
	barrier();
	return READ_ONCE_U32(ht->seq) == s1;
}

/* To the AF_XDP socket of this interface's rx queue: xsks_map[xsk_base + queue]. */
static __always_inline int upcall(struct xdp_md *ctx, __u32 xsk_base)
{
	return bpf_redirect_map(&xsks_map, xsk_base + ctx->rx_queue_index, XDP_PASS);
}

static __always_inline void count_reason(__u32 r)
{
	__u64 *c = bpf_map_lookup_elem(&fp_reasons, &r);
	if (c)
		*c += 1;
}

static __always_inline void record(struct fp_config *cfg, union key_words *kw, __u32 reason,
				   __u32 slot)
{
	count_reason(reason);
	if (!(cfg->flags & FP_CFG_DEBUG))
		return;
	__u32 zero = 0;
	struct fp_debug *d = bpf_map_lookup_elem(&fp_debug, &zero);
	if (!d)
		return;
	__builtin_memcpy(&d->key, &kw->k, sizeof(d->key));
	d->reason = reason;
	d->slot = slot;
	d->seq += 1;
}

/* Move the 12 MAC bytes from `from` to `to` (non-overlapping copy through registers). */
static __always_inline void move_macs(__u8 *to, __u8 *from)
{
	__u32 a = *(__u32 *)from, b = *(__u32 *)(from + 4), c = *(__u32 *)(from + 8);
	*(__u32 *)to = a;
	*(__u32 *)(to + 4) = b;
	*(__u32 *)(to + 8) = c;
}

/* The key of the frame, as both programs build it: the fast path for the common shapes,
 * else the general parser on a zeroed key. 0 (key complete) or an FP_R_UP_* reason. */
static __always_inline int parse_key(struct xdp_md *ctx, union key_words *kw, struct meta *m,
				     __u32 in_port, __u16 vxlan_port)
{
	if (parse_fast(ctx, kw, m, in_port, vxlan_port))
		return 0;
#pragma unroll
	for (int w = 0; w < FP_LOOKUP_WORDS; w++)
		kw->w[w] = 0;
	kw->k.in_port = bpf_htonl(in_port);
	return parse(ctx, &kw->k, m, vxlan_port);
}

SEC("xdp")
int flow_tier(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct fp_config *cfg = bpf_map_lookup_elem(&fp_config, &zero);
	if (!cfg)
		return XDP_ABORTED;
	union key_words kw;
	/* The tunnel words (8..12) are never set here, and the lookup words are set by a
	 * parser below: all are zeroed first only for the debug record. */
	if (cfg->flags & FP_CFG_DEBUG) {
#pragma unroll
		for (int w = 0; w < FP_KEY_WORDS; w++)
			kw.w[w] = 0;
	}
	struct meta m = {};
	__u32 frame_len = ctx->data_end - ctx->data;

	__u32 ifindex = ctx->ingress_ifindex;
	/* The array (inlined by the verifier) answers NULL from FP_INPORT_DIRECT on. */
	struct fp_inport *ip_ent = bpf_map_lookup_elem(&fp_inport, &ifindex);
	if (!ip_ent)
		ip_ent = bpf_map_lookup_elem(&fp_inport_hash, &ifindex);
	if (!ip_ent || !(ip_ent->flags & FP_INPORT_PRESENT)) {
		record(cfg, &kw, FP_R_UP_NO_INPORT, ~0u);
		return upcall(ctx, 0);
	}
	__u32 in_port = ip_ent->port, xsk_base = ip_ent->xsk_base;
	/* Nothing cached yet (no mask registered: the agent offers only megaflows that were hit
	 * again after install, so a new-flow flood registers none): every packet is a miss, so
	 * hand it over without parsing — the tier must not make misses dearer than no tier. */
	if (cfg->n_masks == 0 && !(cfg->flags & FP_CFG_DEBUG)) {
		count_reason(FP_R_MISS);
		return upcall(ctx, xsk_base);
	}
	int r = parse_key(ctx, &kw, &m, in_port, cfg->vxlan_port);
	if (r) {
		record(cfg, &kw, r, ~0u);
		return upcall(ctx, xsk_base);
	}
	/* The key's words leave the parsers through memory: without this, clang keeps the
	 * parsers' pieces (merged from both paths) and rebuilds each word from spilled
	 * pieces in front of the mask loop, ~80 instructions a packet. */
	asm volatile("" : : "r"(&kw) : "memory");

	/* Lookup: masks in order, first hit wins. */
	struct fp_flow_key lk;
	struct fp_entry *e = NULL;
	__u32 seq = 0;
	__u32 n = cfg->n_masks;
	int hot = 0;
	struct plain_hit hit; /* read only after hot_find filled it (hot) */
	for (__u32 i = 0; i < FP_MAX_MASKS; i++) {
		if (i >= n)
			break;
		__u32 idx = i;
		struct fp_mask *mk = bpf_map_lookup_elem(&fp_masks, &idx);
		if (!mk)
			break;
		union key_words *mw = (union key_words *)&mk->mask;
		__u32 zw = mk->zero_words;
		lk.mask_id = mk->id;
		lk.pad = 0;
		/* fp_hash(&lk), leaving out the words the mask zeroes (their terms are 0): an
		 * IPv4 5-tuple mask has four of eight. */
		__u64 h = FP_HASH_TERM((__u64)lk.mask_id, 0);
#pragma unroll
		for (int w = 0; w < FP_LOOKUP_WORDS; w++) {
			__u64 x = 0;
			if (!(zw & (1u << w))) {
				x = kw.w[w] & mw->w[w];
				h += FP_HASH_TERM(x, w + 1);
			}
			lk.w[w] = x;
		}
		__u64 hh = fp_hash_finish(h);
		int hf = hot_find(&lk, hh, &hit);
		if (hf > 0) {
			hot = 1;
			break;
		}
		if (hf < 0)
			continue; /* absent under this mask: the bucket holds nothing else */
		e = table_find(&lk, hh, &seq);
		if (e)
			break;
	}
	if (!e && !hot) {
		record(cfg, &kw, FP_R_MISS, ~0u);
		return upcall(ctx, xsk_base);
	}
	/* What every hit needs: from the hot line, or read from the entry itself; the whole
	 * value is copied only for actions beyond a plain output or drop (most cached flows
	 * have none). Then the seq again: an entry user space rewrote meanwhile is a miss, so
	 * a torn value never acts. All within the entry's first 96 bytes (two cache lines at
	 * any 32-byte offset): the stats slot rides in the stored key's pad, VLAN pops have a
	 * flag. */
	__u32 version, fl, out_port, out_dev, slot;
	struct fp_flow_value *val = NULL;
	int plain = 1;
	if (hot) {
		version = hit.version, fl = hit.flags, out_port = hit.out_port;
		out_dev = hit.out_dev, slot = hit.slot;
	} else {
		if (!e)
			return XDP_ABORTED;
		version = e->val.act.version, fl = e->val.act.flags;
		out_port = e->val.act.out_port, out_dev = e->val.act.out_dev, slot = e->key.pad;
		/* Plain: an output or a drop that changes nothing. */
		plain = !(fl & ~FP_ACT_OUTPUT);
		if (!plain) {
			val = bpf_map_lookup_elem(&fp_scratch, &zero);
			if (!val)
				return XDP_ABORTED;
			__builtin_memcpy(val, &e->val, sizeof(*val));
		}
		barrier();
		if (READ_ONCE_U32(e->seq) != seq) {
			record(cfg, &kw, FP_R_MISS, ~0u);
			return upcall(ctx, xsk_base);
		}
	}
	if (version != cfg->version) {
		record(cfg, &kw, FP_R_STALE, ~0u);
		return upcall(ctx, xsk_base);
	}
	if (plain) {
		/* A plain output or drop. The redirect itself says whether the port is in
		 * fp_ports (XDP_PASS, the fallback asked for, when not) before anything is
		 * counted; the packet is unmodified either way. */
		int r = XDP_DROP;
		__u32 reason = FP_R_HIT_DROP;
		if (fl & FP_ACT_OUTPUT) {
			if (out_port == in_port) /* flowpath skips output to the ingress port */
				goto up_action;
			r = bpf_redirect_map(&fp_ports, out_dev, XDP_PASS);
			if (r != XDP_REDIRECT)
				goto up_action;
			reason = FP_R_HIT_OUTPUT;
		}
		struct fp_stat *st = bpf_map_lookup_elem(&fp_stats, &slot);
		if (st) {
			st->packets += 1;
			st->bytes += frame_len;
		}
		record(cfg, &kw, reason, slot);
		return r;
	}
	if (!val)
		return XDP_ABORTED; /* cannot happen: a value that is not plain was copied */
	struct fp_actions *a = &val->act;

	/* Everything that can send the packet to user space is decided before the first
	 * byte changes: it must arrive there as received. */
	if (fl & FP_ACT_OUTPUT) {
		if (out_port == in_port) /* flowpath skips output to the ingress port */
			goto up_action;
		__u32 dev = out_dev;
		if (!bpf_map_lookup_elem(&fp_ports, &dev))
			goto up_action;
	}
	int is4 = kw.k.eth_type == bpf_htons(ETH_P_IP) && m.l3;
	int is6 = kw.k.eth_type == bpf_htons(ETH_P_IPV6) && m.l3;
	if ((fl & FP_ACT_DEC_TTL) && (is4 || is6) && kw.k.nw_ttl <= 1) {
		record(cfg, &kw, FP_R_UP_TTL, slot);
		return upcall(ctx, xsk_base);
	}
	__u32 vl = m.vlans, pops = a->pop_vlans;
	if (pops > vl)
		pops = vl;
	vl -= pops;
	int push = 0;
	if (fl & FP_ACT_PUSH_VLAN) {
		if (vl >= 2)
			goto up_action; /* flowpath drops a third tag (too_many_vlans) */
		push = 1;
	} else if ((fl & FP_ACT_SET_VLAN_TCI) && vl == 0) {
		push = 1;
	}

	/* VLAN changes first; the L3/L4 header then sits `shift` bytes further on. */
	void *data, *data_end;
	for (__u32 i = 0; i < 2; i++) {
		if (i >= pops)
			break;
		data = (void *)(long)ctx->data;
		data_end = (void *)(long)ctx->data_end;
		if (data + 16 > data_end)
			return XDP_ABORTED;
		move_macs(data + 4, data); /* overlapping: loads happen before the stores */
		if (bpf_xdp_adjust_head(ctx, 4))
			return XDP_ABORTED;
	}
	if (push) {
		__u16 tpid = (fl & FP_ACT_PUSH_VLAN) ? a->push_tpid : bpf_htons(ETH_P_8021Q);
		if (bpf_xdp_adjust_head(ctx, -4)) {
			if (pops)
				return XDP_ABORTED; /* cannot happen: a pop freed the headroom */
			goto up_action;
		}
		data = (void *)(long)ctx->data;
		data_end = (void *)(long)ctx->data_end;
		if (data + 20 > data_end)
			return XDP_ABORTED;
		__u16 tci = vl ? *(__u16 *)(data + 18) : 0;
		move_macs(data, data + 4);
		*(__u16 *)(data + 12) = tpid;
		*(__u16 *)(data + 14) = tci;
		vl += 1;
	}
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if ((fl & FP_ACT_SET_VLAN_TCI) && vl) {
		if (data + 16 > data_end)
			return XDP_ABORTED;
		__u16 tci = bpf_ntohs(*(__be16 *)(data + 14));
		*(__be16 *)(data + 14) = bpf_htons((tci & a->vlan_keep) | a->vlan_set);
	}
	__u32 l3 = m.l3 + 4 * vl - 4 * m.vlans;
	__u32 l4 = m.l4 ? m.l4 + 4 * vl - 4 * m.vlans : 0;
	if (l3 > MAX_OFF || l4 > MAX_OFF)
		return XDP_ABORTED;
	__u32 proto = kw.k.nw_proto;
	/* Transport checksum: offset from the frame start, 0 = none. ICMPv6 is covered only
	 * for IPv6 address changes (it has no ports). */
	__u32 ck_off = 0, ck_udp = 0;
	if (l4 && proto == 6)
		ck_off = l4 + 16;
	else if (l4 && proto == 17)
		ck_off = l4 + 6, ck_udp = 1;
	__u16 *ck = NULL;
	if (ck_off && data + ck_off + 2 <= data_end)
		ck = data + ck_off;

	if (is4 && (fl & (FP_ACT_SET_IP4_SRC | FP_ACT_SET_IP4_DST | FP_ACT_SET_NW_TOS |
			  FP_ACT_DEC_TTL))) {
		__u8 *ip = data + l3;
		if ((void *)(ip + 20) > data_end)
			return XDP_ABORTED;
		__u16 *hc = (__u16 *)(ip + 10);
		if (fl & FP_ACT_SET_IP4_SRC) {
			__u16 old[2], *nw = (__u16 *)a->ip_src;
			__builtin_memcpy(old, ip + 12, 4);
			__builtin_memcpy(ip + 12, a->ip_src, 4);
			*hc = finish(sum_words(~*hc & 0xffff, old, nw, 2));
			if (ck)
				l4_update(ck, old, nw, 2, ck_udp);
		}
		if (fl & FP_ACT_SET_IP4_DST) {
			__u16 old[2], *nw = (__u16 *)a->ip_dst;
			__builtin_memcpy(old, ip + 16, 4);
			__builtin_memcpy(ip + 16, a->ip_dst, 4);
			*hc = finish(sum_words(~*hc & 0xffff, old, nw, 2));
			if (ck)
				l4_update(ck, old, nw, 2, ck_udp);
		}
		if (fl & FP_ACT_SET_NW_TOS) {
			__u16 old = *(__u16 *)ip;
			ip[1] = (a->nw_tos & 0xfc) | (ip[1] & 0x03);
			__u16 nw = *(__u16 *)ip;
			*hc = finish(sum_words(~*hc & 0xffff, &old, &nw, 1));
		}
		if (fl & FP_ACT_DEC_TTL) {
			__u16 old = *(__u16 *)(ip + 8);
			ip[8] -= 1;
			__u16 nw = *(__u16 *)(ip + 8);
			*hc = finish(sum_words(~*hc & 0xffff, &old, &nw, 1));
		}
	} else if (is6 && (fl & (FP_ACT_SET_IP6_SRC | FP_ACT_SET_IP6_DST | FP_ACT_SET_NW_TOS |
				 FP_ACT_DEC_TTL))) {
		__u8 *ip = data + l3;
		if ((void *)(ip + 40) > data_end)
			return XDP_ABORTED;
		__u16 *ck6 = ck;
		int udp6 = ck_udp;
		if (!ck6 && l4 && proto == 58 && data + l4 + 4 <= data_end)
			ck6 = data + l4 + 2, udp6 = 0;
		if (fl & FP_ACT_SET_IP6_SRC) {
			__u16 old[8], *nw = (__u16 *)a->ip_src;
			__builtin_memcpy(old, ip + 8, 16);
			__builtin_memcpy(ip + 8, a->ip_src, 16);
			if (ck6)
				l4_update(ck6, old, nw, 8, udp6);
		}
		if (fl & FP_ACT_SET_IP6_DST) {
			__u16 old[8], *nw = (__u16 *)a->ip_dst;
			__builtin_memcpy(old, ip + 24, 16);
			__builtin_memcpy(ip + 24, a->ip_dst, 16);
			if (ck6)
				l4_update(ck6, old, nw, 8, udp6);
		}
		if (fl & FP_ACT_SET_NW_TOS) {
			__u8 b0 = ip[0], b1 = ip[1];
			__u8 tc = (b0 << 4) | (b1 >> 4);
			__u8 ntc = (a->nw_tos & 0xfc) | (tc & 0x03);
			ip[0] = (b0 & 0xf0) | (ntc >> 4);
			ip[1] = (b1 & 0x0f) | (ntc << 4);
		}
		if (fl & FP_ACT_DEC_TTL)
			ip[7] -= 1;
	}
	if (ck && (is4 || is6)) {
		__u8 *t = data + l4;
		if ((void *)(t + 4) > data_end)
			return XDP_ABORTED;
		if (fl & FP_ACT_SET_TP_SRC) {
			__u16 old = *(__u16 *)t, nw = a->tp_src;
			*(__u16 *)t = nw;
			l4_update(ck, &old, &nw, 1, ck_udp);
		}
		if (fl & FP_ACT_SET_TP_DST) {
			__u16 old = *(__u16 *)(t + 2), nw = a->tp_dst;
			*(__u16 *)(t + 2) = nw;
			l4_update(ck, &old, &nw, 1, ck_udp);
		}
	}
	if (fl & (FP_ACT_SET_ETH_SRC | FP_ACT_SET_ETH_DST)) {
		if (data + 12 > data_end)
			return XDP_ABORTED;
		if (fl & FP_ACT_SET_ETH_DST)
			copy6(data, a->eth_dst);
		if (fl & FP_ACT_SET_ETH_SRC)
			copy6(data + 6, a->eth_src);
	}

	struct fp_stat *st = bpf_map_lookup_elem(&fp_stats, &slot);
	if (st) {
		st->packets += 1;
		st->bytes += frame_len;
	}
	if (fl & FP_ACT_OUTPUT) {
		record(cfg, &kw, FP_R_HIT_OUTPUT, slot);
		return bpf_redirect_map(&fp_ports, out_dev, 0);
	}
	record(cfg, &kw, FP_R_HIT_DROP, slot);
	return XDP_DROP;

up_action:
	record(cfg, &kw, FP_R_UP_ACTION, slot);
	return upcall(ctx, xsk_base);
}

/* A baseline, not a switch: the tier's own parser (the same two functions), then a
 * redirect to fp_ports[0], with no in-port lookup, no table, no actions and no counters.
 * `flowpath xdp-forward --parse` attaches it and `flowpath lab` measures it as the
 * `xdp-parse-forward` row between redirect-only (`xdp_fwd_all`, which never reads the
 * frame) and the tier: what it costs over redirect-only is reading and parsing the
 * headers, which any switch pays; what the tier costs over it is the tier's own work.
 * Frames the tier would hand to user space unparsed go to the stack (XDP_PASS). */
SEC("xdp")
int parse_forward(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct fp_config *cfg = bpf_map_lookup_elem(&fp_config, &zero);
	if (!cfg)
		return XDP_ABORTED;
	union key_words kw;
	struct meta m = {};
	if (parse_key(ctx, &kw, &m, 0, cfg->vxlan_port))
		return XDP_PASS;
	/* The key must be built, as the tier builds it, or the compiler drops the stores that
	 * are the point: the devmap index takes one bit of it, and n_masks is 0 here (nothing is
	 * looked up), so the index is always 0. */
	__u64 x = 0;
#pragma unroll
	for (int w = 0; w < FP_LOOKUP_WORDS; w++)
		x ^= kw.w[w];
	__u32 dev = (__u32)x & cfg->n_masks;
	return bpf_redirect_map(&fp_ports, dev, XDP_DROP);
}

char _license[] SEC("license") = "Dual BSD/GPL";
