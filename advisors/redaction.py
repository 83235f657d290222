"""`RedactionAdvisor`: personal data and secrets kept out of the model and the answer."""

from __future__ import annotations

import hashlib
import hmac
import re
import unicodedata
from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any, Literal, TypeAlias

from ..core.advisor import ToolNext
from ..core.checks import require_number
from ..core.errors import AdvisorChainError
from ..core.invocation import ToolInvocation, ToolResult
from ..core.messages import AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage
from ..core.parts import map_text
from ..core.request import ChatRequest
from ..core.response import ChatResponse
from ..core.scrub import API_KEY_PATTERN
from .text_transform import Span, TextRewriter, TextTransformAdvisor

Strategy: TypeAlias = Literal["redact", "mask", "hash", "block"]
"""What a match becomes: `[REDACTED:email]`, `****.***@*******.com`, `[email:3f2a9c1b0e4d]`,
or nothing at all: `block` refuses the text (see `RedactionAdvisor`)."""

Target: TypeAlias = Literal["user", "tool", "answer"]
"""Where rules apply: user messages and tool results (what the model receives), and the
answer (what the caller receives)."""

_STRATEGIES: tuple[Strategy, ...] = ("redact", "mask", "hash", "block")
_TARGETS: tuple[Target, ...] = ("user", "tool", "answer")


class RedactionBlocked(AdvisorChainError):
    """A rule with the `block` strategy matched; the text was refused, never passed on.

    `rule` names the rule and `target` where it matched (`user`, `tool` or `answer`); the
    matched text is in neither, nor in the message.
    """

    def __init__(self, rule: str, target: str) -> None:
        super().__init__(f"redaction rule {rule!r} blocked the {target} text")
        self.rule = rule
        self.target = target


@dataclass(frozen=True)
class RedactionRule:
    """A named pattern to redact: a regular expression, optionally confirmed by `check`.

    `check(matched_text)` can reject a match (the built-in card rule checks Luhn, IBAN
    mod 97). `strategy` overrides the advisor's for this rule. The pattern runs on
    model-controlled text: keep it linear (no nested quantifiers such as `(a+)+`), and its
    matches within the advisor's `max_match` characters (longer ones may be cut short).
    """

    name: str
    pattern: re.Pattern[str]
    check: Callable[[str], bool] | None = field(default=None, compare=False)
    strategy: Strategy | None = None

    def __init__(
        self,
        name: str,
        pattern: str | re.Pattern[str],
        *,
        check: Callable[[str], bool] | None = None,
        strategy: Strategy | None = None,
    ) -> None:
        compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
        if not name:
            raise ValueError("a redaction rule needs a name")
        if compiled.fullmatch("") is not None:
            raise ValueError(f"redaction rule {name!r} matches the empty text")
        if strategy is not None and strategy not in _STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r}; use one of {_STRATEGIES}")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "pattern", compiled)
        object.__setattr__(self, "check", check)
        object.__setattr__(self, "strategy", strategy)

    def first_match(self, text: str, start: int, end: int | None = None) -> re.Match[str] | None:
        """The first non-empty match at or after `start` (and within `text[:end]`) that
        `check` accepts."""
        matches = (
            self.pattern.finditer(text, start)
            if end is None
            else (self.pattern.finditer(text, start, end))
        )
        for match in matches:
            if match.end() > match.start() and (self.check is None or self.check(match[0])):
                return match
        return None


def luhn_valid(number: str) -> bool:
    """Whether the digits of `number` pass the Luhn check (payment card numbers)."""
    digits = [int(c) for c in number if c.isdecimal()]
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return bool(digits) and total % 10 == 0


def iban_valid(iban: str) -> bool:
    """Whether `iban` (spaces allowed) has a valid ISO 13616 mod-97 check."""
    compact = iban.replace(" ", "").upper()
    if not 15 <= len(compact) <= 34 or not compact.isalnum():
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


_DATE = re.compile(r"\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{4}")
_PHONE_GROUPS = re.compile(r"\d+")


def _phone_valid(text: str) -> bool:
    groups = _PHONE_GROUPS.findall(text)
    digits = sum(map(len, groups))
    if not (8 if text.startswith("+") else 9) <= digits <= 15:
        return False
    if _DATE.search(text):
        return False
    if len(groups) > 1 and (any(len(g) > 8 for g in groups) or min(map(len, groups[1:])) < 2):
        return False  # decimals (3.14159265) and runs of single digits are not numbers to call
    return True


# Every built-in pattern is linear: no nested ambiguous quantifiers, a look-behind so that
# a search starts only at the beginning of a run, bounded repetitions.
BUILTIN_RULES: dict[str, RedactionRule] = {
    rule.name: rule
    for rule in (
        RedactionRule(
            "email",
            r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}@"
            r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.){1,8}[A-Za-z]{2,24}"
            r"(?![A-Za-z0-9-])",
        ),
        RedactionRule(
            "card",
            r"(?<!\w)(?<!\d[ -])(?<!\d[ -]{2})(?<!\d[ -]{3})\d(?:[ -]{0,3}\d){12,18}"
            r"(?!\w)(?![ -]{1,3}\d)",
            check=luhn_valid,
        ),
        RedactionRule(
            "phone",
            r"(?<![\w+])(?<!\d[ .-])[+(]?\d(?:[ .()-]{0,2}\d){7,14}(?!\w)(?![ .-]\d)",
            check=_phone_valid,
        ),
        RedactionRule(
            "iban",
            r"(?<!\w)[A-Z]{2}\d{2}(?:[A-Z0-9]{11,30}|(?: [A-Z0-9]{4}){2,7}(?: [A-Z0-9]{1,3})?)"
            r"(?!\w)",
            check=iban_valid,
        ),
        RedactionRule("api_key", API_KEY_PATTERN),
    )
}
"""The built-in rules by name: `email`, `card` (13-19 digits, Luhn), `phone` (9-15 digits,
or 8-15 after `+`, not dates), `iban` (compact or in groups of four, mod 97), `api_key`
(`sk-...`, `sk-ant-...`, `AKIA...`, GitHub, Slack and Google key shapes)."""


class RedactionAdvisor(TextTransformAdvisor):
    """Finds personal data and secrets in what the model receives and what it answers.

    `RedactionAdvisor()` redacts e-mail addresses both ways. `rules` are built-in rule
    names (`BUILTIN_RULES`: `email`, `phone`, `card`, `iban`, `api_key`) or
    `RedactionRule`s with your own pattern. `apply_to` says where:

    - `user`: user messages of the request, before the rest of the chain sees them;
    - `tool`: tool results (every execution, in `call_tool`, and tool messages already
      in the request);
    - `answer`: what the caller receives: the answer's text, streamed deltas included
      (held back at most `hold_back - 1` characters, so a match cut across deltas is
      still found), and every assistant message of `response.messages`, so a memory
      placed before this link stores the redacted answer.

    Strategies (`strategy`, or per rule): `redact` writes `[REDACTED:<rule>]`; `mask`
    turns letters and digits into `*` except the last `mask_keep` (at most half of
    them), keeping punctuation; `hash` writes `[<rule>:<12 hex>]`, the start of
    HMAC-SHA256 keyed by `hash_salt` or, without a salt, of plain SHA-256: stable across
    processes, but an unsalted hash of a phone number can be found by trying them all,
    so give a secret salt when the text leaves your systems. `block` refuses: a match in
    a user message or in the answer raises `RedactionBlocked` (naming the rule, never
    the text) before the text is passed on, so a stream ends with that error after the
    text that preceded the match; a match in a tool result replaces the whole result
    with an error result, so the model learns that the result was withheld and every
    tool call stays answered.

    Where matches overlap, the one starting first wins, then the longer one, then the
    rule listed first. Control flow: calls `next` once; never short-circuits except by
    `RedactionBlocked`. Tool-call arguments and system messages are never changed.
    Place it after a `MemoryAdvisor` (nearer the model) so memory stores redacted
    turns, and before the `ToolCallingAdvisor` so it sees the whole turn once.
    """

    def __init__(
        self,
        rules: Iterable[str | RedactionRule] = ("email",),
        *,
        strategy: Strategy = "redact",
        apply_to: Iterable[Target] = _TARGETS,
        mask_keep: int = 4,
        hash_salt: str | bytes | None = None,
        hold_back: int = 256,
        max_match: int | None = None,
    ) -> None:
        self.rules: tuple[RedactionRule, ...] = tuple(_rule(r) for r in rules)
        if not self.rules:
            raise ValueError("RedactionAdvisor needs at least one rule")
        names = [r.name for r in self.rules]
        if len(set(names)) != len(names):
            raise ValueError(f"redaction rule names must be unique: {names}")
        if strategy not in _STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r}; use one of {_STRATEGIES}")
        self.strategy: Strategy = strategy
        self._strategies: dict[str, Strategy] = {r.name: r.strategy or strategy for r in self.rules}
        self.apply_to: frozenset[Target] = frozenset(apply_to)
        unknown = self.apply_to - set(_TARGETS)
        if unknown:
            raise ValueError(f"unknown apply_to {sorted(unknown)}; use some of {_TARGETS}")
        require_number(mask_keep, "mask_keep", minimum=0, integer=True)
        require_number(hold_back, "hold_back", minimum=1, integer=True)
        require_number(max_match, "max_match", minimum=1, integer=True, optional=True)
        self.mask_keep = mask_keep
        self._salt = hash_salt.encode() if isinstance(hash_salt, str) else hash_salt
        self.hold_back = hold_back
        self.max_match = max_match if max_match is not None else hold_back - hold_back // 4
        # raises ValueError for sizes that cannot work
        TextRewriter(self.find, self.replace, hold_back=self.hold_back, max_match=self.max_match)

    def __repr__(self) -> str:
        rules = [r.name for r in self.rules]
        return (
            f"RedactionAdvisor(rules={rules}, strategy={self.strategy!r}, "
            f"apply_to={sorted(self.apply_to)})"
        )

    @property
    def rewrites_answer(self) -> bool:
        return "answer" in self.apply_to

    @property
    def rewrites_progress(self) -> bool:
        return "answer" in self.apply_to or "tool" in self.apply_to

    def progress_rewriter(self) -> TextRewriter:
        """A rewriter for text shown as progress: a `block` match is replaced as by
        `redact` (the tool's result itself is withheld from the model as usual)."""
        return TextRewriter(
            self.find,
            lambda value, span: self._shown(value, span.label),
            hold_back=self.hold_back,
            max_match=self.max_match,
            lookbehind=self.lookbehind,
        )

    def rewrite_exception(self, exc: Exception) -> None:
        """Redact, in place, what `exc` and the exceptions it chains carry: a transcript
        (`messages`: user, tool and assistant messages as for their targets), a
        `response`, the answer's `raw_text`, a provider's `body`, and the text of the
        message (its string `args`, and `message`); a `block` match is replaced as by
        `redact` there, so the caller still gets the error it was raised with."""
        seen: set[int] = set()
        pending: list[BaseException] = [exc]
        while pending and len(seen) < _MAX_CHAINED:
            current = pending.pop()
            if id(current) in seen:
                continue
            seen.add(id(current))
            self._redact_payload(current)
            pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
            if isinstance(current, BaseExceptionGroup):
                pending.extend(current.exceptions)

    def redact_messages(self, messages: Iterable[Message]) -> tuple[Message, ...]:
        """A transcript as the caller may see it: user messages, tool results and
        assistant answers redacted as for their targets (`block` as `redact`)."""
        return tuple(self._shown_message(m) for m in messages)

    def find(self, text: str, start: int) -> Span | None:
        """The leftmost match of any rule (then the longest, then the first rule), grown
        to cover every match that overlaps it, so no part of one stays visible.

        Rules run on a view of `text` in which the characters that do not show are gone
        (zero-width and other format characters, such as U+200B and U+2060) and Unicode
        spaces and dashes are plain `" "` and `"-"`: `4242\u00a04242\u200b...` is
        matched as `4242 4242...`; the span returned is the original text's.
        """
        if text.isascii() or _INVISIBLE_OR_VARIANT().search(text) is None:
            return self._find(text, start)
        view, where = _plain_view(text)
        span = self._find(view, bisect_left(where, start))
        if span is None:
            return None
        return Span(where[span.start], where[span.end - 1] + 1, span.label)

    def _find(self, text: str, start: int) -> Span | None:
        # A match that began in the context (`text[:start]`, already emitted) and reaches
        # past `start` counts from `start`: the rest of a run of overlapping matches
        # longer than the window, which the previous window could only see in part.
        scan_from = max(0, start - self.lookbehind)
        firsts: list[tuple[RedactionRule, re.Match[str], int]] = []
        best: re.Match[str] | None = None
        best_at = 0
        best_rule = ""
        for rule in self.rules:
            match = _first_reaching(rule, text, scan_from, start)
            if match is None:
                continue
            at = max(match.start(), start)
            firsts.append((rule, match, at))
            if best is None or at < best_at or (at == best_at and match.end() > best.end()):
                best = match
                best_at = at
                best_rule = rule.name
        if best is None:
            return None
        begin, end, label = best_at, best.end(), best_rule
        if len(firsts) == 1:
            return Span(begin, end, label)
        # Grow the span over every match that overlaps it. A rule's matches are looked
        # for again only from where its last one seen ended, and only while the span
        # reaches past that: usually never, as no other rule's match starts inside it.
        seen = [at for _, _, at in firsts]  # where each rule's unseen part starts
        grown = True
        while grown:
            grown = False
            for i, (rule, first, at) in enumerate(firsts):
                while seen[i] < end:
                    if seen[i] == at:
                        other: re.Match[str] | None = first
                    else:
                        limit = min(len(text), end + self.max_match + _SLACK)
                        other = rule.first_match(text, seen[i], limit)
                    if other is None or other.start() >= end:
                        seen[i] = end
                        break
                    seen[i] = other.end()
                    if other.end() > end:
                        end = other.end()
                        grown = True
                        if self._strategy_of(rule.name) == "block":
                            label = rule.name  # the strictest rule decides
        return Span(begin, end, label)

    def replace(self, value: str, span: Span) -> str:
        """The answer's replacement for a match (raises `RedactionBlocked` for `block`)."""
        return self._replacement(value, span.label, "answer")

    def redact(self, text: str, target: Target = "answer") -> str:
        """`text` with every match replaced as for `target` (raises `RedactionBlocked`)."""
        rewriter = TextRewriter(
            self.find,
            lambda value, span: self._replacement(value, span.label, target),
            hold_back=self.hold_back,
            max_match=self.max_match,
            lookbehind=self.lookbehind,
        )
        return rewriter.rewrite(text)

    def rewrite_request(self, request: ChatRequest) -> ChatRequest:
        """User messages and tool results of the transcript redacted, as configured."""
        messages = tuple(self._inbound(m) for m in request.messages)
        if all(a is b for a, b in zip(messages, request.messages, strict=True)):
            return request
        return request.with_messages(messages)

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> ToolResult:
        """Redact every tool result (with `tool` in `apply_to`) before the model reads it."""
        result = await next(invocation)
        if "tool" not in self.apply_to or result.outcome == "deferred":
            return result
        try:
            content = map_text(result.content, lambda text: self.redact(text, "tool"))
        except RedactionBlocked as exc:
            return ToolResult(
                content=f"Error: the result was withheld (redaction rule {exc.rule!r})",
                outcome="error",
                error=exc,
            )
        return result if content is result.content else replace(result, content=content)

    def _inbound(self, message: Message) -> Message:
        if isinstance(message, UserMessage) and "user" in self.apply_to:
            content = map_text(message.content, lambda text: self.redact(text, "user"))
        elif isinstance(message, ToolMessage) and "tool" in self.apply_to:
            content = map_text(message.content, lambda text: self.redact(text, "tool"))
        else:
            return message
        if content is message.content:
            return message
        return message.model_copy(update={"content": content})

    def _redact_payload(self, exc: BaseException) -> None:
        answer = "answer" in self.apply_to
        values = getattr(exc, "__dict__", {})
        for name, value in list(values.items()):
            if name == "messages" and _is_transcript(value):
                new: Any = self.redact_messages(value)
            elif isinstance(value, ChatResponse):
                new = replace(value, messages=self.redact_messages(value.messages))
            elif answer and name in _TEXT_PAYLOADS and isinstance(value, str):
                new = self._shown_text(value)
            else:
                continue
            try:
                setattr(exc, name, new)
            except (AttributeError, TypeError):  # pragma: no cover - a read-only attribute
                pass
        if answer and any(isinstance(a, str) for a in exc.args):
            exc.args = tuple(self._shown_text(a) if isinstance(a, str) else a for a in exc.args)

    def _shown_message(self, message: Message) -> Message:
        if isinstance(message, UserMessage):
            target: Target = "user"
        elif isinstance(message, ToolMessage):
            target = "tool"
        elif isinstance(message, AssistantMessage):
            target = "answer"
        else:
            return message
        if target not in self.apply_to:
            return message
        content = map_text(message.content, self._shown_text)
        if content is message.content:
            return message
        return message.model_copy(update={"content": content or None})

    def _shown_text(self, text: str) -> str:
        return self.progress_rewriter().rewrite(text)

    def _shown(self, value: str, rule_name: str) -> str:
        if self._strategy_of(rule_name) == "block":
            return f"[REDACTED:{rule_name}]"
        return self._replacement(value, rule_name, "answer")

    def _replacement(self, value: str, rule_name: str, target: str) -> str:
        strategy = self._strategy_of(rule_name)
        if strategy == "redact":
            return f"[REDACTED:{rule_name}]"
        if strategy == "mask":
            return _mask(value, self.mask_keep)
        if strategy == "hash":
            data = value.encode()
            if self._salt is None:
                digest = hashlib.sha256(data).hexdigest()
            else:
                digest = hmac.new(self._salt, data, hashlib.sha256).hexdigest()
            return f"[{rule_name}:{digest[:12]}]"
        raise RedactionBlocked(rule_name, target)

    def _strategy_of(self, rule_name: str) -> Strategy:
        return self._strategies.get(rule_name, self.strategy)


_SLACK = 32
"""Characters past the longest match a rule's search for an overlap may look at."""

_MAX_CHAINED = 64
"""Most exceptions (causes, contexts, members of groups) redacted for one that is raised."""

_TEXT_PAYLOADS = frozenset({"raw_text", "body", "message", "server_text"})
"""Text attributes of exceptions that may quote the model or the user."""


def _first_reaching(
    rule: RedactionRule, text: str, scan_from: int, start: int
) -> re.Match[str] | None:
    """The first non-empty match of `rule` (from `scan_from`, that `check` accepts) that
    ends after `start`: it starts at or after `start`, or runs across it."""
    for match in rule.pattern.finditer(text, scan_from):
        if match.end() <= start or match.end() == match.start():
            continue
        if rule.check is None or rule.check(match[0]):
            return match
    return None


def _is_transcript(value: object) -> bool:
    return isinstance(value, tuple) and all(isinstance(m, _MESSAGE_TYPES) for m in value)


_MESSAGE_TYPES = (SystemMessage, UserMessage, AssistantMessage, ToolMessage)


@cache
def _INVISIBLE_OR_VARIANT() -> re.Pattern[str]:  # noqa: N802 - a lazily built constant
    """Characters the rules should not see as they are: format characters (zero-width
    spaces and joiners, soft hyphens, bidirectional marks, tags), spaces other than
    `" "` and dashes other than `"-"`."""
    ranges: list[list[int]] = []
    for first, last in _WHERE_THEY_ARE:
        for c in range(first, last):
            if unicodedata.category(chr(c)) in _VARIANT_CATEGORIES or c == 0x2212:
                if ranges and ranges[-1][1] == c - 1:
                    ranges[-1][1] = c
                else:
                    ranges.append([c, c])
    return re.compile(
        "[" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges) + "]"
    )


_VARIANT_CATEGORIES = frozenset({"Cf", "Zs", "Zl", "Zp", "Pd"})
_WHERE_THEY_ARE = ((0x80, 0x3100), (0xFE00, 0x20000), (0xE0000, 0xE1000))
"""The code point ranges that hold every character of `_VARIANT_CATEGORIES` (a test
checks it against the whole of Unicode): a scan of them takes milliseconds."""


def _plain_view(text: str) -> tuple[str, list[int]]:
    """`text` without format characters, its other spaces and dashes made plain, and for
    each character of that view its position in `text` (and `len(text)` at the end)."""
    out: list[str] = []
    where: list[int] = []
    special = _INVISIBLE_OR_VARIANT()
    last = 0
    for match in special.finditer(text):
        i = match.start()
        if i > last:
            out.append(text[last:i])
            where.extend(range(last, i))
        char = text[i]
        category = unicodedata.category(char)
        if category != "Cf":
            out.append(" " if category[0] == "Z" else "-")
            where.append(i)
        last = i + 1
    out.append(text[last:])
    where.extend(range(last, len(text) + 1))
    return "".join(out), where


def _rule(rule: str | RedactionRule) -> RedactionRule:
    if isinstance(rule, RedactionRule):
        return rule
    found = BUILTIN_RULES.get(rule)
    if found is None:
        raise ValueError(
            f"unknown built-in redaction rule {rule!r}; use one of {list(BUILTIN_RULES)}"
        )
    return found


def _mask(value: str, keep: int) -> str:
    alnum = sum(c.isalnum() for c in value)
    keep = min(keep, alnum // 2)
    out: list[str] = []
    for c in reversed(value):
        if c.isalnum():
            if keep > 0:
                keep -= 1
                out.append(c)
            else:
                out.append("*")
        else:
            out.append(c)
    return "".join(reversed(out))


__all__ = [
    "BUILTIN_RULES",
    "RedactionAdvisor",
    "RedactionBlocked",
    "RedactionRule",
    "Strategy",
    "Target",
    "iban_valid",
    "luhn_valid",
]
