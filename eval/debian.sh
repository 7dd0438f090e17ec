#!/usr/bin/env bash
# Sourced by the eval sets' fetch.sh: one Debian (bookworm) package downloaded at an exact version
# and unpacked. Usage: debian_unpack PACKAGE VERSION DEST  (needs apt-get and dpkg-deb; the .deb is
# left in DEST's parent, DEST holds the package's tree).
debian_unpack() {
    local pkg=$1 ver=$2 dest=$3 parent
    parent="$(dirname "$dest")"
    (cd "$parent" && apt-get download "$pkg=$ver")
    dpkg-deb -x "$parent/${pkg}_${ver//:/%3a}_all.deb" "$dest"
}
