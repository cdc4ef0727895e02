// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The AF_XDP port's XDP side: redirect every frame to the XDP socket bound to the queue it
 * arrived on (falling back to the kernel stack when no socket is registered), plus a bare
 * XDP_PASS program for veth peers (see xdpgen.rs: native XDP into a veth needs one there),
 * a drop-all sink and a forward-all program (every frame to one interface, no lookup: the
 * baseline the XDP tier is measured against in `flowpath lab`). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks_map SEC(".maps");

/* Slot 0: where xdp_fwd_all sends every frame. */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} fwd_to SEC(".maps");

SEC("xdp")
int xsk_redirect(struct xdp_md *ctx)
{
	return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
}

SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("xdp")
int xdp_drop(struct xdp_md *ctx)
{
	return XDP_DROP;
}

SEC("xdp")
int xdp_fwd_all(struct xdp_md *ctx)
{
	return bpf_redirect_map(&fwd_to, 0, XDP_DROP);
}

char _license[] SEC("license") = "Dual BSD/GPL";
