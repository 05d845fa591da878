"""Real parts for the tests: the actgate binary built from this repository and run as
``actgate serve`` with a configuration of the tests' own, a streamable-HTTP MCP server (the
upstream, counting its own invocations), and a scripted model server answering with recorded
Anthropic Messages, Chat Completions and Responses outputs. Loopback only."""

from __future__ import annotations

import http.client
import http.server
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
SDK = os.path.dirname(HERE)
REPO = os.path.abspath(os.path.join(SDK, "..", ".."))

UPSTREAM_TOKEN = "upstream-credential-of-the-host-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_actgate(dest_dir: str) -> str:
    """go build -o DEST/actgate ./cmd/actgate from the repository root."""
    out = os.path.join(dest_dir, "actgate")
    subprocess.run([os.environ.get("GO", "go"), "build", "-o", out, "./cmd/actgate"], cwd=REPO, check=True)
    return out


# --- the upstream MCP server --------------------------------------------------------------

class Upstream:
    """A streamable-HTTP MCP server (JSON responses) with get_balance, send_payment and
    email_send; it counts its own tools/call invocations per tool and keeps their arguments.
    It answers only the holder of UPSTREAM_TOKEN."""

    TOOLS = ["get_balance", "send_payment", "email_send"]

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: List[tuple] = []
        up = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                if self.headers.get("Authorization") != "Bearer " + UPSTREAM_TOKEN:
                    return self._send(401, {"error": "unauthorized"})
                try:
                    msg = json.loads(body)
                except ValueError:
                    return self._send(400, {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}})
                method, mid = msg.get("method"), msg.get("id")
                if mid is None:
                    self.send_response(202)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if method == "initialize":
                    res = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                           "serverInfo": {"name": "test-bank", "version": "1"}}
                elif method == "tools/list":
                    res = {"tools": [{"name": t, "inputSchema": {"type": "object"}} for t in up.TOOLS]}
                elif method == "tools/call":
                    p = msg.get("params") or {}
                    name, args = p.get("name"), p.get("arguments") or {}
                    with up.lock:
                        up.calls.append((name, args))
                    res = {"content": [{"type": "text", "text": json.dumps({"ok": True, "tool": name, "args": args}, sort_keys=True)}]}
                else:
                    return self._send(200, {"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}})
                self._send(200, {"jsonrpc": "2.0", "id": mid, "result": res})

            def _send(self, status: int, obj: Any) -> None:
                b = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(b)))
                self.end_headers()
                self.wfile.write(b)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def count(self, tool: str) -> int:
        with self.lock:
            return sum(1 for n, _ in self.calls if n == tool)

    def args_of(self, tool: str) -> List[dict]:
        with self.lock:
            return [a for n, a in self.calls if n == tool]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class MCPTool:
    """The host's local tool: one MCP tools/call on the upstream with the host's credential
    (in a host loop the host is the executor, tool-use-binding §15)."""

    def __init__(self, url: str, name: str) -> None:
        self.url, self.name = url, name
        self.seq = 0

    def __call__(self, args: dict) -> Any:
        self.seq += 1
        u = urllib.parse.urlsplit(self.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        try:
            body = json.dumps({"jsonrpc": "2.0", "id": self.seq, "method": "tools/call", "params": {"name": self.name, "arguments": args}})
            conn.request("POST", u.path, body=body, headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                                                             "Authorization": "Bearer " + UPSTREAM_TOKEN})
            r = conn.getresponse()
            msg = json.loads(r.read())
        finally:
            conn.close()
        if "error" in msg:
            raise RuntimeError(msg["error"].get("message", "tool error"))
        return json.loads(msg["result"]["content"][0]["text"])


def host_tools(up: Upstream) -> Dict[str, MCPTool]:
    return {t: MCPTool(up.url, t) for t in Upstream.TOOLS}


# --- the gate -----------------------------------------------------------------------------

POLICY = """policy:
  podSelector: {}
  servers:
  - name: finance
    url: %(upstream)s
  rules:
  - name: balances
    tools: [get_balance]
    consequenceClass: INFORMATIONAL
  - name: payments
    tools: [send_payment]
    consequenceClass: FINANCIAL
    evidence:
      role: HumanAuthorization
      principals: [alice]
    arguments:
    - name: amount-cap
      expression: double(args.amount) <= 10000.0
      message: an agent may not pay more than 10000 at once
    alternatives:
    - label: Pay at most 100 now
      reasoning: Caps the amount while the rest is checked.
      args:
        amount: 100
  - name: email
    tools: [email_send]
    consequenceClass: COMMUNICATION
    evidence:
      role: PolicyPermit
    provenance:
    - sources: [retrieval, tool_output]
      action: Deny
  - name: computer-use
    tools: [computer]
    consequenceClass: COMMUNICATION
    destinations: ["https://pay.example"]
"""


class Gate:
    """``actgate serve`` with the policy of testdata/gate/actgate.yaml, its upstream pointed
    at the test's MCP server, in a directory of its own."""

    def __init__(self, binary: str, upstream: Upstream, workdir: str) -> None:
        self.binary, self.dir = binary, workdir
        os.makedirs(workdir, exist_ok=True)
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        tok = os.path.join(workdir, "finance.token")
        with open(tok, "w") as f:
            f.write(UPSTREAM_TOKEN + "\n")
        os.chmod(tok, 0o600)
        self.config = os.path.join(workdir, "actgate.yaml")
        with open(self.config, "w") as f:
            f.write(f"""listen: 127.0.0.1:{self.port}
dataDir: ./data
sinkID: actgate-sdk-python
agent:
  name: host-agent
principals:
- name: alice
upstreams:
- server: finance
  bearerTokenFile: ./finance.token
metrics:
  address: "off"
callTimeout: 30s
""" + POLICY % {"upstream": json.dumps(upstream.url)})
        self.proc: Optional[subprocess.Popen] = None
        self.log = open(os.path.join(workdir, "serve.log"), "ab")

    def start(self) -> None:
        self.proc = subprocess.Popen([self.binary, "serve", "--config", self.config], cwd=self.dir,
                                     stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"actgate serve exited {self.proc.returncode}: {self.log_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("actgate serve did not listen")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def log_text(self) -> str:
        self.log.flush()
        with open(os.path.join(self.dir, "serve.log"), "rb") as f:
            return f.read().decode("utf-8", "replace")

    def _read(self, rel: str) -> str:
        with open(os.path.join(self.dir, "data", rel)) as f:
            return f.read().strip()

    @property
    def agent_token(self) -> str:
        return self._read("agents/host-agent.token")

    @property
    def alice_token(self) -> str:
        return self._read("principals/alice.token")

    def api(self, method: str, path: str, token: str, body: Any = None) -> tuple:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            data = json.dumps(body).encode() if body is not None else None
            hdr = {"Authorization": "Bearer " + token}
            if data is not None:
                hdr["Content-Type"] = "application/json"
            conn.request(method, path, body=data, headers=hdr)
            r = conn.getresponse()
            raw = r.read()
            try:
                return r.status, (json.loads(raw) if raw else None)
            except ValueError:
                return r.status, raw.decode("utf-8", "replace")
        finally:
            conn.close()

    def moments(self) -> List[dict]:
        st, ms = self.api("GET", "/v1/moments", self.alice_token)
        assert st == 200, (st, ms)
        return ms["moments"] if isinstance(ms, dict) else ms

    def resolve(self, moment_id: str, digest: str, option: int = 0) -> dict:
        st, res = self.api("POST", f"/v1/moments/{moment_id}/resolve", self.alice_token,
                           {"binding_moment_resolution": {"envelope_digest": digest, "resolution": "option", "option_idx": option}})
        assert st == 200, (st, res)
        return res

    def decline(self, moment_id: str, digest: str) -> dict:
        st, res = self.api("POST", f"/v1/moments/{moment_id}/resolve", self.alice_token,
                           {"binding_moment_resolution": {"envelope_digest": digest, "resolution": "declined"}})
        assert st == 200, (st, res)
        return res

    def close(self) -> None:
        self.stop()
        self.log.close()


# --- the scripted model ---------------------------------------------------------------------

class ScriptedModel:
    """A model server on loopback answering POST /v1/messages, /v1/chat/completions and
    /v1/responses with recorded outputs, in order; a recorded list of events is streamed as
    server-sent events. It keeps every request body (what the host loop sent the model)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.script: Dict[str, List[Any]] = {}
        self.requests: List[tuple] = []
        model = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n) or b"null")
                with model.lock:
                    model.requests.append((self.path, body))
                    queue = model.script.get(self.path) or []
                    out = queue.pop(0) if queue else None
                if out is None:
                    b = b'{"type":"error","error":{"type":"not_found_error","message":"no scripted answer"}}'
                    self.send_response(404)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(b)))
                    self.end_headers()
                    self.wfile.write(b)
                    return
                if isinstance(out, list):  # a stream
                    chunks = b"".join(f"event: {e.get('type')}\ndata: {json.dumps(e)}\n\n".encode() for e in out)
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Content-Length", str(len(chunks)))
                    self.end_headers()
                    self.wfile.write(chunks)
                    return
                b = json.dumps(out).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(b)))
                self.end_headers()
                self.wfile.write(b)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def push(self, path: str, *outputs: Any) -> None:
        with self.lock:
            self.script.setdefault(path, []).extend(outputs)

    def post(self, path: str, body: dict) -> Any:
        """What a vendor SDK does: POST the request, read the JSON answer."""
        u = urllib.parse.urlsplit(self.base_url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        try:
            conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            raw = r.read()
            if r.status != 200:
                raise RuntimeError(f"model answered {r.status}: {raw[:200]!r}")
            if r.getheader("Content-Type", "").startswith("text/event-stream"):
                return raw.decode().splitlines(keepends=True)
            return json.loads(raw)
        finally:
            conn.close()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def tempdir() -> str:
    return tempfile.mkdtemp(prefix="actgate-sdk-py-")


def rmtree(d: str) -> None:
    shutil.rmtree(d, ignore_errors=True)
