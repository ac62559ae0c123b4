#!/usr/bin/env bash
# On the GPU machine (Ubuntu image, no network): unpack the Debian packages carried in .deps/
# (scripts: ../shared/device/debs.sh fetch ...) whose headers the image lacks, then ldconfig.
# A package whose key file is already present is left alone, so the image's own versions win.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
need() {  # need <key file> <deb glob>...
  local key=$1; shift
  [ -e "$key" ] && return 0
  for g in "$@"; do for f in "$ROOT"/.deps/$g; do [ -f "$f" ] && dpkg -x "$f" /; done; done
}
need /usr/include/pcre2.h 'libpcre2-*.deb'
need /usr/include/httplib.h 'libcpp-httplib*.deb'
need /usr/include/gtest/gtest.h 'libgtest-dev_*.deb' 'libgmock-dev_*.deb' 'googletest_*.deb'
need /usr/include/CLI/CLI.hpp 'libcli11-dev_*.deb'
need /usr/include/nlohmann/json.hpp 'nlohmann-json3-dev_*.deb'
need /usr/include/fmt/format.h 'libfmt-dev_*.deb' 'libfmt9_*.deb'
need /usr/include/x86_64-linux-gnu/curl/curl.h 'libcurl4-openssl-dev_*.deb'
# cpp-httplib's pkg-config file requires these (it was built with TLS, zlib and brotli).
need /usr/include/openssl/ssl.h 'libssl-dev_*.deb'
need /usr/include/zlib.h 'zlib1g-dev_*.deb'
need /usr/include/brotli/decode.h 'libbrotli-dev_*.deb'
ldconfig
