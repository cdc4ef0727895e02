#!/usr/bin/env bash
# Install the real OpenFlow 1.3 clients that crates/flowpath/tests/openflow_{clients,controllers}.rs drive
# (Debian/Ubuntu, as root), from nothing:
#   1. from the distribution: Open vSwitch (ovs-ofctl for the tests; ovs-vswitchd is the
#      reference switch, FLOWPATH_OPENFLOW_PEER=ovs), ping, iproute2 (ip, ss), python3-venv;
#   2. from PyPI, into a virtual environment ($FLOWPATH_OPENFLOW_VENV, default
#      /opt/flowpath-venv; the system's pip refuses system-wide installs, PEP 668): Faucet and
#      os-ken (Faucet pins the os-ken it runs on; osken-manager runs the tests' learning app);
#   3. print the versions.
# Idempotent: what is already there is left alone. Then, as root:
#   FLOWPATH_OPENFLOW_REQUIRED=1 cargo test -p flowpath --test openflow_clients --test openflow_controllers
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/wanted.sh
VENV=${FLOWPATH_OPENFLOW_VENV:-/opt/flowpath-venv}

need_root_and_apt "install Open vSwitch, ping, iproute2 and python3-venv by hand, then: python3 -m venv $VENV && $VENV/bin/pip install faucet os-ken"

# Each line: a command or file that says the package is there, then the package.
wanted=(
    "ovs-vswitchd openvswitch-switch"
    "ovs-ofctl openvswitch-common"
    "ping iputils-ping"
    "ss iproute2"
    "ip iproute2"
    "/usr/lib/python3*/venv/__init__.py python3-venv"
    "/usr/lib/python3*/ensurepip/__init__.py python3-venv"
)
install_missing "${wanted[@]}"

# The distribution's python3 (not a pyenv shim that a machine may or may not have): the
# venv must outlive whatever the shell's PATH says.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || die "no python3"
if ! "$VENV/bin/python" -c 'import faucet, os_ken' 2>/dev/null; then
    say "PyPI: faucet and os-ken into $VENV"
    t0=$(date +%s)
    [ -x "$VENV/bin/pip" ] || "$PY" -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check faucet os-ken
    say "pip took $(($(date +%s) - t0)) s"
fi

ver() { "$VENV/bin/python" -c "import importlib.metadata as m; print(m.version('$1'))"; }
say "versions:"
echo "  $(ovs-vswitchd --version | head -n1)"
echo "  $(ovs-ofctl --version | head -n1)"
echo "  faucet $(ver faucet), os-ken $(ver os-ken) ($VENV, $("$VENV/bin/python" --version))"
echo "  $(ping -V 2>&1 | head -n1)"
say "done in $(($(date +%s) - start)) s"
