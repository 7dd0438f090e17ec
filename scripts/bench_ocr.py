"""OCR accuracy and speed on pages rendered here (docs/evaluation.md "OCR", docs/benchmarks.md).

Each page is a paragraph rendered to an image with PyMuPDF and wrapped in a PDF (the scans of
tests/scan_helpers.py), recognised by RapidOCR at each dpi. Reported per page type and dpi:
character accuracy (1 − CER, tests/scan_helpers' reference text) of RapidOCR's own text and of
ours (NFKC + word spaces from blank columns + reading order, core/ocr_text.py), and seconds
per page (render + recognise, after one warm-up page).

    PYTHONPATH=. .venv/bin/python scripts/bench_ocr.py [--dpi 150 200] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag_desktop.backends.rapid_ocr import RapidOcrEngine
from rag_desktop.backends.scan_pages import open_document, render_rgb
from rag_desktop.core.ocr_text import char_accuracy, page_text
from tests.scan_helpers import PageSpec, make_pdf

EN = ("The tenant shall keep the premises in good repair and return the keys to the landlord "
      "before the lease ends. A bicycle chain must be greased every ninety days, and the tyre "
      "pressure checked weekly. Payments are due on the first working day of each month; late "
      "payments carry interest at two percent above the base rate.")
ZH = ("为了规范数据出境活动，保护个人信息权益，维护国家安全和社会公共利益，促进数据跨境安全、自由流动，"
      "根据《中华人民共和国网络安全法》《中华人民共和国数据安全法》《中华人民共和国个人信息保护法》等法律法规，"
      "制定本办法。数据处理者向境外提供数据，应当按照本办法的规定申报数据出境安全评估。")
CASES = {
    "en-helvetica-12pt": PageSpec(EN, font="helv", size=12),
    "en-times-10pt": PageSpec(EN, font="tiro", size=10),
    "en-in-cjk-font-11pt": PageSpec(EN, font="china-s", size=11),
    "zh-songti-12pt": PageSpec(ZH, font="china-s", size=12),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dpi", type=int, nargs="+", default=[150, 200])
    ap.add_argument("--scan-dpi", type=int, default=200, help="resolution of the simulated scan")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    engine = RapidOcrEngine()
    t0 = time.perf_counter()
    engine.load()
    load_s = time.perf_counter() - t0
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        warm = make_pdf(Path(tmp) / "warm.pdf", [CASES["en-helvetica-12pt"]], dpi=args.scan_dpi)
        doc = open_document(warm)
        engine.recognise(render_rgb(doc.load_page(0), 150 / 72), 150 / 72)
        doc.close()
        for name, spec in CASES.items():
            pdf = make_pdf(Path(tmp) / f"{name}.pdf", [spec], dpi=args.scan_dpi)
            for dpi in args.dpi:
                doc = open_document(pdf)
                t, c = time.perf_counter(), time.process_time()
                img = render_rgb(doc.load_page(0), dpi / 72)
                lines = engine.recognise(img, dpi / 72)
                seconds, cpu = time.perf_counter() - t, time.process_time() - c
                raw, _ = engine._model(np.ascontiguousarray(img[:, :, ::-1]))  # RapidOCR's own text
                doc.close()
                raw_text = "\n".join(str(r[1]) for r in raw or [])
                rows.append({"page": name, "dpi": dpi, "seconds": round(seconds, 2), "cpu_s": round(cpu, 2),
                             "acc_rapidocr": round(char_accuracy(spec.text, raw_text), 4),
                             "acc_ours": round(char_accuracy(spec.text, page_text(lines)), 4),
                             "ours": page_text(lines)})
    print(f"engine load: {load_s:.2f} s; load average at end {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("| page | dpi | RapidOCR text | after core/ocr_text | wall s/page | CPU s/page |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['page']} | {r['dpi']} | {r['acc_rapidocr']:.3f} | {r['acc_ours']:.3f} | {r['seconds']:.2f} "
              f"| {r['cpu_s']:.2f} |")
    for dpi in args.dpi:
        sec = [r["seconds"] for r in rows if r["dpi"] == dpi]
        cpu = [r["cpu_s"] for r in rows if r["dpi"] == dpi]
        print(f"dpi {dpi}: {len(sec) / sum(sec):.3f} pages/s wall (mean {sum(sec) / len(sec):.2f} s/page); "
              f"{sum(cpu) / len(cpu):.2f} CPU s/page → {len(cpu) / sum(cpu) * (os.cpu_count() or 1):.2f} pages/s "
              f"on {os.cpu_count()} idle cores")
    if args.json:
        args.json.write_text(json.dumps({"load_s": load_s, "rows": rows}, ensure_ascii=False, indent=1),
                             encoding="utf-8")


if __name__ == "__main__":
    main()
