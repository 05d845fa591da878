"""Vendor shapes: reading tool calls out of Anthropic Messages, OpenAI Chat Completions and
OpenAI Responses outputs (plain dicts, as the APIs return them), rendering a tool's result in
the shape the model reads next, and assembling a streamed Anthropic message.

A streamed tool_use block's input arrives as partial JSON deltas; a block is handed out only
once its content_block_stop arrived and its accumulated JSON parses, so a host loop enforces
once, on the complete block (tool-use-binding §9), never on a prefix of it.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator, List, Optional

from .client import VENDOR_ANTHROPIC, VENDOR_OPENAI, VENDOR_OPENAI_RESPONSES

__all__ = [
    "anthropic_tool_uses",
    "openai_tool_calls",
    "responses_function_calls",
    "call_id",
    "call_name",
    "call_arguments",
    "tool_result",
    "error_result",
    "AnthropicStream",
    "sse_events",
    "StreamError",
]

# MAX_STREAM_INPUT_BYTES bounds the partial JSON one streamed tool_use block may accumulate;
# the gate refuses larger inputs anyway (act.DefaultMaxInputBytes).
MAX_STREAM_INPUT_BYTES = 1 << 20
# MAX_STREAM_BLOCKS bounds the content blocks of one streamed message.
MAX_STREAM_BLOCKS = 1024


class StreamError(ValueError):
    """A streamed message that cannot be assembled (out-of-order events, bad JSON)."""


def anthropic_tool_uses(message: Any) -> List[dict]:
    """The tool_use blocks of a Messages API response, in order (parallel tool use: each is
    its own act)."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]


def openai_tool_calls(completion: Any) -> List[dict]:
    """The tool_calls entries of a Chat Completions response's first choice (or of a message
    dict), in order."""
    msg = completion
    if isinstance(completion, dict) and isinstance(completion.get("choices"), list):
        choices = completion["choices"]
        msg = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
    calls = msg.get("tool_calls") if isinstance(msg, dict) else None
    if not isinstance(calls, list):
        return []
    return [c for c in calls if isinstance(c, dict)]


def responses_function_calls(response: Any) -> List[dict]:
    """The function_call output items of a Responses API response, in order."""
    output = response.get("output") if isinstance(response, dict) else None
    if not isinstance(output, list):
        return []
    return [i for i in output if isinstance(i, dict) and i.get("type") == "function_call"]


def call_id(block: dict, vendor: str) -> str:
    """The id the tool's result answers: tool_use_id, tool_call_id or call_id."""
    key = "call_id" if vendor == VENDOR_OPENAI_RESPONSES else "id"
    v = block.get(key) if isinstance(block, dict) else None
    return v if isinstance(v, str) else ""


def call_name(block: dict, vendor: str) -> str:
    """The tool the block names."""
    if not isinstance(block, dict):
        return ""
    if vendor == VENDOR_OPENAI:
        fn = block.get("function")
        v = fn.get("name") if isinstance(fn, dict) else None
    else:
        v = block.get("name")
    return v if isinstance(v, str) else ""


def _no_duplicates(pairs: list) -> dict:
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate member {k!r}")
        out[k] = v
    return out


def _strict_loads(text: str) -> Any:
    def bad_constant(c: str) -> Any:
        raise ValueError(f"{c} is not JSON")

    return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=bad_constant)


def call_arguments(block: dict, vendor: str) -> dict:
    """The arguments the tool runs with: the tool_use input object, or the JSON text of a
    function call's arguments, parsed strictly (no duplicate members, no NaN). Raises
    ValueError when they are not one JSON object."""
    if vendor == VENDOR_ANTHROPIC:
        args = block.get("input")
    else:
        fn = block.get("function") if vendor == VENDOR_OPENAI else block
        text = fn.get("arguments") if isinstance(fn, dict) else None
        if not isinstance(text, str):
            raise ValueError("the call has no arguments text")
        args = _strict_loads(text) if text.strip() else {}
    if not isinstance(args, dict):
        raise ValueError("the arguments are not a JSON object")
    return args


def _text(result: Any) -> str:
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False, separators=(",", ":"), default=str)


def tool_result(vendor: str, block: dict, result: Any, is_error: bool = False) -> dict:
    """The tool's result in the shape the model reads next: an Anthropic tool_result content
    block, a Chat Completions tool message or a Responses function_call_output item."""
    cid = call_id(block, vendor)
    text = _text(result)
    if vendor == VENDOR_ANTHROPIC:
        out: dict = {"type": "tool_result", "tool_use_id": cid, "content": text}
        if is_error:
            out["is_error"] = True
        return out
    if vendor == VENDOR_OPENAI:
        return {"role": "tool", "tool_call_id": cid, "content": text}
    return {"type": "function_call_output", "call_id": cid, "output": text}


def error_result(vendor: str, block: dict, code: str, message: str, retryable: bool = False) -> dict:
    """A refusal the wrapper renders itself (the gate gave none, or could not be reached), in
    the §17 error-object shape the gate's own denies have: invoked is false."""
    obj = {"error": {"code": code, "message": message, "retryable": retryable, "invoked": False}}
    if vendor == VENDOR_ANTHROPIC:
        return {"type": "tool_result", "tool_use_id": call_id(block, vendor), "is_error": True,
                "content": [{"type": "text", "text": _text(obj)}]}
    return tool_result(vendor, block, obj)


def sse_events(lines: Iterable[Any]) -> Iterator[dict]:
    """The JSON data of each server-sent event in ``lines`` (text or bytes lines, e.g. an
    HTTP response read line by line), as the Messages API streams them."""
    data: List[str] = []
    for line in lines:
        if isinstance(line, (bytes, bytearray)):
            line = line.decode("utf-8")
        line = line.rstrip("\r\n")
        if line == "":
            if data:
                payload = "\n".join(data)
                data = []
                try:
                    ev = json.loads(payload)
                except ValueError as e:
                    raise StreamError(f"event data is not JSON: {e}") from None
                if isinstance(ev, dict):
                    yield ev
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if name == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        try:
            ev = json.loads("\n".join(data))
        except ValueError as e:
            raise StreamError(f"event data is not JSON: {e}") from None
        if isinstance(ev, dict):
            yield ev


class AnthropicStream:
    """Assembles a streamed Messages API response from its events (message_start,
    content_block_start, content_block_delta, content_block_stop, message_delta,
    message_stop). ``feed`` returns the tool_use blocks an event completed: a block is
    complete at its content_block_stop, when its accumulated input JSON parses. ``message``
    is the message assembled so far."""

    def __init__(self) -> None:
        self.message: dict = {"content": []}
        self._partial: dict = {}  # index → accumulated partial_json
        self._open: set = set()
        self.stopped = False

    def feed(self, event: dict) -> List[dict]:
        t = event.get("type") if isinstance(event, dict) else None
        if t == "message_start":
            m = event.get("message")
            if not isinstance(m, dict):
                raise StreamError("message_start without a message")
            self.message = dict(m)
            self.message["content"] = list(m.get("content") or [])
            return []
        if t == "content_block_start":
            idx, blk = event.get("index"), event.get("content_block")
            content = self.message["content"]
            if not isinstance(idx, int) or not isinstance(blk, dict) or idx != len(content):
                raise StreamError("content_block_start out of order")
            if len(content) >= MAX_STREAM_BLOCKS:
                raise StreamError("too many content blocks")
            content.append(dict(blk))
            self._open.add(idx)
            if blk.get("type") == "tool_use":
                self._partial[idx] = ""
            return []
        if t == "content_block_delta":
            idx, delta = event.get("index"), event.get("delta")
            if idx not in self._open or not isinstance(delta, dict):
                raise StreamError("content_block_delta for a block that is not open")
            blk = self.message["content"][idx]
            dt = delta.get("type")
            if dt == "input_json_delta":
                if idx not in self._partial or not isinstance(delta.get("partial_json"), str):
                    raise StreamError("input_json_delta for a block that is not tool_use")
                self._partial[idx] += delta["partial_json"]
                if len(self._partial[idx]) > MAX_STREAM_INPUT_BYTES:
                    raise StreamError("tool_use input larger than the bound")
            elif dt == "text_delta" and isinstance(delta.get("text"), str):
                blk["text"] = blk.get("text", "") + delta["text"]
            return []
        if t == "content_block_stop":
            idx = event.get("index")
            if idx not in self._open:
                raise StreamError("content_block_stop for a block that is not open")
            self._open.discard(idx)
            if idx not in self._partial:
                return []
            text = self._partial.pop(idx)
            try:
                value = _strict_loads(text) if text.strip() else {}
            except ValueError as e:
                raise StreamError(f"tool_use input is not JSON: {e}") from None
            if not isinstance(value, dict):
                raise StreamError("tool_use input is not a JSON object")
            blk = self.message["content"][idx]
            blk["input"] = value
            return [blk]
        if t == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, dict):
                for k in ("stop_reason", "stop_sequence"):
                    if k in delta:
                        self.message[k] = delta[k]
            return []
        if t == "message_stop":
            self.stopped = True
            return []
        if t == "error":
            raise StreamError("the stream ended with an error event")
        return []  # ping and events of later API versions

    def complete_tool_uses(self) -> List[dict]:
        """The tool_use blocks whose input is complete."""
        return [b for i, b in enumerate(self.message["content"])
                if isinstance(b, dict) and b.get("type") == "tool_use" and i not in self._open and i not in self._partial]


def stream_tool_uses(events: Iterable[dict]) -> Iterator[dict]:
    """Yields each tool_use block of a streamed message as soon as it is complete."""
    s = AnthropicStream()
    for ev in events:
        for blk in s.feed(ev):
            yield blk


__all__.append("stream_tool_uses")
