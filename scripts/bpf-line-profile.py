#!/usr/bin/env python3
"""Where a JITed BPF program's time goes, by source line and by instruction.

    perf record -e cpu-clock -F 20000 -a -o perf.data -- sleep 8   # while the program runs
    scripts/bpf-line-profile.py flow_tier perf.data [--asm annotated.txt]

Root; the program must still be loaded. It reads the program's JIT image, line info and
BTF strings with BPF_OBJ_GET_INFO_BY_FD (this machine's bpftool has no libbfd, so
`bpftool prog dump jited` cannot), attributes perf's samples inside the image to the source
line each JIT offset came from, and prints the lines by share of samples. With --asm it
also writes the disassembly (objdump) with each instruction's share and source line.
When several programs have the name, the last loaded is taken. A developer's tool: no
test or CI step runs it."""
import bisect, collections, ctypes, json, struct, subprocess, sys

NR_BPF = 321  # x86-64
PROG_GET_FD_BY_ID, OBJ_GET_INFO_BY_FD, BTF_GET_FD_BY_ID = 13, 15, 19
libc = ctypes.CDLL(None, use_errno=True)


def bpf(cmd, attr):
    r = libc.syscall(NR_BPF, cmd, ctypes.create_string_buffer(attr, 128), 128)
    if r < 0:
        raise OSError(ctypes.get_errno(), "bpf command %d" % cmd)
    return r


def info(fd, blob):
    b = ctypes.create_string_buffer(bytes(blob), len(blob))
    attr = struct.pack("<IIQ", fd, len(blob), ctypes.addressof(b))
    if libc.syscall(NR_BPF, OBJ_GET_INFO_BY_FD, ctypes.create_string_buffer(attr, 128), 128) < 0:
        raise OSError(ctypes.get_errno(), "BPF_OBJ_GET_INFO_BY_FD")
    return b.raw


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    name, data = sys.argv[1], sys.argv[2]
    asm_out = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--asm" else None
    progs = [p for p in json.loads(subprocess.check_output(["bpftool", "-j", "prog", "show"]))
             if p.get("name") == name]
    if not progs:
        sys.exit("no loaded program named %s" % name)
    fd = bpf(PROG_GET_FD_BY_ID, struct.pack("<III", progs[-1]["id"], 0, 0))
    # struct bpf_prog_info offsets: jited_prog_len 16, jited_prog_insns 24,
    # nr_jited_ksyms 104, jited_ksyms 112, btf_id 128, nr_line_info 148, line_info 152,
    # jited_line_info 160, nr_jited_line_info 168, line_info_rec_size 172,
    # jited_line_info_rec_size 176.
    first = info(fd, bytearray(232))
    (jlen,) = struct.unpack_from("<I", first, 16)
    (btf_id,) = struct.unpack_from("<I", first, 128)
    (nli,) = struct.unpack_from("<I", first, 148)
    (njli,) = struct.unpack_from("<I", first, 168)
    image, lines_buf = ctypes.create_string_buffer(jlen), ctypes.create_string_buffer(nli * 16)
    jlines, ksym = ctypes.create_string_buffer(njli * 8), ctypes.create_string_buffer(8)
    blob = bytearray(232)
    struct.pack_into("<IxxxxQ", blob, 16, jlen, ctypes.addressof(image))
    struct.pack_into("<I", blob, 104, 1)
    struct.pack_into("<Q", blob, 112, ctypes.addressof(ksym))
    struct.pack_into("<IQQ", blob, 148, nli, ctypes.addressof(lines_buf), ctypes.addressof(jlines))
    struct.pack_into("<III", blob, 168, njli, 16, 8)
    info(fd, blob)
    (start,) = struct.unpack_from("<Q", ksym.raw)
    # The line texts live in the program's BTF string section.
    bfd = bpf(BTF_GET_FD_BY_ID, struct.pack("<I", btf_id))
    (bsz,) = struct.unpack_from("<I", info(bfd, bytearray(32)), 8)
    btf_buf = ctypes.create_string_buffer(bsz)
    blob = bytearray(32)
    struct.pack_into("<QI", blob, 0, ctypes.addressof(btf_buf), bsz)
    info(bfd, blob)
    btf = btf_buf.raw
    (hdr_len,) = struct.unpack_from("<I", btf, 4)
    str_off, str_len = struct.unpack_from("<II", btf, 16)
    strs = btf[hdr_len + str_off:hdr_len + str_off + str_len]
    lines = []
    for i in range(nli):
        _insn, _file, line_off, line_col = struct.unpack_from("<IIII", lines_buf.raw, i * 16)
        (addr,) = struct.unpack_from("<Q", jlines.raw, i * 8)
        text = strs[line_off:strs.index(b"\0", line_off)].decode(errors="replace").strip()
        lines.append((addr - start, line_col >> 10, text))
    lines.sort()
    starts = [a for a, _, _ in lines]

    def line_of(off):
        i = bisect.bisect_right(starts, off) - 1
        return lines[i][1:] if i >= 0 else (0, "?")

    script = subprocess.check_output(["perf", "script", "-i", data, "-F", "ip"],
                                     stderr=subprocess.DEVNULL).decode()
    at = collections.Counter()
    for l in script.split():
        ip = int(l, 16)
        if start <= ip < start + jlen:
            at[ip - start] += 1
    total = sum(at.values())
    if not total:
        sys.exit("no samples inside %s's image" % name)
    by_line = collections.Counter()
    for off, n in at.items():
        by_line[line_of(off)] += n
    if asm_out:
        raw = "/tmp/%s.jit.bin" % name
        open(raw, "wb").write(image.raw)
        dis = subprocess.check_output(["objdump", "-D", "-b", "binary", "-mi386:x86-64", raw]).decode()
        with open(asm_out, "w") as f:
            for l in dis.splitlines():
                head, _, ins = l.partition(":")
                try:
                    off = int(head.strip(), 16)
                except ValueError:
                    continue
                f.write("%5x %6.2f%% L%-4s %s\n" % (off, 100 * at.get(off, 0) / total,
                                                    line_of(off)[0], ins.strip()))
    print("%d samples in %s (%d bytes of JIT code)" % (total, name, jlen))
    for (ln, text), n in by_line.most_common(40):
        print("%6.2f%%  %5d  %s" % (100 * n / total, ln, text[:90]))


main()
