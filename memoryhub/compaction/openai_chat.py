"""``openai-chat-v1``: narrative written by an OpenAI-compatible chat-completions endpoint.

Facts, open items, refs and coverage are computed deterministically (as in ``extractive-v1``);
the model only writes the narrative, so no fact ever lives only inside model prose. The
narrative is redacted for secrets and cut to the token budget before it is stored.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx

from memoryhub.compaction.base import (
    CompactionError,
    Compactor,
    CompactorUnavailable,
    NothingToCompact,
    TransientCompactorError,
    register,
)
from memoryhub.compaction.extract import (
    carried_content,
    collect_refs,
    coverable_prefix,
    new_events,
    salient_tokens,
)
from memoryhub.compaction.secret_scan import redact_secrets
from memoryhub.compaction.tokens import (
    DEFAULT_ENCODING,
    count_json_tokens,
    count_tokens,
    truncate_to_tokens,
)
from memoryhub.compaction.types import (
    CompactionResult,
    PreviousSummary,
    SourceEvent,
)

PROMPT_TEMPLATE_VERSION = "narrative-prompt-1"

SYSTEM_PROMPT = """\
You compact the working memory of a long-running multi-agent workflow.
Write a concise narrative of what happened: who did what, what was decided, what is still open.
Structured facts (requirements, scopes, approvals, issues, test ids, source versions) are kept
separately and verbatim; mention them by key where useful but do not list them exhaustively.
Never include credentials, API keys or tokens.
Answer with a JSON object and nothing else: {"narrative": "<text>"}.
Keep the narrative under %(narrative_tokens)d tokens."""

USER_PROMPT = """\
Previous narrative (events 1..%(previous_to)s):
%(previous)s

Structured facts so far:
%(facts)s

New events:
%(events)s"""

_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


@register
class OpenAIChatCompactor(Compactor):
    """Chat-completions compactor; unavailable (with a clear message) until an endpoint is set."""

    name = "openai-chat-v1"
    version = "1.0.0"
    algorithm_version = "llm-narrative+deterministic-facts-1"
    prompt_template_version = PROMPT_TEMPLATE_VERSION
    keep_salient = False  # v2: identifiers, paths, numbers… are kept deterministically too

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        token_budget: int | None = 2000,
        encoding: str = DEFAULT_ENCODING,
        event_tokens: int = 600,
    ) -> None:
        if not base_url or not model:
            raise CompactorUnavailable(
                f"compactor {self.name!r} is not configured: set MEMORYHUB_LLM_BASE_URL "
                "(e.g. http://127.0.0.1:8001/v1) and MEMORYHUB_LLM_MODEL, plus "
                "MEMORYHUB_LLM_API_KEY if the endpoint needs one"
            )
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.token_budget = token_budget
        self.encoding = encoding
        self.event_tokens = event_tokens  # cap per event in the prompt, bounding request size

    def compact(self, previous: PreviousSummary | None, events: list[SourceEvent]) -> CompactionResult:
        covered = coverable_prefix(new_events(previous, events))
        if not covered:
            raise NothingToCompact("no event can be covered after the previous watermark")
        prev_content, content = carried_content(previous, covered)
        facts = content["facts"]
        if self.keep_salient:
            content["salient"] = salient_tokens(prev_content.get("salient"), covered, facts)
        room = (
            None
            if self.token_budget is None
            else self.token_budget - count_json_tokens(content, self.encoding)
        )
        if room is not None and room <= 0:
            # Facts alone fill the budget: no prose fits, so do not pay for a model call.
            model, tokens_in, tokens_out = self.model, 0, 0
        else:
            messages = self._messages(previous, prev_content, facts, covered, room)
            model, narrative, tokens_in, tokens_out = self._complete(messages)
            content["narrative"] = self._fit(content, redact_secrets(narrative))
        token_count = count_json_tokens(content, self.encoding)
        return CompactionResult(
            content=content,
            covers_from_seq=previous.covers_from_seq if previous else covered[0].seq,
            covers_to_seq=covered[-1].seq,
            source_refs=collect_refs(previous, covered),
            model=model,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            token_count=token_count,
            excluded_categories=["purged_content"] if any(e.purged for e in covered) else [],
        )

    def _messages(
        self,
        previous: PreviousSummary | None,
        prev_content: dict[str, Any],
        facts: list[dict[str, Any]],
        covered: list[SourceEvent],
        room: int | None,
    ) -> list[dict[str, str]]:
        lines = []
        for event in covered:
            if event.purged:
                lines.append(f"#{event.seq} [purged]")
                continue
            text = truncate_to_tokens(redact_secrets(event.content), self.event_tokens, self.encoding)
            lines.append(f"#{event.seq} {event.agent or event.role}/{event.kind}: {text}")
        fact_lines = [f"- {f['key']} ({f['kind']}, {f['state']}): {f['text']}" for f in facts]
        system = SYSTEM_PROMPT % {"narrative_tokens": room if room is not None else 1000}
        user = USER_PROMPT % {
            "previous_to": previous.covers_to_seq if previous else 0,
            "previous": redact_secrets(prev_content.get("narrative", "")) or "(none)",
            "facts": "\n".join(fact_lines) or "(none)",
            "events": "\n".join(lines),
        }
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def _complete(self, messages: list[dict[str, str]]) -> tuple[str, str, int, int]:
        """POST the chat completion; returns (model id, narrative, prompt and completion tokens)."""
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        body = {
            "model": self.model,
            "messages": messages,
            "temperature": 0,
            "response_format": {"type": "json_object"},
        }
        url = f"{self.base_url}/chat/completions"
        try:
            response = httpx.post(url, json=body, headers=headers, timeout=self.timeout)
        except httpx.TimeoutException as exc:
            raise TransientCompactorError(f"LLM endpoint timed out after {self.timeout}s") from exc
        except httpx.TransportError as exc:
            raise TransientCompactorError(f"LLM endpoint unreachable: {exc}") from exc
        if response.status_code == 429 or response.status_code >= 500:
            raise TransientCompactorError(
                f"LLM endpoint answered HTTP {response.status_code}: {response.text[:200]}"
            )
        if response.status_code >= 400:
            raise CompactionError(
                f"LLM endpoint rejected the request with HTTP {response.status_code}: {response.text[:200]}"
            )
        try:
            data = response.json()
            text = data["choices"][0]["message"]["content"]
            narrative = _parse_narrative(text)
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            # Models occasionally answer off-format; another attempt usually succeeds.
            raise TransientCompactorError(f"LLM endpoint returned malformed content: {exc}") from exc
        usage = data.get("usage") or {}
        prompt_text = "\n".join(m["content"] for m in messages)
        tokens_in = int(usage.get("prompt_tokens") or count_tokens(prompt_text, self.encoding))
        tokens_out = int(usage.get("completion_tokens") or count_tokens(text, self.encoding))
        return str(data.get("model") or self.model), narrative, tokens_in, tokens_out

    def _fit(self, content: dict[str, Any], narrative: str) -> str:
        """``narrative`` cut until the whole content fits the token budget."""
        if self.token_budget is None:
            return narrative
        limit = count_tokens(narrative, self.encoding)
        while narrative:
            if count_json_tokens(dict(content, narrative=narrative), self.encoding) <= self.token_budget:
                return narrative
            limit = int(limit * 0.9)
            narrative = truncate_to_tokens(narrative, limit, self.encoding)
        return ""


def _parse_narrative(text: str) -> str:
    """The ``narrative`` string from the model's JSON answer (tolerating code fences)."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        match = _JSON_OBJECT.search(text)
        if not match:
            raise
        parsed = json.loads(match.group(0))
    narrative = parsed["narrative"] if isinstance(parsed, dict) else None
    if not isinstance(narrative, str):
        raise ValueError("answer has no string 'narrative'")
    return narrative.strip()


@register
class OpenAIChatCompactorV2(OpenAIChatCompactor):
    """``openai-chat-v2``: v1 plus the deterministic ``salient`` block (as in extractive-v2), so
    the identifiers, paths and numbers rules-6 checks never depend on the model's prose."""

    name = "openai-chat-v2"
    version = "2.0.0"
    algorithm_version = "llm-narrative+deterministic-facts+salient-2"
    keep_salient = True
