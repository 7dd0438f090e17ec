"""Reading the local model's replies: every parser of generated text in one place.

Small local models drift from the format they were asked for (numbering, bullets, markdown,
labels, quotes, fenced or truncated JSON, a second line nobody asked for); every parser here
says what it tolerates and what it gives back when the reply holds nothing usable. Pure
functions, no model and no Qt: the callers run the model and decide what to do with the result.

By reply, in the order a question meets them:

* the follow-up rewrite (:func:`parse_rewrite`, with :func:`kept_share` and :func:`added_tokens`);
* the question's translation (:func:`clean_translation`, :func:`written_anew`);
* the answer's citations (:func:`parse_citations`, on the grammar of :mod:`rag_desktop.core.citations`);
* CF-RAG's counterfactual questions (:func:`parse_counterfactuals`, :func:`parse_counterfactual_line`),
  closed-book answers (:func:`parse_numbered_answers`) and hypotheses (:func:`parse_hypothesis`,
  :func:`trim_to_sentence`).

What counts as a Chinese question word is :data:`rag_desktop.core.text.ZH_QUESTION_WORDS`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Literal

from rag_desktop.core.citations import CITATION_RE, cited_numbers
from rag_desktop.core.keywords import load_stopwords
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.text import (
    ZH_QUESTION_CHARS_LOOSE,
    ZH_QUESTION_WORDS,
    answer_tokens,
    has_cjk,
    is_han,
    normalize_answer,
    opens_english_question,
)
from rag_desktop.core.types import Citation, Hit

ParseMethod = Literal["json", "labels", "fallback", "empty"]  # how parse_hypothesis read a reply

_QUOTES = "\"'“”‘’「」『』`"
# A citation marker with the space before it: what is removed from a short answer or a rationale.
CITE_MARKER = re.compile(r"\s*" + CITATION_RE.pattern)

# --------------------------------------------------------------------------- the answer's citations


def parse_citations(text: str, sources: Sequence[Hit]) -> tuple[Citation, ...]:
    """Every distinct [n] in ``text`` mapped to ``sources`` (1-based), first appearance order.

    A number outside 1..len(sources) names a source that was never given: it is kept with
    ``valid=False`` and no document fields, so the UI flags it instead of linking it. The
    grammar is the one in :mod:`rag_desktop.core.citations` (shared with CF-RAG, the metrics
    and the UI); a markdown link ``[1](...)`` is not a citation.
    """
    out: list[Citation] = []
    for n in cited_numbers(text):
        if 1 <= n <= len(sources):
            h = sources[n - 1]
            out.append(Citation(n=n, valid=True, doc_id=h.doc_id, unit_id=h.unit_id,
                                title=h.title, path=h.path, page=h.page))
        else:
            out.append(Citation(n=n, valid=False))
    return tuple(out)


# --------------------------------------------------------------------------- CF-RAG: counterfactuals

_TAG_WORDS = {
    "role": "role", "roles": "role", "角色": "role", "关系": "role",
    "time": "time", "temporal": "time", "时间": "time",
    "entity": "entity", "实体": "entity",
    "category": "category", "categorical": "category", "type": "category", "类别": "category",
    "scope": "scope", "范围": "scope",
}  # fmt: skip
_TAG_ALT = "|".join(sorted(map(re.escape, _TAG_WORDS), key=len, reverse=True))
_BRACKET_TAG = re.compile(rf"^[\[(【（]\s*({_TAG_ALT})\s*[\])】）]\s*[:：\-–—]?\s*", re.IGNORECASE)
_COLON_TAG = re.compile(rf"^({_TAG_ALT})\s*[:：\-–—]\s*", re.IGNORECASE)
_BULLET = re.compile(r"^(?:[-*•·]+|\(?\d{1,2}\s*[.)、:：]|[Qq]\d{1,2}\s*[.):：]?)\s*")


def parse_counterfactuals(text: str) -> list[tuple[str, str]]:
    """``(transformation, question)`` per usable line of the model's output.

    Robust to numbering ("1.", "2)", "Q3:"), bullets, markdown bold, quotes and tags
    written as "[role]", "(role)", "role:" or Chinese names (角色/时间/实体/类别/范围).
    A line is taken as a question when it carried a marker (number, bullet or tag) or
    ends in "?"/"？"; headers ("Here are the questions:") and chatter are skipped. The
    transformation is "unknown" when no tag was given.
    """
    out: list[tuple[str, str]] = []
    for raw in text.splitlines():
        line = raw.strip().replace("**", "").replace("__", "")
        if not line:
            continue
        marked = False
        tag = "unknown"
        for _ in range(3):  # bullets and tags may be stacked: "1. [role] ..."
            changed = False
            m = _BULLET.match(line)
            if m and m.end() > 0:
                line, marked, changed = line[m.end():].strip(), True, True
            m = _BRACKET_TAG.match(line) or _COLON_TAG.match(line)
            if m:
                tag = _TAG_WORDS[m.group(1).lower()]
                line, marked, changed = line[m.end():].strip(), True, True
            if not changed:
                break
        line = line.strip(_QUOTES + " ").strip()
        if len(line) < 4 or line.endswith((":", "：")):
            continue
        if not (marked or line.endswith(("?", "？"))):
            continue
        out.append((tag, line))
    return out


_LINE_LABEL = re.compile(
    r"^(?:rewritten(?:\s+question)?|new\s+question|counterfactual(?:\s+question)?|question|q'|"
    r"改写(?:后的问题)?|新问题|反事实问题|问题)\s*[:：]\s*",
    re.IGNORECASE,
)
# The question words and the loose ones too: a line the model wrote when asked for a question is
# meant as one, so 谁 or 几 in it asks (a document title is read with the strict list only).
_ZH_INTERROGATIVE = re.compile("|".join(map(re.escape, ZH_QUESTION_WORDS + ZH_QUESTION_CHARS_LOOSE)))


def _looks_like_question(text: str) -> bool:
    """Ends in "?"/"？", opens with an English question word, or (Chinese) holds one."""
    if text.endswith(("?", "？")) or opens_english_question(text):
        return True
    return has_cjk(text) and bool(_ZH_INTERROGATIVE.search(text))


def parse_counterfactual_line(text: str, query: str, taken: Sequence[str] = ()) -> str:
    """The rewritten question in a one-line reply ('' when there is none).

    Labels the model repeats from the prompt ("Rewritten:", "Question:", "改写：") and
    bullets, tags, markdown and quotes are removed; lines that are not question-like
    (no "?"/"？" and no interrogative word) are skipped. Preferred: the first line that
    is neither the original question nor a repeat of ``taken`` (earlier candidates) —
    a model that first echoes "Question: <q>" and then writes its rewrite gets the
    rewrite; when every line is such a repeat the first is returned, so validation
    rejects it visibly in the trace.
    """
    lines: list[str] = []
    for raw in text.splitlines():
        line = raw.strip().replace("**", "").replace("__", "")
        for _ in range(3):
            before = line
            m = _BULLET.match(line)
            if m and m.end() > 0:
                line = line[m.end():].strip()
            m = _BRACKET_TAG.match(line) or _COLON_TAG.match(line)
            if m:
                line = line[m.end():].strip()
            line = _LINE_LABEL.sub("", line).strip()
            line = line.strip(_QUOTES + " ").strip()
            if line == before:
                break
        if len(line) < 4 or line.endswith((":", "：")) or len(line) > 300:
            continue
        if not _looks_like_question(line):
            continue
        lines.append(line)
    if not lines:
        return ""
    avoid = {normalize_answer(query), *(normalize_answer(t) for t in taken)}
    return next((ln for ln in lines if normalize_answer(ln) not in avoid), lines[0])


# --------------------------------------------------------------------------- CF-RAG: closed-book answers

_NUMBERED = re.compile(r"^\s*(?:[-*•]\s*)?(?:[QqAa]\s*)?(\d{1,2})\s*[.)、:：]\s*(.*)$")
_ANSWER_PREFIX = re.compile(r"^(?:answer|a|答案|回答)\s*[:：]\s*", re.IGNORECASE)
# A small model asked to synthesise sometimes echoes a candidate line of the prompt
# ("(A) Kessby — Ψ = 0.53 — rationale", see synthesis_messages): keep only the answer part.
_ECHOED_LABEL = re.compile(r"^\(([A-J])\)\s*")
_ECHOED_SCORE = re.compile(r"\s*[—–-]+\s*Ψ\s*=.*$", re.DOTALL)


def _clean_short_answer(text: str) -> str:
    s = text.strip().replace("**", "")
    s = _ANSWER_PREFIX.sub("", s)
    s = _ECHOED_SCORE.sub("", _ECHOED_LABEL.sub("", s))
    s = CITE_MARKER.sub("", s)
    s = s.strip().strip(_QUOTES).strip()
    s = s.rstrip("。．.").strip()
    return s


def parse_numbered_answers(text: str, n: int) -> list[str]:
    """Answers "1. …" … "n. …" in order ('' where missing).

    Without any numbered line the non-empty lines are taken in order.
    """
    found: dict[int, str] = {}
    lines = [ln for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        m = _NUMBERED.match(ln)
        if m:
            idx = int(m.group(1))
            if 1 <= idx <= n and idx not in found:
                found[idx] = _clean_short_answer(m.group(2))
    if not found:
        return [_clean_short_answer(ln) for ln in lines[:n]] + [""] * max(0, n - len(lines))
    return [found.get(i, "") for i in range(1, n + 1)]


# --------------------------------------------------------------------------- CF-RAG: hypotheses

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
# "Answer:", "**Answer:**", "**Answer**:", "### Final answer:", "答案：" — the label and its
# markdown, never swallowing the line break (an answer may sit on the next line).
_LABEL_ANSWER = re.compile(
    r"^[ \t#>*]*(?:final[ \t]+)?(?:answer|答案|回答)[ \t*]*[:：][ \t*]*(.*)$", re.IGNORECASE | re.MULTILINE
)
_LABEL_RATIONALE = re.compile(
    r"^[ \t#>*]*(?:rationale|reason|reasoning|explanation|justification|理由|依据|解释)[ \t*]*[:：][ \t*]*",
    re.IGNORECASE | re.MULTILINE,
)


def _json_objects(text: str) -> Iterator[dict[str, object]]:
    dec = json.JSONDecoder()
    for m in re.finditer(r"\{", text):
        try:
            obj, _ = dec.raw_decode(text[m.start():])
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            yield obj


def parse_hypothesis(text: str) -> tuple[str, str, ParseMethod]:
    """(answer, rationale, how) from a model reply, tolerant of format drift.

    Tried in order: a JSON object with an "answer" key (code fences and surrounding prose
    allowed; "rationale"/"reason"/"explanation" for the rationale); the "answer" string
    field of JSON that does not parse (truncated or malformed); "Answer:" / "Rationale:"
    labels (English or Chinese); else the first non-empty line that is not a code fence
    or a lone brace is the answer and the rest the rationale. Citation markers "[n]" are
    removed from the answer (they stay in the rationale).
    """
    body = text.strip()
    if not body:
        return "", "", "empty"
    fence = _FENCE.search(body)
    candidates = ([fence.group(1)] if fence else []) + [body]
    for cand in candidates:
        for obj in _json_objects(cand):
            lower = {str(k).lower(): v for k, v in obj.items()}
            if "answer" in lower or "答案" in lower:
                ans = lower.get("answer", lower.get("答案"))
                rat = next((lower[k] for k in ("rationale", "reason", "reasoning", "explanation", "理由")
                            if k in lower), "")
                return _clean_short_answer(_scalar(ans)), _scalar(rat).strip(), "json"
    # A fenced or brace-opened reply whose JSON does not parse (cut off by the token limit,
    # an unescaped quote): take the "answer" string field if it is there. Without this the
    # fallback below would answer "```json" → "json".
    for key in ("answer", "答案"):
        mj = re.search(rf'"{key}"\s*:\s*"((?:[^"\\\n]|\\.)*)"?', body)
        if mj:
            rj = re.search(r'"(?:rationale|reason|reasoning|explanation|理由)"\s*:\s*"((?:[^"\\]|\\.)*)', body)
            rat = _unescape(rj.group(1)).strip().rstrip("`}\n ") if rj else ""
            return _clean_short_answer(_unescape(mj.group(1))), rat, "json"
    m = _LABEL_ANSWER.search(body)
    if m:
        ans = m.group(1).strip()
        if not ans:  # "Answer:" alone on its line: take the next non-empty line
            rest = [ln for ln in body[m.end():].splitlines() if ln.strip()]
            ans = rest[0] if rest else ""
        r = _LABEL_RATIONALE.search(body)
        rat = body[r.end():].strip() if r else ""
        if r and r.start() > m.start():
            ans = ans.split("\n")[0]
        return _clean_short_answer(ans), rat, "labels"
    # Code-fence markers and lone braces are format, not content.
    lines = [ln for ln in body.splitlines() if ln.strip() and not _FORMAT_LINE.match(ln)]
    if not lines:
        return "", "", "empty"
    return _clean_short_answer(lines[0]), "\n".join(lines[1:]).strip(), "fallback"


_FORMAT_LINE = re.compile(r"^\s*(?:```\s*\w*|[{}\[\]]+)\s*$")


def _unescape(s: str) -> str:
    try:
        return str(json.loads(f'"{s}"'))
    except json.JSONDecodeError:
        return s.replace('\\"', '"')


def _scalar(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, (list, tuple)):
        return ", ".join(_scalar(x) for x in v)
    return str(v)


def trim_to_sentence(text: str) -> str:
    """A reply cut by its token budget, back to its last complete sentence (if it has one).

    Only for text known to be cut (finish_reason "length"): "A. B is" → "A.". Without a
    sentence end the text stays as it is (the trace flags it as truncated either way).
    """
    ends = [m.end() for m in re.finditer(r"[.!?。！？](?=\s|$)|[。！？]", text)]
    cut = text[: ends[-1]].rstrip() if ends and ends[-1] < len(text.rstrip()) else text
    return cut if cut.strip() else text


# --------------------------------------------------------------------------- the follow-up rewrite

# A standalone form adds context to the follow-up; it keeps the follow-up's own words. A reply
# that keeps fewer than half of them answers another question (seen: a new question,
# "ColBERT late interaction scoring", came back as the previous one), so the user's words win.
KEEP_SHARE = 0.5
MAX_GROWTH = 4  # a rewrite longer than 4× the follow-up + 80 characters is rambling, not a question

_REWRITE_LABEL = re.compile(
    r"^(?:standalone question|question|rewritten question|独立问题|问题|改写后的问题|改写)\s*[:：]\s*", re.IGNORECASE)


def kept_share(question: str, rewrite: str) -> float:
    """The share of the question's content tokens (words other than English stopwords; CJK
    characters one by one) that the rewrite still contains. 1.0 when the question has fewer
    than two: "and?" or "why?" carries nothing a rewrite could keep."""
    stop = load_stopwords("en")
    q = [t for t in answer_tokens(question) if t not in stop]
    if len(q) < 2:
        return 1.0
    r = set(answer_tokens(rewrite))
    return sum(t in r for t in q) / len(q)


def added_tokens(question: str, rewrite: str) -> set[str]:
    """The rewrite's content tokens that the question does not have (stopwords of either
    language left out; CJK characters one by one): what the rewrite brought from the thread."""
    stop = load_stopwords("en") | load_stopwords("zh")
    q = set(answer_tokens(question))
    return {t for t in answer_tokens(rewrite) if t not in q and t not in stop}


def parse_rewrite(reply: str, question: str) -> tuple[str, str]:
    """(standalone question, reason): the reply's first line without labels or quotes; the
    user's question and a reason (a key of :data:`rag_desktop.core.conversation.NOTES`) when the reply is empty or not a
    plausible question."""
    line = next((ln.strip() for ln in reply.strip().splitlines() if ln.strip()), "")
    line = _REWRITE_LABEL.sub("", line).strip().strip(_QUOTES).strip()
    if not line:
        return question, "empty"
    if len(line) > MAX_GROWTH * len(question) + 80:
        return question, "not_a_question"
    if kept_share(question, line) < KEEP_SHARE:
        return question, "dropped_words"
    if line != question and not added_tokens(question, line):
        # Seen with the 1.5B on a new-topic question: "出差住宿费的报销标准是多少？" came back as
        # "出差住宿费报销的标准是多少？". A rewrite that brings no word of the thread resolves nothing,
        # and showing it for confirmation only holds the person up: the typed words are asked.
        return question, "unchanged"
    return line, ""


# --------------------------------------------------------------------------- the question's translation

_PAREN = re.compile(r"\s*[（(]([^（()）]*)[)）]")
# Quotes a reply may wrap the whole question in, opening → closing. 《》 marks a title, so it is only
# taken off when it wraps the whole reply: "《玻璃港》的导演是谁？" keeps its title marks.
_PAIRS = {'"': '"', "'": "'", "“": "”", "‘": "’", "「": "」", "『": "』", "《": "》"}


def _unwrapped(text: str) -> str:
    """``text`` without the quote pairs that enclose all of it (none inside it)."""
    while len(text) >= 2 and _PAIRS.get(text[0]) == text[-1] and text[-1] not in text[1:-1]:
        text = text[1:-1].strip()
    return text


_WORD = re.compile(r"[A-Za-z0-9]+")


def written_anew(translation: str, question: str) -> str:
    """What ``translation`` says in words the question does not hold: its Latin words that are not
    the question's (case aside) and its Han characters that are not the question's.

    A translation keeps names in their own script — "Wason selection task展示了什么？",
    "Who plays the lead in 澜川往事?" — and such a reply can hold more of the source script than of
    the target one; what the model *wrote* is the rest, and that must be in the target language.
    """
    words = {w.casefold() for w in _WORD.findall(question)}
    han = set(question)
    rest = _WORD.sub(lambda m: " " if m.group(0).casefold() in words else m.group(0), translation)
    return "".join(ch for ch in rest if not (is_han(ch) and ch in han))


def clean_translation(raw: str, source: str, target: str, question: str = "") -> str:
    """The translated question out of the model's reply: its first non-empty line, without a
    "Translation:" label or quotes, and without the source-language terms the translate prompt
    asks for in parentheses (the question as typed already searches with those words); "" unless
    what it wrote anew (``written_anew``, given the ``question``) is in the target language."""
    lines = [ln.strip() for ln in raw.strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    text = re.sub(r"^(translation|译文|翻译)\s*[:：]\s*", "", lines[0], flags=re.IGNORECASE).strip()
    text = _PAREN.sub(lambda m: "" if detect_lang(m.group(1)) == source else m.group(0), text)
    text = _unwrapped(text.strip())
    return text if detect_lang(written_anew(text, question)) == target else ""

