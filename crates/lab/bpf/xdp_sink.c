/* The lab's counting sink: drop every frame in XDP (the veth counts it), and count the
 * frames that are VXLAN over IPv4 (UDP destination port 4789, no IP options) in the
 * per-CPU array `sink_vxlan`, so that the lab can tell encapsulated frames arrived. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u64);
} sink_vxlan SEC(".maps");

SEC("xdp")
int xdp_sink(struct xdp_md *ctx)
{
    void *data = (void *)(long)ctx->data;
    void *end = (void *)(long)ctx->data_end;
    struct ethhdr *eth = data;
    if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
        return XDP_DROP;
    struct iphdr *ip = (void *)(eth + 1);
    if ((void *)(ip + 1) > end || ip->protocol != 17 || ip->ihl != 5)
        return XDP_DROP;
    struct udphdr *udp = (void *)(ip + 1);
    if ((void *)(udp + 1) > end || udp->dest != bpf_htons(4789))
        return XDP_DROP;
    __u32 k = 0;
    __u64 *n = bpf_map_lookup_elem(&sink_vxlan, &k);
    if (n)
        *n += 1;
    return XDP_DROP;
}

char _license[] SEC("license") = "GPL";
