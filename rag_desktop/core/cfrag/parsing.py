"""Reading the model's replies: counterfactual lines, closed-book answers, hypotheses.

Small local models drift from the format they were asked for (numbering, bullets,
markdown, labels, fenced or truncated JSON); every parser here says what it tolerates.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence

from rag_desktop.core.cfrag.common import _CITE
from rag_desktop.core.cfrag.types import ParseMethod
from rag_desktop.core.text import has_cjk, normalize_answer

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
_QUOTES = "\"'“”‘’「」『』`"


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
_EN_INTERROGATIVE = re.compile(
    r"^(?:who|whom|whose|what|which|when|where|why|how|in\s+(?:what|which)|is|are|was|were|do|does|did)\b",
    re.IGNORECASE,
)
_ZH_INTERROGATIVE = re.compile(r"谁|什么|哪|几|多少|何|吗|怎")


def _looks_like_question(text: str) -> bool:
    """Ends in "?"/"？", opens with an English question word, or (Chinese) holds one."""
    if text.endswith(("?", "？")) or _EN_INTERROGATIVE.match(text):
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
    s = _CITE.sub("", s)
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
