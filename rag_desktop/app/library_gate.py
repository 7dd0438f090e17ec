"""The library's calibration gate: when it runs, where its record lives, and when that record holds.

Paper 000 §4.6 decides per corpus whether re-ranking helps: Δ = mean(re-ranked − baseline) of a
per-probe metric on a labelled probe set, enable iff Δ > 0, reliability by bootstrap
(``core.gate.calibrate``). How the app runs it (docs/architecture.md, "The calibration gate"):

* **When.** At the end of an ingest that asks for it (the CLI's ``ingest``, the app's Add folder,
  rescan and folder watcher; ``RagService.ingest``), in the same process and with no generator:
  ``app.self_gate.self_calibrate`` reads the library's stored keyword sets for documents that echo
  another's key terms (a fraction of a second at 3,000 documents). A cancelled ingest does not run
  it; a failure is logged and stores nothing (:func:`run_gate`).
* **Where.** The catalog's meta ``gate`` (:data:`GATE_KEY`) holds ``GateRecord.to_json()``. A
  person's labelled calibration (the wizard, ``calibrate --probes-file``: app.calibration) is
  stored there in the same shape; its ``labels`` tell the two apart (:func:`by_person`).
* **When it holds.** A record holds while the library's content :func:`fingerprint` equals the one
  stored with it (:func:`holds`). An ingest leaves a record that holds alone — a person's labels
  included —, and replaces one that does not. A question asked while the stored record does not
  hold (a cancelled or ``--no-calibrate`` ingest, a failed gate) runs the gate once for that
  fingerprint (:meth:`LibraryGate.record`): it costs a fraction of a second and no model.
"""

from __future__ import annotations

import hashlib
import logging
import math
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from rag_desktop.app.catalog import Catalog
from rag_desktop.app.self_gate import SELF_LABELS, GateRecord, echo_count, self_calibrate
from rag_desktop.core.gate import DECISIONS
from rag_desktop.core.settings import RetrievalSettings
from rag_desktop.core.types import Progress

if TYPE_CHECKING:  # annotations only
    from rag_desktop.app.retrieval import Retriever

log = logging.getLogger(__name__)

GATE_KEY = "gate"  # catalog meta: the one stored gate record, the library's own or a person's
# How a person's labels were stored before records carried ``labels`` (app.calibration.store_decision).
PERSON_LABELS = "typed or wizard"


def fingerprint(catalog: Catalog) -> str:
    """The library's content: sha256 over the sorted content hashes of its documents.

    Equal fingerprints mean the same documents by content, whatever their paths, names or times;
    any added, removed or edited document changes it."""
    h = hashlib.sha256()
    for sha in sorted(d.sha256 for d in catalog.documents()):
        h.update(sha.encode("ascii"))
        h.update(b"\n")
    return h.hexdigest()


def stored(catalog: Catalog) -> dict[str, Any] | None:
    """The stored gate record (a mapping of GateRecord's fields), or None."""
    rec = catalog.get_json(GATE_KEY)
    return rec if isinstance(rec, dict) and rec else None


def by_person(record: Mapping[str, Any]) -> bool:
    """True when a person labelled the record's probes (the wizard, typed probes), False for the library's own."""
    return record.get("labels", PERSON_LABELS) != SELF_LABELS


def holds(record: Mapping[str, Any] | None, fp: str, *, changed: bool = False) -> bool:
    """Whether ``record`` still describes the library whose fingerprint is ``fp``.

    A record from before records carried a fingerprint has none: when a person labelled it, it
    holds until an ingest ``changed`` the library (it cannot be compared, and a person's labels
    are worth more than a guess). A list of hashes is the removed model-judged gate's, whose
    labels came from the rankings it judged: it never holds."""
    if not record:
        return False
    fp_then = record.get("fingerprint")
    if isinstance(fp_then, str):
        return fp_then == fp
    return fp_then is None and by_person(record) and not changed


def run_gate(retriever: Callable[[], Retriever], catalog: Catalog, fp: str) -> GateRecord | None:
    """The library's own gate, stored under :data:`GATE_KEY`; None when the library is empty or the
    gate failed (logged, nothing stored). Never raises: an ingest or a question must not fail for it."""
    try:
        record = self_calibrate(retriever(), fp)
    except Exception:  # any failure of the gate: the caller goes on without a record
        log.warning("the calibration gate failed; nothing stored", exc_info=True)
        return None
    if record is None:
        log.info("the calibration gate found no document in this library; nothing stored")
        return None
    try:
        with catalog.transaction():
            catalog.set_json(GATE_KEY, record.to_json())
    except sqlite3.Error as exc:  # a library opened read-only: the record still decides in this process
        log.warning("could not store the calibration gate's record: %s", exc)
    return record


class LibraryGate:
    """The gate of one open library (``RagService.library_gate``): the step at the end of an ingest, and
    the record the verdict reads. ``retriever`` and ``retrieval`` are read at each use (an ingest
    or a settings change replaces them)."""

    def __init__(self, catalog: Catalog, retriever: Callable[[], Retriever],
                 retrieval: Callable[[], RetrievalSettings]) -> None:
        self.catalog = catalog
        self.retriever = retriever
        self.retrieval = retrieval
        self._tried: tuple[str, dict[str, Any] | None] | None = None  # (fingerprint, record) of record()'s run

    def after_ingest(self, changed: bool) -> Iterator[Progress]:
        """The library's own gate at the end of an ingest (``changed``: it added, updated or removed
        a document), unless the stored record still holds: a Progress before and after."""
        fp = fingerprint(self.catalog)
        if holds(stored(self.catalog), fp, changed=changed):
            return
        yield Progress("gate", 0, 1, "checking whether re-ranking helps this library…")
        rec = run_gate(self.retriever, self.catalog, fp)
        self._tried = None
        yield Progress("gate", 1, 1, describe(None if rec is None else rec.to_json()))

    def record(self) -> dict[str, Any] | None:
        """The record the verdict reads: the stored one while it holds for the library; else, when
        the answers follow the gate (``retrieval.default_method = "gated"``), the library's own gate
        run once for this fingerprint; else None ("not calibrated")."""
        fp = fingerprint(self.catalog)
        rec = stored(self.catalog)
        if holds(rec, fp):
            return rec
        if self._tried is not None and self._tried[0] == fp:
            return self._tried[1]  # tried already: its record, or None for an empty library
        if self.retrieval().default_method != "gated":
            return None
        new = run_gate(self.retriever, self.catalog, fp)
        self._tried = (fp, None if new is None else new.to_json())
        return self._tried[1]


def describe(record: Mapping[str, Any] | None) -> str:
    """One line for progress and logs: the decision, its evidence and reliability."""
    if not record:
        return "no decision stored"
    rel = f"{float(record.get('reliability') or 0.0):.0%} reliable"
    k = echo_count(record)
    if k is not None:
        return f"{record.get('decision')} ({k} of {record.get('n_probes')} documents echo another's key terms, {rel})"
    return f"{record.get('decision')} ({record.get('n_probes')} probes, {rel})"


def read_record(data: object) -> GateRecord | None:
    """A stored record as a GateRecord, or None when it is not one. Records from before a field
    existed get its empty value (no fingerprint, no time, a person's labels)."""
    if not isinstance(data, Mapping) or data.get("decision") not in DECISIONS:
        return None

    def num(key: str) -> float:
        v = data.get(key, 0.0)
        ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        return float(v) if ok else math.nan

    n = data.get("n_probes")
    fp = data.get("fingerprint")
    v = {k: num(k) for k in ("mean_baseline", "mean_causal", "mean_hybrid", "delta_causal", "delta_hybrid",
                             "reliability", "seconds")}
    if not isinstance(n, int) or isinstance(n, bool) or any(math.isnan(x) for x in v.values()):
        return None
    share, thr = data.get("echo_share"), data.get("echo_threshold")
    echoes = [x for x in data.get("echoes") or [] if isinstance(x, list | tuple) and len(x) == 3]
    return GateRecord(decision=data["decision"], metric=str(data.get("metric", "")), n_probes=n,
                      mean_baseline=v["mean_baseline"], mean_causal=v["mean_causal"], mean_hybrid=v["mean_hybrid"],
                      delta_causal=v["delta_causal"], delta_hybrid=v["delta_hybrid"], reliability=v["reliability"],
                      labels=str(data.get("labels", PERSON_LABELS)), fingerprint=fp if isinstance(fp, str) else "",
                      seconds=v["seconds"], calibrated_at=str(data.get("calibrated_at", "")),
                      echo_share=float(share) if isinstance(share, int | float) else None,
                      echo_threshold=float(thr) if isinstance(thr, int | float) else None,
                      echoes=tuple((int(e), int(d), float(c)) for e, d, c in echoes
                                   if isinstance(e, int) and isinstance(d, int) and isinstance(c, int | float)))
