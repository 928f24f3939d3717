#!/bin/sh
# install-cni.sh installs the standard CNI plugins (Debian's
# containernetworking-plugins: bridge, host-local, loopback, portmap, ...)
# that the container runtime attaches bridge-mode pods with. It needs root
# and does nothing when /usr/lib/cni/bridge is already there.
set -eu
if [ -x /usr/lib/cni/bridge ]; then
	echo "CNI plugins already installed: /usr/lib/cni"
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "install-cni.sh: no apt-get; install the CNI plugins (bridge, host-local, loopback, portmap) into /usr/lib/cni or /opt/cni/bin" >&2
	exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "install-cni.sh: run as root (apt-get install -y containernetworking-plugins)" >&2
	exit 1
fi
apt-get install -y containernetworking-plugins ||
	{ apt-get update && apt-get install -y containernetworking-plugins; }
ls /usr/lib/cni
