"""guard: a tool call through the gate, from the model's block to the result the model reads.

guard enforces the block; on allow it runs the tool once and reports the outcome (executed
with the result, failed on an exception, indeterminate when the host cannot know whether the
tool took effect); on a refusal it returns the gate's vendor-shaped refusal (the EF code,
``invoked: false``) without running the tool; on EF_ESCALATION_REQUIRED it returns the
binding moment, or with ``wait`` re-enforces the same block in the same session until the
principal resolved it. A timeout, a transport error or an answer it cannot read never runs
the tool (tool-use-binding §16: fail closed).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, List, Mapping, Optional, Union

from .client import (
    CODE_BAD_RESPONSE,
    CODE_UNAVAILABLE,
    OUTCOME_EXECUTED,
    OUTCOME_FAILED,
    OUTCOME_INDETERMINATE,
    VENDOR_ANTHROPIC,
    VENDOR_OPENAI,
    VENDOR_OPENAI_RESPONSES,
    Client,
    Completion,
    Decision,
    HostLoopError,
)
from .vendors import (
    anthropic_tool_uses,
    call_arguments,
    call_name,
    error_result,
    openai_tool_calls,
    responses_function_calls,
    tool_result,
)

__all__ = [
    "guard",
    "Outcome",
    "Indeterminate",
    "run_anthropic",
    "run_openai_chat",
    "run_openai_responses",
    "EXECUTED",
    "FAILED",
    "INDETERMINATE",
    "DENIED",
    "ESCALATED",
    "REPLAYED",
    "UNAVAILABLE",
]

# Statuses of an Outcome.
EXECUTED = "executed"  # the tool ran and returned
FAILED = "failed"  # the tool ran and raised
INDETERMINATE = "indeterminate"  # the tool ran; whether it took effect is unknown
DENIED = "denied"  # the gate refused; the tool did not run
ESCALATED = "escalated"  # a principal must resolve a binding moment; the tool did not run
REPLAYED = "replayed"  # a retry of a settled dispatch: the recorded result; the tool did not run
UNAVAILABLE = "unavailable"  # no usable answer from the gate; the tool did not run


class Indeterminate(Exception):
    """Raised by a tool that cannot tell whether its effect happened (a lost connection after
    the request was sent): guard reports the dispatch indeterminate."""


ToolFn = Callable[[dict], Any]


@dataclass
class Outcome:
    """What guard did with one tool call. ``tool_result`` is what the model reads next (the
    vendor-shaped result, or the gate's refusal); ``invoked`` says whether the tool ran."""

    status: str
    decision: Optional[Decision]
    tool_result: dict
    invoked: bool = False
    value: Any = None
    error: Optional[BaseException] = None
    complete_error: Optional[HostLoopError] = None
    # completion is what the gate recorded for a dispatch under authority (its journal state).
    completion: Optional[Completion] = None

    @property
    def binding_moment(self) -> Optional[dict]:
        """The envelope of an escalation (envelope-04), for the principal's surface."""
        return self.decision.binding_moment if self.decision else None


def _refused(vendor: str, block: dict, d: Decision, status: str) -> Outcome:
    if d.deny is not None:
        res = d.deny
    elif d.code:
        res = error_result(vendor, block, d.code, d.message, d.retryable)
    else:  # a refusal without a code is an answer the wrapper cannot read: still no run
        res = error_result(vendor, block, CODE_BAD_RESPONSE, "The gate refused without a code; the tool did not run.")
    return Outcome(status=status, decision=d, tool_result=res)


def _pick(tool: Union[ToolFn, Mapping[str, ToolFn]], name: str) -> Optional[ToolFn]:
    if isinstance(tool, Mapping):
        return tool.get(name)
    return tool


def guard(
    client: Client,
    block: dict,
    tool: Union[ToolFn, Mapping[str, ToolFn]],
    *,
    vendor: str = VENDOR_ANTHROPIC,
    server: Optional[str] = None,
    session: Optional[str] = None,
    provenance: Optional[str] = None,
    destination: Optional[str] = None,
    wait: bool = False,
    poll_interval: float = 1.0,
    wait_timeout: float = 300.0,
    indeterminate_errors: tuple = (Indeterminate, TimeoutError, ConnectionError),
    on_escalation: Optional[Callable[[Decision], None]] = None,
    pass_decision: bool = False,
) -> Outcome:
    """Runs one tool call through the gate. ``tool`` is the local function (called with the
    arguments dict) or a mapping from tool name to function. With ``wait``, an escalation is
    polled every ``poll_interval`` seconds (re-enforcing the same block in the same session)
    until it is resolved or ``wait_timeout`` passed; ``on_escalation`` is called once with the
    escalation (to show the binding moment). With ``pass_decision`` the tool is called as
    ``tool(args, decision)``: ``decision.operation_id`` is the idempotency key to give an
    upstream that takes one. ``destination`` is the URL the tool will contact (Client.enforce).
    Parallel tool calls of one turn are separate acts: call guard once per block."""
    deadline = time.monotonic() + wait_timeout
    announced = False
    while True:
        try:
            d = client.enforce(block, vendor=vendor, server=server, session=session, provenance=provenance, destination=destination)
        except HostLoopError as e:
            code = e.code if e.code != CODE_BAD_RESPONSE else CODE_UNAVAILABLE
            msg = "The gate gave no usable answer; the tool did not run."
            return Outcome(status=UNAVAILABLE, decision=None, tool_result=error_result(vendor, block, code, msg), error=e)
        if d.replayed:
            # A retry of a dispatch already settled in this session: the recorded result is the
            # tool's result; the tool does not run again (tool-use-binding §9).
            return Outcome(status=REPLAYED, decision=d, tool_result=tool_result(vendor, block, d.result), value=d.result)
        if d.allow:
            return _run(client, block, tool, vendor, d, indeterminate_errors, pass_decision)
        if not d.escalated:
            return _refused(vendor, block, d, DENIED)
        if on_escalation is not None and not announced:
            announced = True
            on_escalation(d)
        if not wait or time.monotonic() + poll_interval > deadline:
            return _refused(vendor, block, d, ESCALATED)
        time.sleep(poll_interval)


def _run(client: Client, block: dict, tool: Any, vendor: str, d: Decision, indeterminate_errors: tuple, pass_decision: bool) -> Outcome:
    fn = _pick(tool, call_name(block, vendor))
    try:
        args = call_arguments(block, vendor)
    except ValueError as e:
        args, fn, err = None, None, e
    else:
        err = None if fn is not None else LookupError("the host has no such tool")
    if fn is None:
        # Allowed, but the host cannot run it: nothing ran, so the dispatch failed.
        res = {"error": {"code": "HOST_TOOL_UNAVAILABLE", "message": str(err), "invoked": False}}
        out = Outcome(status=FAILED, decision=d, tool_result=tool_result(vendor, block, res, is_error=True), error=err)
        return _report(out, client, d, OUTCOME_FAILED, res)
    try:
        value = fn(args, d) if pass_decision else fn(args)
    except indeterminate_errors as e:
        out = Outcome(status=INDETERMINATE, decision=d, invoked=True, error=e,
                      tool_result=tool_result(vendor, block, {"error": {"message": "the tool's outcome is unknown"}}, is_error=True))
        return _report(out, client, d, OUTCOME_INDETERMINATE, None)
    except Exception as e:  # the tool's own failure: reported, then handed to the model
        res = {"error": {"type": type(e).__name__, "message": str(e)[:200]}}
        out = Outcome(status=FAILED, decision=d, invoked=True, error=e, tool_result=tool_result(vendor, block, res, is_error=True))
        return _report(out, client, d, OUTCOME_FAILED, res)
    except BaseException:
        # Interrupted (KeyboardInterrupt, SystemExit) while the tool ran: unknown effect.
        _complete(client, d, OUTCOME_INDETERMINATE, None)
        raise
    out = Outcome(status=EXECUTED, decision=d, invoked=True, value=value, tool_result=tool_result(vendor, block, value))
    return _report(out, client, d, OUTCOME_EXECUTED, value)


def _report(out: Outcome, client: Client, d: Decision, outcome: str, result: Any) -> Outcome:
    out.completion, out.complete_error = _complete(client, d, outcome, result)
    return out


def _complete(client: Client, d: Decision, outcome: str, result: Any) -> tuple:
    """Reports the outcome of a dispatch under authority (an allow on the hot path has no
    operation to report). A report that fails leaves the dispatch to the gate's timeout, after
    which it is INDETERMINATE; the error is returned, not raised: the tool already ran."""
    if not d.operation_id:
        return None, None
    try:
        return client.complete(d.operation_id, outcome, _jsonable(result)), None
    except HostLoopError as e:
        return None, e
    except ValueError:  # a result that is not JSON (NaN): the outcome without it
        try:
            return client.complete(d.operation_id, outcome, None), None
        except HostLoopError as e:
            return None, e


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, (str, int, float, bool, list, dict)):
        return v
    return str(v)


def _run_all(client: Client, blocks: List[dict], tools: Any, vendor: str, **kw: Any) -> List[Outcome]:
    return [guard(client, b, tools, vendor=vendor, **kw) for b in blocks]


def run_anthropic(client: Client, message: dict, tools: Any, **kw: Any) -> List[Outcome]:
    """Guards every tool_use block of a Messages API response, each its own act; the
    outcomes' tool_result blocks, in order, are the next user message's content.

    A message whose stop_reason is null is still streaming: none of its blocks is complete and
    none is enforced or run. With stop_reason "max_tokens" the last tool_use block may be cut
    off: it is not enforced or run (tool-use-binding §9); the model reads EF_ACT_INVALID."""
    blocks = anthropic_tool_uses(message)
    cut = 0
    if isinstance(message, dict) and "stop_reason" in message:
        if message["stop_reason"] is None:
            cut = len(blocks)
        elif message["stop_reason"] == "max_tokens" and blocks:
            cut = 1
    outs = _run_all(client, blocks[:len(blocks) - cut], tools, VENDOR_ANTHROPIC, **kw)
    for b in blocks[len(blocks) - cut:]:
        msg = "The tool call may be incomplete (the message was cut off); it did not run."
        outs.append(Outcome(status=DENIED, decision=None, tool_result=error_result(VENDOR_ANTHROPIC, b, "EF_ACT_INVALID", msg)))
    return outs


def run_openai_chat(client: Client, completion: dict, tools: Any, **kw: Any) -> List[Outcome]:
    """Guards every tool_calls entry of a Chat Completions response, each its own act; the
    outcomes' tool messages, in order, follow the assistant message."""
    return _run_all(client, openai_tool_calls(completion), tools, VENDOR_OPENAI, **kw)


def run_openai_responses(client: Client, response: dict, tools: Any, **kw: Any) -> List[Outcome]:
    """Guards every function_call item of a Responses API response, each its own act; the
    outcomes' function_call_output items are the next request's input."""
    return _run_all(client, responses_function_calls(response), tools, VENDOR_OPENAI_RESPONSES, **kw)
