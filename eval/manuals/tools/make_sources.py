import json, hashlib, os, pymupdf
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PDFM = {"registry": "pypi", "package": "pdfminer.six", "version": "20181108",
        "archive": "pdfminer.six-20181108.tar.gz (sdist)", "package_license": "MIT (code); samples/nonfree/ files are NOT under the package licence"}
LC = {"registry": "pypi", "package": "langchain-chatchat", "version": "0.3.1.3",
      "archive": "langchain_chatchat-0.3.1.3-py3-none-any.whl (wheel)", "package_license": "Apache-2.0"}
TL = {"registry": "debian (bookworm, main)", "package": "texlive-lang-chinese", "version": "2022.20230122-1",
      "archive": "texlive-lang-chinese_2022.20230122-1_all.deb", "package_license": "per-part licences listed in /usr/share/doc/texlive-lang-chinese/Licenses.gz; Debian main (DFSG-free)"}
D = [
 ("en_irs_instructions_form_1040nr_2007.pdf", PDFM, "pdfminer.six-20181108/samples/nonfree/i1040nr.pdf",
  "2007 Instructions for Form 1040NR, U.S. Nonresident Alien Income Tax Return (IRS)", "en",
  "Public domain: work of the U.S. federal government (IRS), 17 U.S.C. §105"),
 ("en_copyright_office_dmca_summary_1998.pdf", PDFM, "pdfminer.six-20181108/samples/nonfree/dmca.pdf",
  "The Digital Millennium Copyright Act of 1998 — U.S. Copyright Office Summary (Dec. 1998)", "en",
  "Public domain: work of the U.S. federal government (U.S. Copyright Office), 17 U.S.C. §105"),
 ("en_paper_preemptive_information_extraction.pdf", PDFM, "pdfminer.six-20181108/samples/nonfree/naacl06-shinyama.pdf",
  "Shinyama & Sekine, Preemptive Information Extraction using Unrestricted Relation Discovery (HLT-NAACL 2006)", "en",
  "ACL Anthology paper; ACL materials published before 2016 are licensed CC BY-NC-SA 3.0 (non-commercial evaluation use)"),
 ("en_paper_langchain_llm_apps_primer.pdf", LC, "chatchat/data/knowledge_base/samples/content/test_files/langchain.pdf",
  "Topsakal & Akinci, Creating Large Language Model Applications Utilizing LangChain: A Primer on Developing LLM Apps Fast (ICAENS 2023, All Sciences Proceedings)", "en",
  "Shipped in an Apache-2.0 wheel; the paper itself states only '© 2023 Published by All Sciences Proceedings' (open-access proceedings, no explicit licence in the PDF) — the weakest licence in the set, see README"),
 ("en_fduthesis_fudan_thesis_template.pdf", TL, "usr/share/doc/texlive-doc/latex/fduthesis/fduthesis-en.pdf",
  "The fduthesis Class — LaTeX Thesis Template for Fudan University, v0.8 (English user guide)", "en", "LPPL 1.3c"),
 ("zh_texlive_guide_2020.pdf", TL, "usr/share/doc/texlive-doc/texlive/texlive-zh-cn/texlive-zh-cn.pdf",
  "TeX Live 指南—2020 (Karl Berry 编写, Chinese translation of the TeX Live Guide)", "zh",
  "TeX Live documentation (Debian main); Debian's Licenses.gz gives no per-package licence for texlive-zh-cn, covered by the TeX Live copying conditions (free redistribution)"),
 ("zh_install_latex_guide.pdf", TL, "usr/share/doc/texlive-doc/latex/install-latex-guide-zh-cn/install-latex-guide-zh-cn.pdf",
  "一份简短的关于 LaTeX 安装的介绍 (install-latex-guide-zh-cn, 2023-01-02)", "zh", "LPPL 1.3c"),
 ("zh_fduthesis_fudan_thesis_template.pdf", TL, "usr/share/doc/texlive-doc/latex/fduthesis/fduthesis.pdf",
  "fduthesis: 复旦大学论文模板 v0.8 (Chinese user guide)", "zh", "LPPL 1.3c"),
 ("zh_njurepo_nju_report_template.pdf", TL, "usr/share/doc/texlive-doc/latex/njurepo/njurepo.pdf",
  "NJUrepo: 南京大学本科生泛用报告模板 (user manual)", "zh", "LPPL 1.3c"),
 ("zh_exam_zh_exam_paper_template.pdf", TL, "usr/share/doc/texlive-doc/xelatex/exam-zh/doc/exam-zh-doc.pdf",
  "exam-zh: 高考试卷 LaTeX 模板 (user manual)", "zh", "LPPL 1.3c"),
]
out = []
for fn, pkg, path, title, lang, lic in D:
    p = os.path.join(HERE, "docs", fn)
    b = open(p, "rb").read()
    out.append({"file": fn, "title": title, "language": lang, "pages": pymupdf.open(p).page_count,
                "bytes": len(b), "sha256": hashlib.sha256(b).hexdigest(), **pkg,
                "path_in_archive": path, "license": lic})
json.dump(out, open(os.path.join(HERE, "sources.json"), "w", encoding="utf-8"), ensure_ascii=False, indent=1)
for o in out: print(o["file"], o["pages"], o["bytes"])
print(sum(o["bytes"] for o in out))
