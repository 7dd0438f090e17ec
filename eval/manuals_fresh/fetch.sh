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

# --- Debian (bookworm) texlive-lang-chinese: Chinese documents + two English ones ---
T="$(texlive_chinese_docs "$TMP/tlc")"
cp "$T/support/tlmgr-intro-zh-cn/tlmgr-intro-zh-cn.pdf"            "$HERE/docs/zh_tlmgr_intro.pdf"
cp "$T/latex/zhlineskip/zhlineskip.pdf"                           "$HERE/docs/zh_zhlineskip_line_spacing.pdf"
cp "$T/latex/qyxf-book/qyxf-book-doc.pdf"                         "$HERE/docs/zh_qyxf_book_template.pdf"
cp "$T/support/asymptote-faq-zh-cn/asymptote-faq-zh-cn.pdf"       "$HERE/docs/zh_asymptote_faq.pdf"
cp "$T/support/asymptote-manual-zh-cn/asymptote-manual-zh-cn.pdf" "$HERE/docs/zh_asymptote_manual.pdf"
cp "$T/generic/zhspacing/zhs-man.pdf"                             "$HERE/docs/en_zhspacing_xetex_chinese.pdf"
cp "$T/xelatex/nanicolle/nanicolle-doc-en.pdf"                    "$HERE/docs/en_nanicolle_herbarium_labels.pdf"

# --- Debian (bookworm) python-reportlab-doc: the ReportLab user guide ---
debian_unpack python-reportlab-doc 3.6.12-1+deb12u1 "$TMP/rl"
cp "$TMP/rl/usr/share/doc/python-reportlab-doc/reportlab-userguide.pdf" "$HERE/docs/en_reportlab_user_guide.pdf"

# --- check ---
cd "$HERE/docs" && sha256sum -c "$HERE/SHA256SUMS"
