//! The XDP side of the AF_XDP port: loading the redirect-to-socket program, attaching it to
//! an interface (native or generic), the XSKMAP, and detaching on drop.
//! (stub: helper fills in)
