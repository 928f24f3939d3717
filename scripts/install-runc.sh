#!/bin/sh
# install-runc.sh installs the runc CLI (Debian's runc package), the anchor
# `sluice bench podstart` measures pod starts against. It needs root and
# does nothing when runc is already on PATH.
set -eu
if command -v runc >/dev/null 2>&1; then
	echo "runc already installed: $(command -v runc)"
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "install-runc.sh: no apt-get; install runc with your package manager" >&2
	exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "install-runc.sh: run as root (apt-get install -y runc)" >&2
	exit 1
fi
apt-get install -y runc || { apt-get update && apt-get install -y runc; }
runc --version
