#!/bin/sh
# Installs etcd 3.4 from Debian (the anchor of "sluice bench raftkv") unless
# an etcd binary is already on PATH.
set -eu
if command -v etcd >/dev/null 2>&1; then
	exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q etcd-server
