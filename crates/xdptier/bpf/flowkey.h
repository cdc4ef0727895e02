/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* flowpath XDP tier: the shared contract between the kernel program (flow_tier.bpf.c), the
 * Rust mirror (src/lib.rs, compile-time asserts on every size and offset below) and any
 * user-supplied program that wants to use the same maps. See docs/xdp-tier.md.
 *
 * The flow key is byte-for-byte flowpath's `FlowKey` (crates/packet/src/key.rs): every
 * field in network byte order at a fixed offset, 13 64-bit words, so masking is a
 * word-wise AND. */
#ifndef FLOWPATH_FLOWKEY_H
#define FLOWPATH_FLOWKEY_H

#include <linux/types.h>

#define FP_KEY_BYTES 104
#define FP_KEY_WORDS 13
/* The part of the key that is looked up: everything before the tunnel fields (tun_id at
 * 64 and on), which are always zero in the XDP tier (VXLAN goes to user space). A shorter
 * hash key is a cheaper hash and compare on every packet. */
#define FP_LOOKUP_BYTES 64
#define FP_LOOKUP_WORDS 8
/* fp_inport is an array indexed by ifindex below this; larger ifindexes use
 * fp_inport_hash. */
#define FP_INPORT_DIRECT 4096
#define FP_INPORT_PRESENT 1
/* Megaflow masks tried in order (fp_masks entries). */
#define FP_MAX_MASKS 8

/* Key constants (key.rs). */
#define FP_VLAN_PRESENT 0x1000
#define FP_FRAG_ANY 0x01
#define FP_FRAG_LATER 0x02

struct fp_key {
	__be32 in_port;          /*  0 */
	__be16 eth_type;         /*  4 innermost ethertype */
	__be16 vlan_tci;         /*  6 outer tag | 0x1000 when present */
	__u8 eth_dst[6];         /*  8 */
	__be16 vlan_inner_tci;   /* 14 */
	__u8 eth_src[6];         /* 16 */
	__be16 tcp_flags;        /* 22 12 bits */
	__u8 nw_proto;           /* 24 ARP: low byte of the opcode */
	__u8 nw_tos;             /* 25 */
	__u8 nw_ttl;             /* 26 */
	__u8 nw_frag;            /* 27 FP_FRAG_* */
	__be16 tp_src;           /* 28 ICMP: type */
	__be16 tp_dst;           /* 30 ICMP: code */
	__u8 ip_src[16];         /* 32 IPv4 / ARP SPA in the first 4 bytes */
	__u8 ip_dst[16];         /* 48 */
	__be32 tun_id;           /* 64 (never set by the XDP tier: VXLAN goes to user space) */
	__u8 tun_flags;          /* 68 */
	__u8 pad[3];             /* 69 zero */
	__u8 tun_src[16];        /* 72 */
	__u8 tun_dst[16];        /* 88 */
} __attribute__((aligned(8)));

_Static_assert(sizeof(struct fp_key) == FP_KEY_BYTES, "fp_key size");
_Static_assert(__builtin_offsetof(struct fp_key, eth_type) == 4, "eth_type");
_Static_assert(__builtin_offsetof(struct fp_key, vlan_tci) == 6, "vlan_tci");
_Static_assert(__builtin_offsetof(struct fp_key, eth_dst) == 8, "eth_dst");
_Static_assert(__builtin_offsetof(struct fp_key, vlan_inner_tci) == 14, "vlan_inner_tci");
_Static_assert(__builtin_offsetof(struct fp_key, eth_src) == 16, "eth_src");
_Static_assert(__builtin_offsetof(struct fp_key, tcp_flags) == 22, "tcp_flags");
_Static_assert(__builtin_offsetof(struct fp_key, nw_proto) == 24, "nw_proto");
_Static_assert(__builtin_offsetof(struct fp_key, nw_tos) == 25, "nw_tos");
_Static_assert(__builtin_offsetof(struct fp_key, nw_ttl) == 26, "nw_ttl");
_Static_assert(__builtin_offsetof(struct fp_key, nw_frag) == 27, "nw_frag");
_Static_assert(__builtin_offsetof(struct fp_key, tp_src) == 28, "tp_src");
_Static_assert(__builtin_offsetof(struct fp_key, tp_dst) == 30, "tp_dst");
_Static_assert(__builtin_offsetof(struct fp_key, ip_src) == 32, "ip_src");
_Static_assert(__builtin_offsetof(struct fp_key, ip_dst) == 48, "ip_dst");
_Static_assert(__builtin_offsetof(struct fp_key, tun_id) == 64, "tun_id");
_Static_assert(__builtin_offsetof(struct fp_key, tun_flags) == 68, "tun_flags");
_Static_assert(__builtin_offsetof(struct fp_key, tun_src) == 72, "tun_src");
_Static_assert(__builtin_offsetof(struct fp_key, tun_dst) == 88, "tun_dst");

/* fp_flows key: which mask (fp_mask.id) and the first FP_LOOKUP_BYTES of the key ANDed
 * with that mask. */
struct fp_flow_key {
	__u32 mask_id;
	__u32 pad;               /* zero in a lookup key; an fp_flows entry keeps its fp_stats
	                          * slot here (the program compares only mask_id of word 0) */
	__u64 w[FP_LOOKUP_WORDS]; /* fp_key bytes 0..64, masked */
};
_Static_assert(sizeof(struct fp_flow_key) == 72, "fp_flow_key size");

/* fp_masks entry: tried in index order 0..fp_config.n_masks. */
struct fp_mask {
	__u32 id;                /* goes into fp_flow_key.mask_id */
	__u32 zero_words;        /* bit w: lookup word w of `mask` is all zero (user space sets
	                          * it; the program neither masks nor hashes such a word) */
	struct fp_key mask;      /* 1-bits matter */
	__u32 pad[4];            /* to two whole lines (the map is page-aligned): the fields
	                          * above and lookup words 0..6 (all of an IPv4 key's) share
	                          * a mask's first line */
};
_Static_assert(sizeof(struct fp_mask) == 128, "fp_mask size");

/* fp_actions.flags: which actions apply. The program runs them in this fixed order:
 * pop VLAN(s), push VLAN, set outer TCI, L3/L4 rewrites (with checksums), MAC rewrites,
 * then output or drop. User space only caches action lists that mean the same. */
#define FP_ACT_OUTPUT       (1u << 0)  /* redirect to fp_ports[out_dev]; without it: drop */
#define FP_ACT_SET_ETH_SRC  (1u << 1)
#define FP_ACT_SET_ETH_DST  (1u << 2)
#define FP_ACT_SET_IP4_SRC  (1u << 3)  /* ip_src[0..4] */
#define FP_ACT_SET_IP4_DST  (1u << 4)
#define FP_ACT_SET_IP6_SRC  (1u << 5)  /* ip_src[0..16] */
#define FP_ACT_SET_IP6_DST  (1u << 6)
#define FP_ACT_SET_TP_SRC   (1u << 7)  /* TCP/UDP only */
#define FP_ACT_SET_TP_DST   (1u << 8)
#define FP_ACT_SET_NW_TOS   (1u << 9)  /* DSCP = nw_tos & 0xfc, ECN kept */
#define FP_ACT_DEC_TTL      (1u << 10) /* TTL/hop limit <= 1: to user space */
#define FP_ACT_PUSH_VLAN    (1u << 11) /* tpid push_tpid, TCI copied from the outer tag or 0 */
#define FP_ACT_SET_VLAN_TCI (1u << 12) /* outer TCI = (TCI & vlan_keep) | vlan_set; pushes
                                        * an 802.1Q tag (TCI 0) first when untagged */
#define FP_ACT_POP_VLANS    (1u << 13) /* pop_vlans > 0 (a plain entry has no flag but OUTPUT) */
#define FP_ACT_ALL          ((1u << 14) - 1)

struct fp_actions {
	__u32 version;           /*  0 must equal fp_config.version, else the entry is a miss */
	__u32 flags;             /*  4 FP_ACT_* */
	__u32 out_port;          /*  8 flowpath port number (== in_port: to user space) */
	__u32 out_dev;           /* 12 fp_ports index */
	__u8 eth_src[6];         /* 16 */
	__u8 eth_dst[6];         /* 22 */
	__be16 push_tpid;        /* 28 */
	__u16 vlan_keep;         /* 30 host order */
	__u16 vlan_set;          /* 32 host order */
	__u8 pop_vlans;          /* 34 0, 1 or 2 */
	__u8 nw_tos;             /* 35 */
	__be16 tp_src;           /* 36 */
	__be16 tp_dst;           /* 38 */
	__u8 ip_src[16];         /* 40 */
	__u8 ip_dst[16];         /* 56 */
};
_Static_assert(sizeof(struct fp_actions) == 72, "fp_actions size");
_Static_assert(__builtin_offsetof(struct fp_actions, eth_src) == 16, "a.eth_src");
_Static_assert(__builtin_offsetof(struct fp_actions, push_tpid) == 28, "a.push_tpid");
_Static_assert(__builtin_offsetof(struct fp_actions, pop_vlans) == 34, "a.pop_vlans");
_Static_assert(__builtin_offsetof(struct fp_actions, tp_src) == 36, "a.tp_src");
_Static_assert(__builtin_offsetof(struct fp_actions, ip_src) == 40, "a.ip_src");
_Static_assert(__builtin_offsetof(struct fp_actions, ip_dst) == 56, "a.ip_dst");

/* fp_flows value. */
struct fp_flow_value {
	struct fp_actions act;
	__u32 slot;              /* fp_stats index */
	__u32 pad;
};
_Static_assert(sizeof(struct fp_flow_value) == 80, "fp_flow_value size");

/* The flow table: fp_index, an array of FP_INDEX_BUCKETS buckets of FP_INDEX_WAYS 32-bit
 * slots (one 64-byte cache line each), and fp_flows, an array of FP_TABLE_ENTRIES entries
 * that user space hands out lowest index first. A flow with lookup key k, h = fp_hash(k),
 * is in bucket h & (FP_INDEX_BUCKETS - 1) as a slot (FP_SIG(h) << 16) | entry index; a
 * slot of 0 is empty (FP_SIG is never 0). A hit reads one bucket line and the entry (or,
 * first, the bucket's line of fp_hot alone, below); a miss under a mask reads the hot line
 * (IPv4 keys), and the bucket line too unless the hot line says the bucket holds nothing
 * else (FP_HOT_ALONE). The entries of N flows sit in the first
 * N * 160 bytes of fp_flows whatever their hashes, so the pages a hit touches stay few
 * (the former 2-way buckets of entries spread 8,000 flows over 5,000 pages of a 20 MB
 * array: a TLB miss on most hits, and in a VM a nested page walk).
 * Hand-made rather than a BPF hash map: the kernel's hash map costs a helper call, jhash
 * and memcmp per lookup (about 55 ns here, half the program), where an array lookup is
 * inlined by the verifier.
 * User space writes both through mmaps, seqlock style per entry: seq odd while an entry is
 * being written; the program reads seq, the entry, seq again, and treats a change (or an
 * odd seq) as a miss, so a torn entry can never forward a packet. An insert writes the
 * entry, then publishes its slot; a removal clears the slot, then the entry. */
#define FP_INDEX_BUCKETS 16384
#define FP_INDEX_WAYS 16
#define FP_TABLE_ENTRIES 65536
#define FP_SIG(h) ((__u32)((h) >> 48) | 1u)

struct fp_bucket {
	__u32 slot[FP_INDEX_WAYS];
};
_Static_assert(sizeof(struct fp_bucket) == 64, "fp_bucket size");

struct fp_entry {
	__u32 seq;               /*   0 odd while user space writes the entry */
	__u32 used;              /*   4 1: holds a flow */
	struct fp_flow_key key;  /*   8 */
	struct fp_flow_value val;/*  80 */
};
_Static_assert(sizeof(struct fp_entry) == 160, "fp_entry size");

/* The table's hash of a lookup key k, fp_hash(k): its 9 64-bit words w[0..9]
 * (little-endian loads), each multiplied by its own odd constant (independent multiplies,
 * no serial chain), summed, then mixed:
 *     fp_hash(k) = fp_hash_finish(sum over i of FP_HASH_TERM(w[i], i)).
 * A zero word's term is zero, so the program leaves out the words its mask zeroes and
 * sums the rest as it masks them (flow_tier.bpf.c). src/table.rs `table_hash` is the
 * same function. */
#define FP_HASH_MUL 0xff51afd7ed558ccdULL
#define FP_HASH_TERM(x, i) \
	(((x) ^ ((x) >> 29)) * (FP_HASH_MUL + 2 * (__u64)(i) * 0x9e3779b97f4a7c15ULL))
static __always_inline __u64 fp_hash_finish(__u64 h)
{
	h ^= h >> 32;
	h *= FP_HASH_MUL;
	return h ^ (h >> 29);
}

/* fp_hot: one line per bucket (line b belongs to bucket b of fp_index, so the bucket's
 * write lock covers it), holding a copy of at most one flow of the bucket in 64 bytes:
 * a plain one (an output or a drop that changes nothing) whose masked lookup words 5 and
 * 7 are zero (the addresses' last 8 bytes: IPv4, ARP and non-IP keys, and IPv6 ones under
 * masks that keep at most the first 64 bits of each address). The program looks there
 * first under each mask: a hit reads this one line, where the bucket and then the entry
 * are two dependent reads of three lines. A flow that may not live there, or whose
 * bucket's line another flow holds, is found through the bucket as before; when the
 * line's flow goes, user space gives the line to another flow of the bucket that may hold
 * it. Seqlock as an entry's: seq odd while user space writes the line. */
#define FP_HOT_LINES FP_INDEX_BUCKETS
#define FP_HOT_USED 0x80
/* Set (by user space, under the bucket's lock) while bucket b holds no flow but the
 * line's own, if it has one: a key the line does not hold is then known absent under
 * this mask without reading the bucket line, so a mask that misses costs one line, not
 * two. Cleared before a slot that is not the line's flow is published. */
#define FP_HOT_ALONE 0x40
struct fp_hot {
	__u32 seq;               /*  0 odd while user space writes the line */
	__u16 mask_id;           /*  4 fp_flow_key.mask_id */
	__u16 slot;              /*  6 fp_stats index (the entry's) */
	__u64 w[6];              /*  8 lookup words 0, 1, 2, 3, 4 and 6 */
	__u32 version;           /* 56 fp_actions.version */
	__u16 out_port;          /* 60 fp_actions.out_port */
	__u8 out_dev;            /* 62 fp_actions.out_dev */
	__u8 flags;              /* 63 FP_HOT_USED (holds a flow) | FP_ACT_OUTPUT (else drop)
	                          *    | FP_HOT_ALONE (the bucket holds nothing else) */
};
_Static_assert(sizeof(struct fp_hot) == 64, "fp_hot size");

/* fp_stats value (per CPU). bytes: frame length as received. */
struct fp_stat {
	__u64 packets;
	__u64 bytes;
};

/* fp_inport value: which flowpath port an ingress interface is, and where its AF_XDP
 * sockets start in xsks_map (one XSKMAP serves every interface: upcalls of rx queue q of
 * this interface go to xsks_map[xsk_base + q]). */
struct fp_inport {
	__u32 port;              /* flowpath port number (the key's in_port) */
	__u16 xsk_base;          /* first xsks_map index of this interface */
	__u16 flags;             /* FP_INPORT_PRESENT (array slots exist unset) */
};
_Static_assert(sizeof(struct fp_inport) == 8, "fp_inport size");

/* fp_config[0]. */
#define FP_CFG_DEBUG 1u          /* record every packet's key and verdict in fp_debug[0] */
struct fp_config {
	__u32 version;           /* current entry version */
	__u32 n_masks;           /* masks in use, <= FP_MAX_MASKS */
	__u32 flags;             /* FP_CFG_* */
	__u16 vxlan_port;        /* host order; UDP to it goes to user space; 0: none */
	__u16 pad;
};
_Static_assert(sizeof(struct fp_config) == 16, "fp_config size");

/* Verdicts (fp_debug.reason, fp_reasons index). */
#define FP_R_HIT_OUTPUT     0  /* cached, redirected via fp_ports */
#define FP_R_HIT_DROP       1  /* cached, dropped */
#define FP_R_MISS           2  /* no entry under any mask -> xsk */
#define FP_R_STALE          3  /* entry with an old version -> xsk */
#define FP_R_UP_PARSE       4  /* flowpath's parser rejects it (malformed) -> xsk */
#define FP_R_UP_UNSUPPORTED 5  /* VXLAN, IPv6 extension headers -> xsk */
#define FP_R_UP_NO_INPORT   6  /* ingress ifindex not in fp_inport -> xsk */
#define FP_R_UP_TTL         7  /* dec_ttl at TTL <= 1 -> xsk (user space drops it) */
#define FP_R_UP_ACTION      8  /* cannot do here: output to in_port, empty fp_ports slot,
                                * push onto two tags, no headroom -> xsk */
#define FP_R_COUNT          9

/* fp_debug[0], written only with FP_CFG_DEBUG. */
struct fp_debug {
	struct fp_key key;       /* as parsed (partial when reason == FP_R_UP_PARSE) */
	__u32 reason;
	__u32 slot;              /* of the hit entry, else ~0 */
	__u32 seq;               /* bumped per record */
	__u32 pad;
};
_Static_assert(sizeof(struct fp_debug) == 120, "fp_debug size");

#endif
