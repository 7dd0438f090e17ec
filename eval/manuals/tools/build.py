"""Write questions.jsonl, tune/ and heldout/ from questions_src.py, then run the sanity check.
Run: python tools/build.py   (needs pymupdf for the check)."""
import json, os, re, sys
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(HERE, "tools"))
from questions_src import Q

rows, count = [], {"zh": 0, "en": 0}
for lang, doc, q, ans, where in Q:
    count[lang] += 1
    n = count[lang]
    rows.append({"_id": f"manuals-{lang}-{n:02d}", "question": q, "answers": ans, "lang": lang,
                 "document": doc, "where": where, "split": "heldout" if n % 3 == 0 else "tune"})

def dump(path, rs):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for r in rs:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")

dump(os.path.join(HERE, "questions.jsonl"), rows)
for split in ("tune", "heldout"):
    dump(os.path.join(HERE, split, "questions.jsonl"), [r for r in rows if r["split"] == split])
    link = os.path.join(HERE, split, "docs")
    if not os.path.islink(link):
        os.symlink("../docs", link)

# ---- sanity check ----
import pymupdf
ws = lambda s: re.sub(r"\s+", " ", s).strip()
texts, ok = {}, True
for r in rows:
    p = os.path.join(HERE, "docs", r["document"])
    if not os.path.exists(p):
        print("MISSING DOC", r["_id"], r["document"]); ok = False; continue
    if r["document"][:3] != r["lang"] + "_":
        print("LANG MISMATCH", r["_id"]); ok = False
    if (r["lang"] == "zh") != bool(re.search(r"[\u4e00-\u9fff]", r["question"])):
        print("QUESTION LANG?", r["_id"]); ok = False
    if r["document"] not in texts:
        d = pymupdf.open(p)
        texts[r["document"]] = [ws(pg.get_text()) for pg in d]
    pages = texts[r["document"]]
    full = ws(" ".join(pages))
    m = re.search(r"p\. (\d+)", r["where"]); pg = int(m.group(1)) if m else None
    for a in r["answers"]:
        a2 = ws(a)
        if a2 not in full:
            print("GOLD NOT IN DOC", r["_id"], repr(a)); ok = False
        elif pg and a2 not in pages[pg - 1]:
            print("GOLD NOT ON CITED PAGE", r["_id"], repr(a), "cited p.", pg,
                  "found on", [i + 1 for i, t in enumerate(pages) if a2 in t]); ok = False
n = {(l, s): sum(1 for r in rows if r["lang"] == l and r["split"] == s) for l in ("zh", "en") for s in ("tune", "heldout")}
print("questions:", len(rows), n)
print("SANITY", "OK" if ok else "FAILED")
sys.exit(0 if ok else 1)
