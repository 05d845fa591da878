"""actgate_host: put actgate's gate on a Python host loop's tool calls (standard library only).

    from actgate_host import Client, run_anthropic
    gate = Client("http://127.0.0.1:8787", token=open(".actgate/agents/demo-agent.token").read().strip())
    outcomes = run_anthropic(gate, message, {"get_balance": get_balance})
    messages.append({"role": "user", "content": [o.tool_result for o in outcomes]})

See README.md and docs/api.md ("Host loops").
"""

from .client import (
    EF_ESCALATION_REQUIRED,
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
    TransportError,
)
from .guard import (
    DENIED,
    ESCALATED,
    EXECUTED,
    FAILED,
    INDETERMINATE,
    REPLAYED,
    UNAVAILABLE,
    Indeterminate,
    Outcome,
    guard,
    run_anthropic,
    run_openai_chat,
    run_openai_responses,
)
from .vendors import (
    AnthropicStream,
    StreamError,
    anthropic_tool_uses,
    call_arguments,
    openai_tool_calls,
    responses_function_calls,
    sse_events,
    stream_tool_uses,
    tool_result,
)

__version__ = "0.1.0"

__all__ = [
    "Client", "Completion", "Decision", "HostLoopError", "TransportError", "guard", "Outcome", "Indeterminate",
    "run_anthropic", "run_openai_chat", "run_openai_responses", "AnthropicStream", "StreamError", "sse_events",
    "stream_tool_uses", "anthropic_tool_uses", "openai_tool_calls", "responses_function_calls", "call_arguments",
    "tool_result", "VENDOR_ANTHROPIC", "VENDOR_OPENAI", "VENDOR_OPENAI_RESPONSES", "OUTCOME_EXECUTED", "OUTCOME_FAILED",
    "OUTCOME_INDETERMINATE", "EF_ESCALATION_REQUIRED", "EXECUTED", "FAILED", "INDETERMINATE", "DENIED", "ESCALATED",
    "REPLAYED", "UNAVAILABLE", "__version__",
]
