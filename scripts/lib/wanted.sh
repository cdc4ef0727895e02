# Sourced by the peer set-up scripts: which Debian packages are missing, and installing them.

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

# apt-get install the packages given (nothing to do without any), quietly.
apt_install() {
    [ $# -gt 0 ] || return 0
    apt-get update -qq
    apt-get install -y -qq "$@" >/dev/null
}
