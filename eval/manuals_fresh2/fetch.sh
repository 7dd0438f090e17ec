#!/usr/bin/env bash
# Re-create docs/ from the Debian package archive (bookworm) and check sha256.
# Usage: bash fetch.sh [PIP]   (same convention as eval/manuals/fetch.sh; PIP is accepted and unused:
# every document of this set comes from Debian. Needs apt-get and dpkg-deb on a Debian/Ubuntu host
# whose apt sources include Debian 12 "bookworm" main.)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
TMP="$(mktemp -d)"; trap 'rm -rf "$TMP"' EXIT
mkdir -p "$HERE/docs"
# shellcheck source=../debian.sh
source "$HERE/../debian.sh"

# --- Debian (bookworm) texlive-lang-chinese: the five Chinese documents ---
T="$(texlive_chinese_docs "$TMP/tlc")"
cp "$T/latex/lshort-chinese/lshort-zh-cn.pdf"               "$HERE/docs/zh_lshort_latex_intro.pdf"
cp "$T/generic/latex-notes-zh-cn/latex-notes-zh-cn.pdf"     "$HERE/docs/zh_latex_notes.pdf"
cp "$T/latex/xpinyin/xpinyin.pdf"                           "$HERE/docs/zh_xpinyin_pinyin.pdf"
cp "$T/xelatex/hanzibox/hanzibox.pdf"                       "$HERE/docs/zh_hanzibox_tianzige.pdf"
cp "$T/latex/zhlipsum/zhlipsum.pdf"                         "$HERE/docs/zh_zhlipsum_dummy_text.pdf"

# --- Debian (bookworm) r-doc-pdf: the R Data Import/Export manual ---
debian_unpack r-doc-pdf 4.2.2.20221110-2 "$TMP/r"
cp "$TMP/r/usr/share/R/doc/manual/R-data.pdf"               "$HERE/docs/en_r_data_import_export.pdf"

# --- Debian (bookworm) pari-doc: PARI/GP installation guide and parallel GP introduction ---
debian_unpack pari-doc 2.15.2-1 "$TMP/pari"
cp "$TMP/pari/usr/share/pari/doc/INSTALL.pdf"               "$HERE/docs/en_pari_gp_install_unix.pdf"
cp "$TMP/pari/usr/share/pari/doc/parallel.pdf"              "$HERE/docs/en_pari_gp_parallel.pdf"

# --- check ---
cd "$HERE/docs" && sha256sum -c "$HERE/SHA256SUMS"
