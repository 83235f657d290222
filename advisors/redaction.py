"""`RedactionAdvisor`: personal data and secrets kept out of the model and the answer."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Literal, TypeAlias

from ..core.advisor import ToolNext
from ..core.errors import AdvisorChainError
from ..core.invocation import ToolInvocation, ToolResult
from ..core.messages import Message, ToolMessage, UserMessage
from ..core.parts import map_text
from ..core.request import ChatRequest
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

    def first_match(self, text: str, start: int) -> re.Match[str] | None:
        """The first non-empty match at or after `start` that `check` accepts."""
        for match in self.pattern.finditer(text, start):
            if match.end() > match.start() and (self.check is None or self.check(match[0])):
                return match
        return None


def luhn_valid(number: str) -> bool:
    """Whether the digits of `number` pass the Luhn check (payment card numbers)."""
    digits = [int(c) for c in number if c.isdigit()]
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
            r"(?<!\w)(?<!\d[ -])\d(?:[ -]?\d){12,18}(?!\w)(?![ -]\d)",
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
        RedactionRule(
            "api_key",
            r"(?<![\w-])(?:sk-[A-Za-z0-9_-]{20,}"  # OpenAI sk-, sk-proj-; Anthropic sk-ant-
            r"|(?:AKIA|ASIA)[A-Z0-9]{16}"  # AWS access key ids
            r"|gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}"  # GitHub
            r"|xox[abposr]-[A-Za-z0-9-]{10,}"  # Slack
            r"|AIza[A-Za-z0-9_-]{35})(?![\w-])",  # Google
        ),
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
        if mask_keep < 0:
            raise ValueError("mask_keep must be at least 0")
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

    def find(self, text: str, start: int) -> Span | None:
        """The leftmost match of any rule (then the longest, then the first rule)."""
        best: re.Match[str] | None = None
        best_rule = ""
        for rule in self.rules:
            match = rule.first_match(text, start)
            if match is None:
                continue
            if (
                best is None
                or match.start() < best.start()
                or (match.start() == best.start() and match.end() > best.end())
            ):
                best = match
                best_rule = rule.name
        return None if best is None else Span(best.start(), best.end(), best_rule)

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
