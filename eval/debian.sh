#!/usr/bin/env bash
# Sourced by the eval sets' fetch.sh: one Debian (bookworm) package downloaded at an exact version
# and unpacked. Usage: debian_unpack PACKAGE VERSION DEST  (needs apt-get and dpkg-deb; the .deb is
# left in DEST's parent, DEST holds the package's tree).
debian_unpack() {
    local pkg=$1 ver=$2 dest=$3 parent
    parent="$(dirname "$dest")"
    # chained: a caller's set -e does not reach into a $(…) that calls this
    (cd "$parent" && apt-get download "$pkg=$ver") && dpkg-deb -x "$parent/${pkg}_${ver//:/%3a}_all.deb" "$dest"
}

# The Chinese TeX documentation the sets draw their Chinese PDFs from, at the one version they pin
# (sources.json and the READMEs name it): unpacked into DEST; the folder of its PDFs is printed.
# Usage: T="$(texlive_chinese_docs DEST)"
texlive_chinese_docs() {
    debian_unpack texlive-lang-chinese 2022.20230122-1 "$1" >&2 || return
    echo "$1/usr/share/doc/texlive-doc"
}
