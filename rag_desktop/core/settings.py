"""Every parameter of both papers, with the papers' defaults, as frozen dataclasses.

Each setting is declared once: its type (a ``Literal`` lists the choices, in the order the
Settings dialog offers them), its default, and a :class:`Spec` in the field's metadata with
its range, step, i18n keys and what 0 means. :func:`validate_section` is the one validator
(``Settings.validate`` calls it for every section, and so the TOML loader in
``rag_desktop.app.config``), and ``ui/settings_dialog.py`` builds its widgets from the same
specs, so the dialog's ranges cannot drift from what is accepted.

Loading/saving TOML lives in ``rag_desktop.app.config``; this module only knows
the values and how to validate them, so ``core`` stays free of I/O.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

# The choices of a setting are the Literal of the module that owns the idea (one declaration;
# the dialog lists them in that order).
from rag_desktop.core.causal import EmptyBRule, ScoreVariant
from rag_desktop.core.errors import ErrorKind, RagError
from rag_desktop.core.keywords import KeywordVariant
from rag_desktop.core.types import Level

UILanguage = Literal["en", "zh"]  # the languages the UI is translated into (ui/i18n.py)
SynthesisPrompt = Literal["ranked", "evidence", "reread"]  # cfrag.synthesis_prompt
JudgeMode = Literal["off", "warn", "abstain"]  # generation.judge_passages


class SettingsError(RagError, ValueError):
    """An invalid setting; the message names the key, e.g. ``retrieval.k``."""

    kind = ErrorKind.SETTINGS


@dataclass(frozen=True)
class Spec:
    """What a setting accepts and how it is presented; the field's type gives the rest.

    ``min``/``max`` are inclusive unless ``min_open``/``max_open`` (``> 0`` rather than
    ``>= 0``); ``None`` is unbounded. ``less_than``/``at_least`` name a field of the same
    section the value is compared with; fields sharing a ``sums_to_one`` group must add up
    to 1. ``noun`` and ``zero_means`` only shape the error message ("must be a cosine in
    [-1, 1]", "must be >= 0 (0: no limit)"). ``label_key``/``help_key`` are i18n keys
    (default ``set.<section>.<key>`` and ``….tip``); ``zero_label_key`` is what a spin box
    shows instead of 0. ``path`` marks a text setting as a file or folder path.
    """

    min: float | None = None
    max: float | None = None
    min_open: bool = False
    max_open: bool = False
    less_than: str = ""
    at_least: str = ""
    sums_to_one: str = ""
    noun: str = ""
    zero_means: str = ""
    unit: str = ""
    step: float | None = None  # None: 1 for whole numbers, 0.05 otherwise
    decimals: int = 2
    path: Literal["", "file", "dir"] = ""
    label_key: str = ""
    help_key: str = ""
    zero_label_key: str = ""


NO_SPEC = Spec()
_T = TypeVar("_T")


def field_spec(
    default: _T,
    *,
    min: float | None = None,
    max: float | None = None,
    min_open: bool = False,
    max_open: bool = False,
    less_than: str = "",
    at_least: str = "",
    sums_to_one: str = "",
    noun: str = "",
    zero_means: str = "",
    unit: str = "",
    step: float | None = None,
    decimals: int = 2,
    path: Literal["", "file", "dir"] = "",
    label_key: str = "",
    help_key: str = "",
    zero_label_key: str = "",
) -> _T:
    """A dataclass field with ``default`` and a :class:`Spec` in its metadata."""
    spec = Spec(min=min, max=max, min_open=min_open, max_open=max_open, less_than=less_than, at_least=at_least,
                sums_to_one=sums_to_one, noun=noun, zero_means=zero_means, unit=unit, step=step, decimals=decimals,
                path=path, label_key=label_key, help_key=help_key, zero_label_key=zero_label_key)
    return field(default=default, metadata={"spec": spec})


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


@dataclass(frozen=True)
class ModelSettings:
    # "embedded" = the packaged defaults; anything else is a path to a GGUF file
    # (generator) or a local model folder (embedder / reranker).
    generator: str = field_spec("embedded", path="file")
    embedder: str = field_spec("embedded", path="dir")
    reranker: str = field_spec("", path="dir")  # empty: no cross-encoder; the substitute is labelled in the UI
    model_dir: str = field_spec("", path="dir")  # empty: the platform's user data folder / models
    # Generator backend: "llama_cpp" (in-process) or "openai" (an OpenAI-compatible server).
    generator_backend: Literal["llama_cpp", "openai"] = "llama_cpp"
    openai_base_url: str = "http://127.0.0.1:8080/v1"
    openai_model: str = "local"
    openai_timeout_s: float = 120.0
    # Embedder backend: "local" (models.embedder, in-process) or "openai" (an OpenAI-compatible
    # /v1/embeddings server: llama.cpp --embedding, vLLM, TEI). Texts go out in batches of
    # ingest.embed_batch_size; timeouts and HTTP 429/5xx are retried embed_retries times.
    embedder_backend: Literal["local", "openai"] = "local"
    embed_base_url: str = "http://127.0.0.1:8081/v1"
    embed_model: str = "local"
    embed_timeout_s: float = field_spec(60.0, min=0, min_open=True, unit="s")
    embed_retries: int = field_spec(3, min=0)
    # Prepended for instruction-trained encoders (e5: "query: " / "passage: "); terms take the query one.
    embed_query_prefix: str = ""
    embed_passage_prefix: str = ""
    # A cross-encoder behind TEI's POST <reranker_url>/rerank; empty: models.reranker (a local folder) if set.
    reranker_url: str = ""
    reranker_timeout_s: float = field_spec(60.0, min=0, min_open=True, unit="s")
    n_ctx: int = field_spec(8192, min=512, unit="tokens")
    n_gpu_layers: int = 0
    # 0: automatic (llama.cpp one thread per physical core; the embedder and FAISS their own default).
    # The backends refuse a negative count, so the schema does too.
    threads: int = field_spec(0, min=0, zero_means="automatic", zero_label_key="settings.threads_auto")


@dataclass(frozen=True)
class IngestSettings:
    # Paper 000 §4.1: chunks of 4,096 characters with 512 overlap.
    chunk_size: int = field_spec(4096, min=64, unit="characters")
    chunk_overlap: int = field_spec(512, min=0, less_than="chunk_size")
    keywords_per_chunk: int = field_spec(15, min=1)
    embed_batch_size: int = field_spec(16, min=1)
    # Flat index up to this many vectors; IVF above (docs/architecture.md).
    flat_index_max: int = 200_000
    # OCR (RapidOCR, offline) for PDF pages without a usable text layer and .png/.jpg/.tif files;
    # pages are rendered at ocr_dpi (docs/evaluation.md "OCR": accuracy and pages/s by dpi).
    ocr: bool = True
    ocr_dpi: int = field_spec(150, min=72, max=600, unit="dpi")
    # While the app runs, re-ingest the library's folders when files in them change (app/watcher.py);
    # watch_poll_s > 0 polls every that many seconds instead (network drives deliver no events).
    watch: bool = True
    watch_debounce_s: float = field_spec(2.0, min=0, min_open=True, unit="s")
    watch_poll_s: float = field_spec(0.0, min=0, unit="s", zero_means="the OS's change events")
    # Files larger than this are skipped with a reason (0: no limit). A 50 MB text file is
    # ~15,000 chunks, over two hours of embedding on a laptop CPU.
    max_file_mb: float = field_spec(100.0, min=0, unit="MB", zero_means="no limit")


@dataclass(frozen=True)
class RetrievalSettings:
    level: Level = "doc"
    k: int = field_spec(20, min=1)  # candidate window (paper 000 §4.5)
    # similarity threshold θ of Eq. 2 (0: keep the whole window)
    theta: float = field_spec(0.0, min=-1, max=1, noun="a cosine", step=0.05, decimals=3)
    # The keyword leg of the candidate pool (core.bm25): the BM25 top ``keyword_k`` units join the
    # dense top k, the Baseline column ranks the pool by similarity, and the answers read the pool
    # in the RRF of their column's order and the BM25 order (0: dense candidates only).
    keyword_k: int = field_spec(10, min=0, zero_means="dense candidates only")
    query_keywords: int = field_spec(10, min=1)  # |K_q| (paper 000 §4.4)
    doc_keywords: int = field_spec(15, min=1)  # |K_d|
    # τ of Eq. 3. "auto" calibrates an encoder-aware τ from the library's own
    # term-pair cosine distribution at ingest; a number uses it as given.
    tau: float | Literal["auto"] = field_spec("auto", min=-1, max=1, noun="a cosine", step=0.01, decimals=3)
    tau_paper: float = 0.6
    tau_percentile: float = field_spec(97.0, min=0, max=100, min_open=True, max_open=True)
    # w of w·minmax(s_sim) + (1−w)·minmax(s_c)
    hybrid_weight: float = field_spec(0.5, min=0, max=1, step=0.05)
    keyword_variant: KeywordVariant = "improved"
    empty_b_rule: EmptyBRule = "demote"
    # How s_c is read off B (core.causal.ScoreVariant): "paper" = Eq. 4–5 exactly; "centred",
    # "idf", "contrast", "centred_idf" put it on the encoder's own scale; "context" embeds B's
    # sentences without A's words, an encoder pass per candidate (docs/evaluation.md §1.1).
    score_variant: ScoreVariant = "paper"
    # "gated": the answers follow the library's calibration gate (app.library_gate: run at the end
    # of an ingest, no model; docs/architecture.md, "The calibration gate"); the hybrid, labelled
    # "not calibrated yet", until a record holds for the library.
    default_method: Literal["hybrid", "causal", "gated", "baseline"] = "gated"
    # Questions across languages: when the library also holds documents in the other of zh/en, the
    # local model translates the question after the columns are drawn, and the re-ranked columns and
    # the answers fuse the rankings of both phrasings (reciprocal rank fusion, core.fusion); the
    # Baseline column stays the typed question's similarity order. Off by default: it costs a model
    # call per question and lowers same-language MRR in a mixed library (docs/evaluation.md, "Model
    # calls on the question's path"). A translation slower than the limit is dropped, with a note.
    cross_language: bool = False
    cross_language_timeout_s: float = field_spec(30.0, min=0, min_open=True, unit="s", step=5.0, decimals=0)


@dataclass(frozen=True)
class CFRagSettings:
    # Paper 002 defaults: N = 3 counterfactuals, K = 4 clusters, M = 3 hypotheses, λ = 0.4.
    n_counterfactuals: int = field_spec(3, min=1)
    # over-generate so validation has something to reject
    n_candidates: int = field_spec(6, min=1, at_least="n_counterfactuals")
    n_clusters: int = field_spec(4, min=1)
    n_hypotheses: int = field_spec(3, min=1)
    lam: float = field_spec(0.4, min=0, max=1, step=0.05)
    # The paper gives no values for θ_sim, θ_dedup, σ. With ``rescale_cosines`` the two
    # thresholds are read on the encoder's own scale: cos' = (cos − b) / (1 − b), where b is
    # the library's mean random chunk-pair cosine (e5 puts unrelated texts near 0.75, BGE-M3
    # near 0.35, so one raw threshold cannot mean the same thing for both).
    theta_sim: float = field_spec(0.5, min=-1, max=1, noun="a cosine", step=0.05)
    theta_dedup: float = field_spec(0.95, min=-1, max=1, noun="a cosine", step=0.01)
    rescale_cosines: bool = True
    sigma: float = field_spec(0.5, min=0, min_open=True)
    # "median": σ = median pairwise evidence distance (self-tuning; a fixed σ gives e5's
    # compressed distances an affinity graph with no structure); "fixed": σ as given.
    sigma_rule: Literal["fixed", "median"] = "median"
    # φ_coh = w_embed·(answer–evidence similarity) + w_query·(query relevance) + w_presence·(answer in evidence)
    coh_w_embed: float = field_spec(0.4, min=0, max=1, sums_to_one="φ_coh")
    coh_w_query: float = field_spec(0.3, min=0, max=1, sums_to_one="φ_coh")
    coh_w_presence: float = field_spec(0.3, min=0, max=1, sums_to_one="φ_coh")
    # closed-book answers with token F1 above this count as L(q) = L(q')
    answer_same_f1: float = field_spec(0.5, min=0, max=1, max_open=True)
    temperature: float = field_spec(1.0, min=0, min_open=True)
    alpha: float = 0.4
    beta: float = 0.4
    gamma: float = 0.2
    agreement_threshold: float = field_spec(0.6, min=0, max=1, step=0.05)
    retrieve_k: int = field_spec(8, min=1)
    evidence_per_hypothesis: int = field_spec(4, min=1)
    # Paragraph windows each evidence chunk is read through by the hypotheses and the synthesis
    # (the paper's evidence is a ~100-word passage, this app's chunk 4,096 characters); 0 reads
    # the chunk itself, cut to the prompt budget from its start (the old behaviour).
    read_passages: int = field_spec(1, min=0)
    # Q(e) ∈ [0, 1] (core.cfrag.quality_score), so a threshold outside it keeps or drops everything.
    quality_min: float = field_spec(0.2, min=0, max=1, step=0.05)
    # numpy's SeedSequence refuses a negative seed, so run_cfrag did too; now the loader says so first.
    seed: int = field_spec(0, min=0)
    use_counterfactuals: bool = True
    # Off by default: one path over all the kept evidence was the best variant on every run of the
    # fixture (docs/evaluation.md §2.1: containment 0.667 clean and 0.639 with distractors, against
    # 0.556 and 0.500 with division), for one generator call instead of M = 3 and a synthesis.
    use_division: bool = False
    # What the synthesis does when the hypotheses disagree (paper 002 §4: "synthesise the top-3",
    # no prompt given). "ranked": the candidates best Ψ first, with Ψ, and their evidence;
    # "evidence": the same in the order written, without Ψ (three hypotheses' Ψ often differ by
    # < 0.02, and the ranked list reads as a verdict it is not); "reread": all the kept evidence
    # read again as one path with the hypothesis prompt, without the candidates — the default:
    # with the embedded 1.5B generator the candidates misled the synthesis (on 31 disagreeing
    # questions of four eval-qa runs, reread right 20 times, ranked 15; docs/evaluation.md §2).
    synthesis_prompt: SynthesisPrompt = "reread"
    # Start from the standard RAG answer beside CF-RAG (core.cfrag.anchor): it stands when what it
    # adds to the question is in a passage it read; only otherwise do CF-RAG's paths run, and their
    # answer replaces it only when its own passages hold it (docs/evaluation.md §2.5).
    keep_standard: bool = True


@dataclass(frozen=True)
class GenerationSettings:
    temperature: float = field_spec(0.2, min=0, max=2, step=0.05)
    max_tokens: int = field_spec(512, min=1)
    answer_reserve: int = 512
    thinking: bool = False
    seed: int = 42
    # Translate answer sources into the question's language before the model reads them. Off by
    # default: the model reads passages in their own language (a call per passage before the first
    # token; docs/evaluation.md, "Model calls on the question's path").
    translate: bool = False
    # Answer passages: the model reads paragraph-sized windows of the top chunks
    # (at most this many), not whole 4,096-character chunks.
    passages: bool = True
    max_passages: int = field_spec(8, min=1)
    # A sentence the model left uncited gets the source holding its words, marked as matched
    # (core.attribution; the embedded models often state the fact without its [n]).
    match_citations: bool = True
    # Each [n] the model wrote is kept only where passage n holds the sentence it ends; a repeated
    # marker is written once (core.attribution.check_citations; lexical, no model call).
    check_citations: bool = True
    # Say "not in your documents" instead of asking the model when none of the question's words are
    # the library's and no passage stands out (core.abstain; decided before the model loads).
    abstain: bool = True
    # With abstain: before the answer, "not in your documents" when its passages make the question no likelier
    # than no passages do (core.abstain.MIN_QUESTION_LIFT; the bare prompt's and the question's few tokens).
    check_relevance: bool = True
    # With abstain: where the passages are about something else (check_relevance) and a document in the
    # library's other language is nearer the question than the library's average, the question is
    # translated and answered from that language's documents, in that language (app.asked_across).
    ask_other_language: bool = True
    # With abstain: the model is asked whether the answer's passages hold the answer (core.abstain.JUDGE;
    # a prompt evaluation it shares with the answer). "warn": asked after the answer, which is marked
    # when they do not, and said "not in your documents" when no passage holds it either
    # (core.abstain.after_answer); "abstain": asked before, and "not in your documents" instead of the answer (on
    # held-out statutes it lost 3 of 8 answers, on a second held-out set 5 of 24: docs/evaluation.md §5.1).
    judge_passages: JudgeMode = "warn"
    # While a question is typed, the window reads its first answer prompt (the fixed prefix and the sources) into
    # the model's cache at each pause, writing nothing, so that after Enter only the rest is read; the text is
    # the same (app.read_ahead; docs/benchmarks.md §14). It uses the processor while the person types.
    read_ahead: bool = True
    # Follow-up questions: a rewrite that takes longer falls back to the user's words.
    rewrite_timeout_s: float = field_spec(30.0, min=0, min_open=True, unit="s", step=5.0, decimals=0)


@dataclass(frozen=True)
class UISettings:
    language: UILanguage = "en"
    # The question history moved to app.config.UIState (ui_state.toml): it is not a setting.


@dataclass(frozen=True)
class Settings:
    models: ModelSettings = field(default_factory=ModelSettings)
    ingest: IngestSettings = field(default_factory=IngestSettings)
    retrieval: RetrievalSettings = field(default_factory=RetrievalSettings)
    cfrag: CFRagSettings = field(default_factory=CFRagSettings)
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    ui: UISettings = field(default_factory=UISettings)

    def validate(self) -> Settings:
        validate_settings(self)
        return self

    def replace(self, section: str, **values: Any) -> Settings:
        """A copy with ``section.key = value`` for each given key (validated)."""
        current = getattr(self, section)
        return dataclasses.replace(self, **{section: dataclasses.replace(current, **values)}).validate()


# ---------------------------------------------------------------------- the schema

Kind = Literal["bool", "int", "float", "choice", "float_or_choice", "text", "file", "dir"]


@dataclass(frozen=True)
class SettingInfo:
    """One setting as the schema sees it: where it lives, what it holds, its default and Spec."""

    section: str
    key: str
    kind: Kind  # "float_or_choice": a number or one of ``choices`` (retrieval.tau: a cosine or "auto")
    choices: tuple[str, ...]  # the Literal's values, in declaration order
    default: Any
    spec: Spec

    @property
    def name(self) -> str:
        return f"{self.section}.{self.key}"

    @property
    def label_key(self) -> str:
        return self.spec.label_key or f"set.{self.name}"

    @property
    def help_key(self) -> str:
        return self.spec.help_key or f"set.{self.name}.tip"

    @property
    def step(self) -> float:
        if self.spec.step is not None:
            return self.spec.step
        return 1 if self.kind == "int" else 0.05

    @property
    def related(self) -> tuple[str, ...]:
        """The other fields of the section this one's validity depends on."""
        return tuple(k for k in (self.spec.less_than, self.spec.at_least) if k)

    def describe(self) -> str:
        """What the setting accepts, as the error message says it: "a cosine in [-1, 1]"."""
        s = self.spec
        parts: list[str] = []
        if s.min is not None and s.max is not None:
            if self.kind == "int" and not (s.min_open or s.max_open):
                parts.append(f"in {_fmt(s.min)}..{_fmt(s.max)}")
            else:
                parts.append(f"in {'(' if s.min_open else '['}{_fmt(s.min)}, {_fmt(s.max)}{')' if s.max_open else ']'}")
        elif s.min is not None:
            parts.append(f"{'>' if s.min_open else '>='} {_fmt(s.min)}")
        elif s.max is not None:
            parts.append(f"{'<' if s.max_open else '<='} {_fmt(s.max)}")
        if s.less_than:
            parts.append(f"< {s.less_than}")
        if s.at_least:
            parts.append(f">= {s.at_least}")
        text = " and ".join(parts)
        if s.unit and (s.min is not None or s.max is not None):
            text += f" {s.unit}"
        if s.noun:
            text = f"{s.noun} {text}".strip()
        if s.zero_means:
            text += f" (0: {s.zero_means})"
        if self.kind == "float_or_choice":
            text = f"{_choice_text(self.choices)} or {text}"
        elif self.kind == "choice":
            text = _choice_text(self.choices)
        return text

    def in_range(self, value: float) -> bool:
        """``value`` within min/max (not the relations to other fields); NaN never is, where there are bounds."""
        s = self.spec
        lo_ok = s.min is None or (value > s.min if s.min_open else value >= s.min)
        hi_ok = s.max is None or (value < s.max if s.max_open else value <= s.max)
        return lo_ok and hi_ok


def _choice_text(choices: tuple[str, ...]) -> str:
    if len(choices) <= 2:
        return " or ".join(repr(c) for c in choices)
    return "one of " + ", ".join(choices)


def _kind(hint: Any, name: str) -> tuple[Kind, tuple[str, ...]]:
    origin = get_origin(hint)
    if origin is Literal:
        return "choice", tuple(get_args(hint))
    if origin in (typing.Union, types.UnionType):
        arms = get_args(hint)
        choices = tuple(c for a in arms if get_origin(a) is Literal for c in get_args(a))
        if float in arms and len(arms) == 2 and choices:
            return "float_or_choice", choices
    simple: dict[Any, Kind] = {bool: "bool", int: "int", float: "float", str: "text"}
    if hint in simple:
        return simple[hint], ()
    raise TypeError(f"settings schema: {name} has a type the schema does not know: {hint!r}")


@functools.cache
def _schema() -> dict[str, tuple[SettingInfo, ...]]:
    out: dict[str, tuple[SettingInfo, ...]] = {}
    sections = get_type_hints(Settings)
    for sf in dataclasses.fields(Settings):
        cls = sections[sf.name]
        hints = get_type_hints(cls)
        infos = []
        for f in dataclasses.fields(cls):
            spec = f.metadata.get("spec", NO_SPEC)
            kind, choices = _kind(hints[f.name], f"{sf.name}.{f.name}")
            if spec.path:
                if kind != "text":
                    raise TypeError(f"settings schema: {sf.name}.{f.name} is a path but not text")
                kind = spec.path
            infos.append(SettingInfo(sf.name, f.name, kind, choices, f.default, spec))
        names = {i.key for i in infos}
        for i in infos:
            if not set(i.related) <= names:
                raise TypeError(f"settings schema: {i.name} refers to a field {sf.name} does not have")
        out[sf.name] = tuple(infos)
    return out


@functools.cache
def _section_names() -> dict[type, str]:
    hints = get_type_hints(Settings)
    return {hints[f.name]: f.name for f in dataclasses.fields(Settings)}


def settings_schema() -> tuple[SettingInfo, ...]:
    """Every setting, section by section, in declaration order."""
    return tuple(i for infos in _schema().values() for i in infos)


def setting_info(section: str, key: str) -> SettingInfo:
    for i in _schema().get(section, ()):
        if i.key == key:
            return i
    raise SettingsError(f"unknown setting {section}.{key}")


# ---------------------------------------------------------------------- the one validator


def _fail(info: SettingInfo, why: str, value: Any) -> typing.NoReturn:
    raise SettingsError(f"invalid setting {info.name}: {why}, got {value!r}")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_value(info: SettingInfo, value: Any) -> None:
    """``value``'s type, choices and range against ``info``; raises SettingsError naming the key."""
    kind = info.kind
    if kind == "bool":
        if not isinstance(value, bool):
            _fail(info, "expected true or false", value)
    elif kind in ("text", "file", "dir"):
        if not isinstance(value, str):
            _fail(info, "expected text", value)
    elif kind == "choice":
        if not (isinstance(value, str) and value in info.choices):
            _fail(info, f"must be {info.describe()}", value)
    elif kind == "float_or_choice":
        if not (isinstance(value, str) and value in info.choices) and not (
                _is_number(value) and info.in_range(float(value))):
            _fail(info, f"must be {info.describe()}", value)
    else:
        if kind == "int" and not (isinstance(value, int) and not isinstance(value, bool)):
            _fail(info, "expected a whole number", value)
        if not _is_number(value):
            _fail(info, "expected a number", value)
        if not info.in_range(float(value)):
            _fail(info, f"must be {info.describe()}", value)


def check_setting(section: str, key: str, value: Any) -> None:
    """One value against its setting's spec, e.g. a seed passed beside the settings."""
    check_value(setting_info(section, key), value)


def validate_section(values: object) -> None:
    """Check one section (a ``ModelSettings``, ``CFRagSettings``, …) against its specs.

    Every field first (type, choices, range), then what relates fields of the section
    (``less_than``, ``at_least``, ``sums_to_one``), so a relation never compares a value
    of the wrong type. The first problem raises SettingsError naming ``section.key``.
    """
    try:
        section = _section_names()[type(values)]
    except KeyError:
        raise TypeError(f"validate_section: {type(values).__name__} is not a settings section") from None
    infos = _schema()[section]
    for info in infos:
        check_value(info, getattr(values, info.key))
    groups: dict[str, list[SettingInfo]] = {}
    for info in infos:
        v = getattr(values, info.key)
        s = info.spec
        if s.less_than and not v < getattr(values, s.less_than):
            _fail(info, f"must be {info.describe()} ({s.less_than} = {getattr(values, s.less_than)!r})", v)
        if s.at_least and not v >= getattr(values, s.at_least):
            _fail(info, f"must be {info.describe()} ({s.at_least} = {getattr(values, s.at_least)!r})", v)
        if s.sums_to_one:
            groups.setdefault(s.sums_to_one, []).append(info)
    for group, members in groups.items():
        total = sum(getattr(values, m.key) for m in members)
        if abs(total - 1.0) >= 1e-9:
            names = ", ".join(m.key for m in members)
            raise SettingsError(f"invalid setting {members[0].name}: the {group} weights {names} "
                                f"must sum to 1, got {total:g}")


def validate_settings(settings: Settings) -> None:
    """Every section of ``settings`` (``Settings.validate`` calls this)."""
    for f in dataclasses.fields(settings):
        validate_section(getattr(settings, f.name))
