#!/bin/sh
# install-chromium.sh installs Debian's chromium, the headless browser the
# web UI's tests drive (dispatcher/server/ui). It needs root and does
# nothing when a chromium is already on the PATH.
set -eu
for b in chromium chromium-browser; do
	if command -v "$b" >/dev/null 2>&1; then
		echo "chromium already installed: $(command -v "$b")"
		exit 0
	fi
done
if ! command -v apt-get >/dev/null 2>&1; then
	echo "install-chromium.sh: no apt-get; install chromium (or set SLUICE_CHROMIUM to a chromium binary)" >&2
	exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "install-chromium.sh: run as root (apt-get install -y chromium)" >&2
	exit 1
fi
apt-get install -y chromium ||
	{ apt-get update && apt-get install -y chromium; }
command -v chromium
