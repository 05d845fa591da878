"""The host-loop HTTP API of actgate: POST /v1/enforce and POST /v1/complete.

The same two paths are served by ``actgate serve`` (authenticated with the agent's bearer
token) and by the pod's sidecar on its loopback listener (no token). The wire shape is the
one docs/api.md describes and api/openapi/hostloop.yaml specifies; this module speaks it
with the standard library only.

A Decision allows a tool call only when the gate answered ``"allow": true`` with no refusal
code. Every other answer, an answer that does not parse, a timeout or a transport error is a
refusal or an exception: the caller never runs the tool on it (tool-use-binding §16).
"""

from __future__ import annotations

import http.client
import json
import threading
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Optional

__all__ = [
    "Client",
    "Decision",
    "Completion",
    "HostLoopError",
    "TransportError",
    "VENDOR_ANTHROPIC",
    "VENDOR_OPENAI",
    "VENDOR_OPENAI_RESPONSES",
    "OUTCOME_EXECUTED",
    "OUTCOME_FAILED",
    "OUTCOME_INDETERMINATE",
    "EF_ESCALATION_REQUIRED",
]

ENFORCE_PATH = "/v1/enforce"
COMPLETE_PATH = "/v1/complete"

VENDOR_ANTHROPIC = "anthropic"
VENDOR_OPENAI = "openai"
VENDOR_OPENAI_RESPONSES = "openai-responses"
VENDORS = (VENDOR_ANTHROPIC, VENDOR_OPENAI, VENDOR_OPENAI_RESPONSES)

OUTCOME_EXECUTED = "executed"
OUTCOME_FAILED = "failed"
OUTCOME_INDETERMINATE = "indeterminate"
OUTCOMES = (OUTCOME_EXECUTED, OUTCOME_FAILED, OUTCOME_INDETERMINATE)

PROVENANCES = ("user", "system", "retrieval", "tool_output")

EF_ESCALATION_REQUIRED = "EF_ESCALATION_REQUIRED"

# Error codes of the host-loop API (docs/api.md), and the ones this client adds for answers
# it could not get or could not read.
CODE_BAD_REQUEST = "HOSTLOOP_BAD_REQUEST"
CODE_UNKNOWN_OPERATION = "HOSTLOOP_UNKNOWN_OPERATION"
CODE_SETTLED = "HOSTLOOP_SETTLED"
CODE_UNAVAILABLE = "HOSTLOOP_UNAVAILABLE"
CODE_UNAUTHENTICATED = "HOSTLOOP_UNAUTHENTICATED"
CODE_BAD_RESPONSE = "HOSTLOOP_BAD_RESPONSE"

# MAX_RESPONSE_BYTES bounds an answer of the gate: a decision carries at most one binding
# moment envelope and one recorded result.
MAX_RESPONSE_BYTES = 8 << 20
DEFAULT_TIMEOUT = 30.0


class HostLoopError(Exception):
    """A host-loop request the gate refused as a request (not a refused tool call), or an
    answer this client could not use. ``code`` is the HOSTLOOP_* code; ``status`` the HTTP
    status (None when there was no answer)."""

    def __init__(self, code: str, message: str, status: Optional[int] = None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status


class TransportError(HostLoopError):
    """No answer: the gate could not be reached, the connection broke or the request timed
    out. Whether the gate consumed an authority is unknown; the tool must not run."""

    def __init__(self, message: str):
        super().__init__(CODE_UNAVAILABLE, message, None)


def _str(v: Any, name: str) -> str:
    if v is None:
        return ""
    if not isinstance(v, str):
        raise HostLoopError(CODE_BAD_RESPONSE, f"member {name} is not a string")
    return v


def _bool(v: Any, name: str) -> bool:
    if v is None:
        return False
    if not isinstance(v, bool):
        raise HostLoopError(CODE_BAD_RESPONSE, f"member {name} is not a boolean")
    return v


@dataclass(frozen=True)
class Decision:
    """The answer of POST /v1/enforce (tool-use-binding §16 {allow, authority_id, code,
    message} and what the host needs to continue). Members mirror the wire names."""

    allow: bool = False
    authority_id: str = ""
    code: str = ""
    message: str = ""
    retryable: bool = False
    operation_id: str = ""
    state: str = ""
    act_id: str = ""
    binding_moments: list = field(default_factory=list)
    envelope_digest: str = ""
    binding_moment: Optional[dict] = None
    resolutions: list = field(default_factory=list)
    audit_code: str = ""
    replayed: bool = False
    result: Any = None
    deny: Optional[dict] = None

    @property
    def escalated(self) -> bool:
        """True when the call waits for a principal's binding moment."""
        return not self.allow and self.code == EF_ESCALATION_REQUIRED

    @classmethod
    def from_json(cls, obj: Any) -> "Decision":
        """Reads a decision; a member of the wrong type is HOSTLOOP_BAD_RESPONSE. Unknown
        members are ignored (later versions may add some). An allow that also carries a
        refusal code, or is a replay, is not an allow."""
        if not isinstance(obj, dict):
            raise HostLoopError(CODE_BAD_RESPONSE, "the decision is not a JSON object")
        moments = obj.get("binding_moments")
        moments = [] if moments is None else moments
        if not isinstance(moments, list) or not all(isinstance(m, str) for m in moments):
            raise HostLoopError(CODE_BAD_RESPONSE, "member binding_moments is not a list of strings")
        resolutions = obj.get("resolutions")
        resolutions = [] if resolutions is None else resolutions
        if not isinstance(resolutions, list):
            raise HostLoopError(CODE_BAD_RESPONSE, "member resolutions is not a list")
        bm = obj.get("binding_moment")
        if bm is not None and not isinstance(bm, dict):
            raise HostLoopError(CODE_BAD_RESPONSE, "member binding_moment is not an object")
        deny = obj.get("deny")
        if deny is not None and not isinstance(deny, dict):
            raise HostLoopError(CODE_BAD_RESPONSE, "member deny is not an object")
        code = _str(obj.get("code"), "code")
        replayed = _bool(obj.get("replayed"), "replayed")
        allow = obj.get("allow") is True and code == "" and not replayed
        if not isinstance(obj.get("allow", False), bool):
            raise HostLoopError(CODE_BAD_RESPONSE, "member allow is not a boolean")
        return cls(
            allow=allow,
            authority_id=_str(obj.get("authority_id"), "authority_id"),
            code=code,
            message=_str(obj.get("message"), "message"),
            retryable=_bool(obj.get("retryable"), "retryable"),
            operation_id=_str(obj.get("operation_id"), "operation_id"),
            state=_str(obj.get("state"), "state"),
            act_id=_str(obj.get("act_id"), "act_id"),
            binding_moments=list(moments),
            envelope_digest=_str(obj.get("envelope_digest"), "envelope_digest"),
            binding_moment=bm,
            resolutions=list(resolutions),
            audit_code=_str(obj.get("audit_code"), "audit_code"),
            replayed=replayed,
            result=obj.get("result"),
            deny=deny,
        )


@dataclass(frozen=True)
class Completion:
    """The answer of POST /v1/complete: the dispatch and the journal state recorded for it."""

    operation_id: str
    state: str


class Client:
    """A client of the host-loop API.

    ``base_url`` is the gate: ``http://127.0.0.1:8787`` for ``actgate serve`` or the pod
    sidecar's ``http://127.0.0.1:15080``. ``token`` is the agent's bearer token (serve needs
    it; the sidecar does not). ``timeout`` bounds each request in seconds. Redirects are not
    followed and proxy variables of the environment are not used: the token goes only to
    ``base_url``. One Client may be used from several threads (a connection per thread).
    """

    def __init__(self, base_url: str, token: Optional[str] = None, timeout: float = DEFAULT_TIMEOUT):
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError("base_url must be an http:// or https:// URL with a host")
        if u.query or u.fragment or u.username or u.password:
            raise ValueError("base_url must not carry a query, a fragment or credentials")
        if token is not None and (not isinstance(token, str) or not token or any(c in token for c in "\r\n")):
            raise ValueError("token must be a non-empty single-line string")
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ValueError("timeout must be a positive number of seconds")
        self._https = u.scheme == "https"
        self._host = u.hostname
        self._port = u.port
        self._prefix = u.path.rstrip("/")
        self._token = token
        self.timeout = float(timeout)
        self._local = threading.local()

    # -- the two calls -------------------------------------------------------------------

    def enforce(
        self,
        block: Any,
        vendor: str = VENDOR_ANTHROPIC,
        server: Optional[str] = None,
        session: Optional[str] = None,
        provenance: Optional[str] = None,
        destination: Optional[str] = None,
    ) -> Decision:
        """Asks the gate whether the host may run the tool call ``block`` (an Anthropic
        tool_use block, a Chat Completions tool_calls entry or a Responses function_call
        item, as the vendor's API returned it: a dict, or its JSON text) now, once.

        ``destination`` is the URL the host is about to contact for the call: the URL its MCP
        client is connected to, an HTTP API endpoint, or for computer use the live page's URL.
        Omitted, the gate takes the server's configured URL. A destination the policy does not
        allow is refused EF_DESTINATION_MISMATCH and the authority is bound to it
        (tool-use-binding §12 MCP_SERVER_SWAP and COMPUTER_USE_ORIGIN_CHANGE, §22 T-D and T-E;
        docs/api.md "Destinations (T-D, T-E)")."""
        if vendor not in VENDORS:
            raise ValueError(f"vendor must be one of {', '.join(VENDORS)}")
        if provenance is not None and provenance not in PROVENANCES:
            raise ValueError(f"provenance must be one of {', '.join(PROVENANCES)}")
        if isinstance(block, (bytes, bytearray)):
            block = block.decode("utf-8")
        if isinstance(block, str):
            try:
                block = json.loads(block)
            except ValueError as e:
                raise ValueError(f"block is not JSON: {e}") from None
        if not isinstance(block, dict):
            raise ValueError("block must be a JSON object")
        body: dict = {"vendor": vendor, "block": block}
        if server:
            body["server"] = server
        if session:
            body["session"] = session
        if provenance:
            body["provenance"] = provenance
        if destination is not None:
            if not isinstance(destination, str) or not destination:
                raise ValueError("destination must be a non-empty URL string")
            body["destination"] = destination
        return Decision.from_json(self._post(ENFORCE_PATH, body))

    def complete(self, operation_id: str, outcome: str, result: Any = None) -> Completion:
        """Reports what became of a dispatch the gate allowed under authority: ``executed``
        (with the tool's result, any JSON value), ``failed`` or ``indeterminate`` (the host
        cannot know whether the tool took effect). A dispatch is settled once: a second report
        is HOSTLOOP_SETTLED."""
        if not isinstance(operation_id, str) or not operation_id:
            raise ValueError("operation_id is required")
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}")
        body: dict = {"operation_id": operation_id, "outcome": outcome}
        if result is not None:
            body["result"] = result
        obj = self._post(COMPLETE_PATH, body)
        if not isinstance(obj, dict):
            raise HostLoopError(CODE_BAD_RESPONSE, "the answer is not a JSON object")
        return Completion(_str(obj.get("operation_id"), "operation_id"), _str(obj.get("state"), "state"))

    def close(self) -> None:
        """Closes this thread's connection."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # -- transport ----------------------------------------------------------------------

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            conn = cls(self._host, self._port, timeout=self.timeout)
            self._local.conn = conn
        return conn

    def _post(self, path: str, body: dict) -> Any:
        try:
            data = json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
        except (TypeError, ValueError) as e:
            raise ValueError(f"the request is not JSON: {e}") from None
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._token:
            headers["Authorization"] = "Bearer " + self._token
        # A kept-alive connection the server closed while idle fails before any answer; the
        # request is sent once more on a new connection. Sending an enforce twice is safe: the
        # gate answers a repeat of a call it already consumed with a replay or EF_INDETERMINATE,
        # never a second allow.
        for attempt in (0, 1):
            conn = self._connection()
            reused = conn.sock is not None
            try:
                conn.request("POST", self._prefix + path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read(MAX_RESPONSE_BYTES + 1)
                status = resp.status
                ctype = resp.getheader("Content-Type", "")
                if resp.will_close:
                    self.close()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                self.close()
                if reused and attempt == 0:
                    continue
                raise TransportError(f"{type(e).__name__}: {e}") from None
            except (OSError, http.client.HTTPException) as e:
                # Timeouts (socket.timeout is an OSError), refused connections, bad status lines.
                self.close()
                raise TransportError(f"{type(e).__name__}: {e}") from None
            break
        if len(raw) > MAX_RESPONSE_BYTES:
            self.close()
            raise HostLoopError(CODE_BAD_RESPONSE, f"answer larger than {MAX_RESPONSE_BYTES} bytes", status)
        obj: Any = None
        if ctype.split(";")[0].strip() == "application/json":
            try:
                obj = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                obj = None
        if status != 200:
            code, msg = _error_of(obj, status)
            raise HostLoopError(code, msg, status)
        if obj is None:
            raise HostLoopError(CODE_BAD_RESPONSE, "the answer is not JSON", status)
        return obj


def _error_of(obj: Any, status: int) -> tuple:
    """The HOSTLOOP_* code and message of a refused request's body ({"error":{code,message}}),
    or one derived from the status when the body has none."""
    if isinstance(obj, dict) and isinstance(obj.get("error"), dict):
        e = obj["error"]
        code, msg = e.get("code"), e.get("message")
        if isinstance(code, str) and code:
            return code, msg if isinstance(msg, str) else ""
    if status in (401, 403):
        return CODE_UNAUTHENTICATED, f"HTTP {status}"
    if status >= 500:
        return CODE_UNAVAILABLE, f"HTTP {status}"
    return CODE_BAD_REQUEST, f"HTTP {status}"
