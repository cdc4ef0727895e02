# Sourced by the peer set-up scripts: their messages, their start (root, apt-get), and
# installing the Debian packages that are missing.

# Messages in the name of the script that sourced this file.
ME=$(basename "$0" .sh)
say() { echo "$ME: $*"; }
die() {
    echo "$ME: $*" >&2
    exit 1
}

# Root and apt-get, or die ($1: what to install by hand without apt-get); apt quiet, with
# its temporary files on disk; the clock started ($start).
need_root_and_apt() {
    [ "$(id -u)" = 0 ] || die "needs root (it installs packages; the tests need root for network namespaces too): sudo $0"
    command -v apt-get >/dev/null 2>&1 || die "no apt-get: $1"
    export DEBIAN_FRONTEND=noninteractive
    export TMPDIR=/var/tmp
    start=$(date +%s)
}

# Each argument: "WHAT PACKAGE", where WHAT is a command (looked up on PATH, /usr/sbin and
# /sbin) or an absolute path (a glob); prints the packages whose WHAT is absent, once each.
missing_packages() {
    local line what pkg
    for line in "$@"; do
        read -r what pkg <<<"$line"
        if [[ "$what" == /* ]]; then
            compgen -G "$what" >/dev/null || echo "$pkg"
        elif ! command -v "$what" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$what" ] && [ ! -x "/sbin/$what" ]; then
            echo "$pkg"
        fi
    done | sort -u
}

# apt-get install the packages of the "WHAT PACKAGE" arguments whose WHAT is absent (none:
# nothing to do), quietly, saying which and how long it took.
install_missing() {
    local need t0
    mapfile -t need < <(missing_packages "$@")
    [ ${#need[@]} -gt 0 ] || return 0
    say "apt-get install ${need[*]}"
    t0=$(date +%s)
    apt-get update -qq
    apt-get install -y -qq "${need[@]}" >/dev/null
    say "apt-get took $(($(date +%s) - t0)) s"
}
