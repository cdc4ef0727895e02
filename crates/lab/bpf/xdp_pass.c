/* XDP_PASS (2) on every frame: lets a veth accept XDP-transmitted frames for the stack. */
__attribute__((section("xdp"), used)) int xdp_pass(void *ctx) { return 2; }
char _license[] __attribute__((section("license"), used)) = "GPL";
