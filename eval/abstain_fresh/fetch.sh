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

# --- PyPI: scikit-learn 1.5.2 wheel, dataset descriptions (sklearn/datasets/descr/*.rst) ---
# The .rst files are the same in every platform's wheel; the platform is pinned so the file name is fixed.
$PIP download --no-deps --only-binary :all: --platform manylinux_2_17_x86_64 --python-version 3.11 \
    "scikit-learn==1.5.2" -d "$TMP/pypi"
(cd "$TMP" && python3 -m zipfile -e \
    pypi/scikit_learn-1.5.2-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl wheel >/dev/null)
D="$TMP/wheel/sklearn/datasets/descr"
cp "$D/iris.rst"               "$HERE/docs/en_sklearn_iris_dataset.txt"
cp "$D/breast_cancer.rst"      "$HERE/docs/en_sklearn_breast_cancer_dataset.txt"
cp "$D/california_housing.rst" "$HERE/docs/en_sklearn_california_housing_dataset.txt"
cp "$D/wine_data.rst"          "$HERE/docs/en_sklearn_wine_dataset.txt"
cp "$D/olivetti_faces.rst"     "$HERE/docs/en_sklearn_olivetti_faces_dataset.txt"
cp "$D/digits.rst"             "$HERE/docs/en_sklearn_digits_dataset.txt"

# --- Debian (bookworm) texlive-lang-chinese ---
T="$(texlive_chinese_docs "$TMP/deb")"
cp "$T/latex/ctex-faq/ctex-faq.pdf"         "$HERE/docs/zh_ctex_faq.pdf"
cp "$T/latex/zhnumber/zhnumber.pdf"         "$HERE/docs/zh_zhnumber_chinese_numerals.pdf"
cp "$T/latex/texproposal/texproposal.pdf"   "$HERE/docs/zh_texproposal_cqu_tex_courses.pdf"

# --- check ---
cd "$HERE/docs" && sha256sum -c "$HERE/SHA256SUMS"
