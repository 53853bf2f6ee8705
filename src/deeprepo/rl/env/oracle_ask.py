"""What a prompt asks the oracle worker to do: an audit, or something else (``rl/env/oracle.py``).

A real model does what the instruction asks. It audits when asked to find bugs, in any
wording ("find bugs", "review for security issues", "what could go wrong here", "check
this code", "make sure nothing is exploitable"), and does not when told not to ("do not
check anything", "no need to review", "just say OK") or when asked for something else
("summarise", "translate the comments", "count the lines", "list the function names").

The instruction (the prompt's text that is no code of the repository) is read clause by
clause, word by word:

* **Audit terms** are defect words (bug, vulnerability, injection, unsafe, wrong, ...)
  and audit verbs (audit, review, vet); inspection verbs (check, inspect, examine, scan,
  analyse) count too unless their clause names a non-audit object (spelling, style,
  formatting, line count, names).
* **Negation** (not, n't, no, never, without, skip, avoid, ignore, "no need", "rather than",
  and the German, French, Spanish and Portuguese words) covers what follows it to the end
  of its clause, or to a word that starts a new request ("but", "instead", "just",
  "then", "and" or a comma before a verb); "not needed", "unnecessary", "out of scope"
  and the like negate what came before them in their clause; a bare "No." answering a
  question negates the question. A negated privative verb ("don't miss", "do not skip")
  is a request again.
* **Determining a condition is auditing**: a defect word after "if", "whether",
  "unless", "make sure", "ensure" or "verify" counts even when negated ("make sure
  there are no bugs", "say OK if you find no issue"), unless the framing word is itself
  negated ("do not check whether ...").
* A past participle after "was", "has been", "already" is a statement, not a request
  ("it was reviewed").
* **An exclusive request wins**: "just say OK", "only summarise", "reply with OK and
  nothing else" (a non-audit request with just / only / simply / nothing else, in a clause
  without a condition or an audit term) makes the prompt a non-audit one whatever else it
  says.

The verdict: an exclusive non-audit request → not an audit; else any affirmative audit
term → an audit; else a non-audit request or a negated audit term → not an audit; else
(no request at all, e.g. bare code) the system prompt decides, read the same way.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

__all__ = ["Request", "classify_instruction", "read_request"]

# Defect words and audit verbs: a token that *is* a request to audit when affirmative.
_AUDIT = re.compile(
    r"(audit\w*|vulnerab\w*|vulns?|secur\w*|insecur\w*|bugs?|buggy|flaws?|flawed|cwes?|"
    r"inject\w*|exploit\w*|weakness\w*|weak|defects?|defective|unsafe|safe|safely|safety|"
    r"danger\w*|malicious\w*|findings?|issues?|problems?|problematic|risks?|risky|"
    r"attack\w*|mistakes?|errors?|erroneous|wrong|broken|incorrect\w*|faulty|faults?|"
    r"crash\w*|leaks?|leaking|overflows?|xss|csrf|ssrf|sqli|rce|taint\w*|saniti[sz]\w*|"
    r"harden\w*|suspicious\w*|smells?|fishy|sketchy|holes?|threats?|hack\w*|pentest\w*|"
    r"loopholes?|backdoors?|cves?|review\w*|scrutini[sz]\w*|vet|vetting|debug\w*|concerns?|"
    r"concerning|vulnerable|abus\w*|misus\w*|"
    r"sicherheit\w*|fehler\w*|schwachstelle\w*|lücken?|vulnérab\w*|sécurité|failles?|"
    r"bogues?|erreurs?|vulnerabilidad\w*|seguridad|fallos?|errores|segurança|falhas?)"
)
_AUDIT_PHRASES = re.compile(
    r"\b(off by one|race conditions?|go(?:es)? wrong|edge cases?|corner cases?|red team\w*|"
    r"threat model\w*|anything off|look out for)\b"
)
# Inspection verbs: an audit request unless their clause is about something else.
_INSPECT = re.compile(
    r"(check\w*|inspect\w*|examin\w*|analy[sz]\w*|assess\w*|evaluat\w*|scan\w*|"
    r"verif\w*|triag\w*|pr[uü]f\w*|v[ée]rifi\w*|revis\w*)"
)
_NOT_AUDIT_OBJECT = re.compile(
    r"\b(spelling|grammar|typos?|formatting|format|style|indentation|whitespace|lint\w*|"
    r"docstrings?|comments?|licen[cs]e|copyright|names?|naming|lines?|length|count|"
    r"translation|summary|types?|type hints?|imports?|json syntax|received|receipt)\b"
)
# Words that negate what follows them in their clause.
_NEGATORS = frozenset(
    [
        "abstain",
        "decline",
        "not",
        "no",
        "never",
        "without",
        "nor",
        "neither",
        "none",
        "nothing",
        "cannot",
        "skip",
        "skipping",
        "avoid",
        "avoiding",
        "refrain",
        "stop",
        "forget",
        "ignore",
        "ignoring",
        "disregard",
        "omit",
        "nicht",
        "kein",
        "keine",
        "keinen",
        "ohne",
        "pas",
        "sans",
        "jamais",
        "sin",
        "nunca",
        "ningún",
        "ninguna",
        "não",
        "sem",
        "nenhum",
        "insteadof",
        "ratherthan",
        "otherthan",
    ]
)
_TAG_RE = re.compile(r"<[^<>\n]{0,300}>")
_PATH_RE = re.compile(r"\S*[/\\]\S*")
_FILE_NAME_RE = re.compile(
    r"\b[\w-]+(?:\.[\w-]+)*\.(?:pyi?|[cm]?jsx?|tsx?|java|kt|go|rb|php|rs|[ch]|cc|cpp|hpp|cs|"
    r"swift|sh|bash|json|ya?ml|toml|ini|cfg|conf|md|rst|txt|html?|sql|env|xml|lock|vue)\b",
    re.IGNORECASE,
)
# Phrases read as one word (a negator or a framing word).
_JOINED = (
    ("instead of", "insteadof"),
    ("rather than", "ratherthan"),
    ("other than", "otherthan"),
    ("make sure", "makesure"),
    ("find out", "findout"),
    ("see if", "if"),
)
# Verbs whose negation is a request ("don't miss", "do not skip").
_PRIVATIVE = frozenset(
    ["miss", "overlook", "skip", "ignore", "forget", "omit", "neglect", "leave", "stop"]
)
# Words after which a negation no longer holds: a new request starts.
_RESETS = frozenset(
    ["but", "instead", "however", "just", "only", "simply", "merely", "then", "also", "please"]
)
_VERBS = frozenset(
    [
        "say",
        "reply",
        "respond",
        "answer",
        "output",
        "print",
        "return",
        "write",
        "summarise",
        "summarize",
        "translate",
        "count",
        "list",
        "explain",
        "describe",
        "tell",
        "give",
        "report",
        "find",
        "look",
        "review",
        "audit",
        "check",
        "scan",
        "search",
        "hunt",
        "spot",
        "flag",
        "identify",
        "highlight",
        "point",
        "focus",
        "do",
        "make",
        "provide",
        "produce",
        "send",
        "confirm",
        "acknowledge",
        "inspect",
        "examine",
        "analyse",
        "analyze",
        "assess",
        "document",
        "rewrite",
        "refactor",
        "reformat",
        "convert",
        "rename",
        "name",
        "enumerate",
        "show",
    ]
)
_POST_NEGATION = re.compile(
    r"\b(not (?:needed|necessary|required|wanted|requested|asked|needed here|the (?:task|goal|"
    r"point|job))|unnecessary|needless|out of scope|no thanks|not your (?:job|task)|"
    r"pointless|waste of time|skip (?:it|that|this)|(?:is|are|was|were|been|already) (?:done|"
    r"complete|completed|finished|covered|handled|taken care of))\b"
)
_REFUSAL_FILLER = re.compile(r"\b(it|this|that|is|it's|here|really|totally|entirely|please)\b")
_ANSWER_NO = frozenset(
    [
        "bother",
        "care",
        "mind",
        "worry",
        "never",
        "none",
        "no",
        "nope",
        "nah",
        "not",
        "don't",
        "do",
        "needed",
        "necessary",
        "thanks",
        "it",
        "that",
        "please",
    ]
)
_FRAMING = frozenset(
    ["if", "whether", "unless", "ensure", "verify", "confirm", "makesure", "findout"]
)
_CONDITIONAL = re.compile(
    r"\b(if|unless|when|whether|otherwise|(?<!nothing )(?<!anything )else|in case|once)\b"
)
_EXCLUSIVE = re.compile(
    r"\b(just|only|simply|merely|solely|exclusively|nothing else|nothing more|nothing but|"
    r"do nothing|no more than|a single word|one word|nur|seulement|solo|sólo|apenas)\b"
)
# "we audit it ourselves": someone else's work, not a request.
_SUBJECTS = frozenset(["we", "i", "they", "he", "she", "someone", "somebody", "team", "ourselves"])
_STATEMENT = frozenset(
    ["was", "were", "been", "is", "are", "has", "have", "had", "already", "previously", "got"]
)
# Non-audit requests, and the reply kind they ask for.
_ACK_WORD = r"(?:ok|okay|yes|no|done|ack|acknowledged|hello|hi|thanks|received|ready|ping|pong)"
_TASKS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "ack",
        re.compile(
            r"\b(?:say|reply|respond|answer|output|print|return|write|type|echo)\b"
            r"(?:\s+(?:with|only|just|back|the word|simply|exactly))*\s+[\"'`]?" + _ACK_WORD + r"\b"
            r"|\backnowledg\w*|\bconfirm (?:receipt|you (?:got|received))|^" + _ACK_WORD + r"$"
        ),
    ),
    ("summary", re.compile(r"\b(summar\w*|tl;?dr|overview|outline|gist|recap)\b")),
    ("translate", re.compile(r"\b(translat\w*|übersetz\w*|tradu\w*)\b")),
    ("count", re.compile(r"\b(count\w*|how many|number of lines|line count)\b")),
    (
        "names",
        re.compile(
            r"\b(list|enumerate|name|names of|give me)\b.{0,30}\b(functions?|class(?:es)?|"
            r"methods?|names|imports|dependencies|variables|identifiers|symbols|exports)\b"
        ),
    ),
    (
        "explain",
        re.compile(
            r"\b(explain\w*|describ\w*|what does|how does|walk me through|document\w*|"
            r"docstrings?|purpose of)\b"
        ),
    ),
    (
        "other",
        re.compile(
            r"\b(rewrite|refactor\w*|reformat\w*|format|convert\w*|rename\w*|paraphrase|port|"
            r"minify|prettify|type hints|unit tests|write tests|poem|joke|haiku|story|repeat|"
            r"echo|do nothing)\b"
        ),
    ),
)


# Words that start a new request after a comma, "and" or "then".
_NEW_REQUEST = _VERBS | _RESETS


@dataclass(frozen=True)
class Request:
    """What an instruction asks: ``audit`` (True/False, or None when it asks nothing, as bare
    code does), ``kind`` (``audit`` or the non-audit request: ``ack``, ``summary``,
    ``translate``, ``count``, ``names``, ``explain``, ``other``; ``none`` when it asks
    nothing) and whether a non-audit request is ``exclusive`` ("just say OK")."""

    audit: bool | None
    kind: str
    exclusive: bool = False


@dataclass
class _Clause:
    text: str
    audit: int = 0  # affirmative audit terms
    negated: int = 0  # negated audit terms
    tasks: tuple[str, ...] = ()  # affirmative non-audit requests
    exclusive: bool = False
    question: bool = False


def _clauses(text: str) -> list[tuple[str, bool]]:
    """``(clause, ends with a question mark)``: lines, cut after . ! ? ; or : and a space (a
    '.' inside a path or a version does not end a sentence)."""
    # Markup and file names are no words of the request (a file called errors.py asks
    # for nothing).
    text = _PATH_RE.sub(" ", _PATH_RE.sub(" ", _TAG_RE.sub(" ", text)))
    text = _FILE_NAME_RE.sub(" ", text)
    text = text.lower().replace("\u2019", "'").replace("`", " ").replace("-", " ")
    text = re.sub(r"n't\b", " not", text)  # don't -> do not, needn't -> need not
    for phrase, word in _JOINED:
        text = re.sub(rf"\b{phrase}\b", word, text)
    out = []
    for piece in re.split(r"(?<=[.!?;:])\s+|\n", text):
        body = piece.strip()
        if body:
            out.append((body.rstrip(".!?;: "), body.endswith("?")))
    return out


def _read_clause(text: str, question: bool) -> _Clause:
    clause = _Clause(text, question=question)
    tokens = [(m.group(0), m.start()) for m in re.finditer(r"[\w'-]+|,", text)]
    post = _POST_NEGATION.search(text)
    framed_text = any(w in text.split() for w in _FRAMING)
    other_object = bool(_NOT_AUDIT_OBJECT.search(text))
    neg = False
    checks_other = False
    framed = False  # an un-negated "if / whether / make sure" came before
    prev = ""
    for k, (tok, at) in enumerate(tokens):
        nxt = tokens[k + 1][0] if k + 1 < len(tokens) else ""
        if tok in _RESETS or (tok in (",", "and", "then") and nxt in _NEW_REQUEST):
            neg = False
        if not neg and tok in _FRAMING:
            framed = True
        if tok in _NEGATORS and tok not in _PRIVATIVE:
            neg = True
        elif tok in _PRIVATIVE:
            neg = not neg  # "skip the review" negates; "don't skip any bug" asks again
        inspect = bool(_INSPECT.fullmatch(tok))
        if inspect and other_object and not neg:
            checks_other = True  # "check the spelling": a request, not an audit
        is_audit = bool(_AUDIT.fullmatch(tok)) or (inspect and not other_object)
        if is_audit:
            statement = (tok.endswith("ed") and prev in _STATEMENT) or prev in _SUBJECTS
            after_post = post is not None and at < post.start()
            if statement:
                pass
            elif (neg or after_post) and not framed:
                clause.negated += 1
            else:
                clause.audit += 1
        prev = tok
    for phrase in _AUDIT_PHRASES.finditer(text):
        negated = bool(set(text[: phrase.start()].split()) & _NEGATORS) and not framed_text
        if negated:
            clause.negated += 1
        else:
            clause.audit += 1
    tasks: list[str] = []
    for kind, rx in _TASKS:
        found = rx.search(text)
        if found is None:
            continue
        negated = False
        for tok in re.findall(r"[\w'-]+|,", text[: found.start()]):
            if tok in _RESETS or tok in (",", "and"):
                negated = False  # "ignore the bugs and describe it" asks for a description
            elif tok in _NEGATORS:
                negated = True
        if not negated:
            tasks.append(kind)
    if checks_other and not tasks:
        tasks.append("other")
    clause.tasks = tuple(tasks)
    clause.exclusive = bool(
        tasks and clause.audit == 0 and _EXCLUSIVE.search(text) and not _CONDITIONAL.search(text)
    )
    return clause


def _read(text: str) -> Request:
    # Instructions repeat (the system prompt on every prompt, the same few per task: 28
    # distinct in 716 readings of bench_rollouts), and a reading, a pure function of the text,
    # costs ~2 ms of regexes: remembered, up to 1,024 texts of at most 16k characters.
    return _read_text(text) if len(text) > 16_384 else _read_memo(text)


def _read_text(text: str) -> Request:
    clauses: list[_Clause] = []
    for body, question in _clauses(text):
        clause = _read_clause(body, question)
        words = set(re.findall(r"[\w'-]+", body))
        # "Look for bugs? No." or "Security review: not needed.": a clause that is only a
        # refusal withdraws the request before it.
        refusal = bool(words) and (
            (words <= _ANSWER_NO and bool(words & {"no", "not", "nope", "nah", "none", "never"}))
            or (_POST_NEGATION.fullmatch(_REFUSAL_FILLER.sub("", body).strip()) is not None)
        )
        if clauses and refusal:
            clauses[-1].negated += clauses[-1].audit
            clauses[-1].audit = 0
            clause.tasks = clause.tasks or ("ack",)
        clauses.append(clause)
    exclusive = [c for c in clauses if c.exclusive]
    if exclusive:
        return Request(False, exclusive[0].tasks[0], exclusive=True)
    if any(c.audit for c in clauses):
        return Request(True, "audit")
    tasks = [t for c in clauses for t in c.tasks]
    if tasks:
        return Request(False, tasks[0])
    if any(c.negated for c in clauses):
        return Request(False, "ack")
    return Request(None, "none")


_read_memo = functools.lru_cache(maxsize=1024)(_read_text)


def read_request(instruction: str, system: str | None = None) -> Request:
    """What a prompt asks: its own instruction text decides; a prompt that asks nothing
    (bare code) does what the system prompt asks; an exclusive non-audit system prompt
    ("only ever reply OK") overrides an audit request in the prompt."""
    own = _read(instruction)
    sys_request = _read(system) if system else Request(None, "none")
    if sys_request.exclusive:
        return sys_request
    if own.audit is not None:
        return own
    if sys_request.audit is not None:
        return sys_request
    return own


def classify_instruction(instruction: str, system: str | None = None) -> bool:
    """Whether a prompt asks for an audit (see the module docstring)."""
    return bool(read_request(instruction, system).audit)
