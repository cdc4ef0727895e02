/* The lab's counting sink: drop every frame in XDP (1 = XDP_DROP); the veth counts it. */
__attribute__((section("xdp"), used)) int xdp_sink(void *ctx) { return 1; }
char _license[] __attribute__((section("license"), used)) = "GPL";
