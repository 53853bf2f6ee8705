"""``python -m llama_cpp.server --model M --model_alias A --host H --port P ...`` (fake).

The toy model flags every numbered line holding ``FAKE_LLAMA_TRIGGER`` (default
``eval(``) as a finding. ``FAKE_LLAMA_MODE=garbage`` answers prose instead of JSON.
Every request body is appended to ``$FAKE_LLAMA_LOG`` (JSON lines) with this pid.
As llama.cpp's server does with ``--api_key``, a request without that key as its bearer
token is answered 401 (and logged as refused).
"""

import argparse
import json
import os
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

parser = argparse.ArgumentParser()
parser.add_argument("--model")
parser.add_argument("--model_alias")
parser.add_argument("--host")
parser.add_argument("--port", type=int)
parser.add_argument("--api_key")
args, _unknown = parser.parse_known_args()
TRIGGER = os.environ.get("FAKE_LLAMA_TRIGGER", "eval(")
LINE_RE = re.compile(r"^\s*(\d+) \| (.*)$")


def answer(body):
    text = body["messages"][-1]["content"]
    if os.environ.get("FAKE_LLAMA_MODE") == "garbage":
        return "Sure! The code looks risky, I think."
    findings = []
    for line in text.split("\n"):
        m = LINE_RE.match(line)
        if m and TRIGGER in m.group(2):
            findings.append(
                {
                    "line": m.group(1),
                    "kind": "code-injection",
                    "cwe": "CWE-95",
                    "severity": "high",
                    "title": "eval of input",
                }
            )
    return json.dumps({"findings": findings})


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def _send(self, obj):
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self):
        if args.api_key is None or self.headers.get("Authorization") == f"Bearer {args.api_key}":
            return True
        if os.environ.get("FAKE_LLAMA_LOG"):
            with open(os.environ["FAKE_LLAMA_LOG"], "a") as fh:
                fh.write(json.dumps({"pid": os.getpid(), "refused": self.path}) + "\n")
        data = b'{"error": {"message": "Invalid API key", "code": 401}}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        return False

    def do_GET(self):
        if not self._authorized():
            return
        self._send({"object": "list", "data": [{"id": args.model_alias, "object": "model"}]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if not self._authorized():
            return
        if os.environ.get("FAKE_LLAMA_LOG"):
            with open(os.environ["FAKE_LLAMA_LOG"], "a") as fh:
                fh.write(json.dumps({"pid": os.getpid(), "body": body}) + "\n")
        text = answer(body)
        prompt_tokens = sum(len(m["content"]) for m in body["messages"]) // 4
        self._send(
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": args.model_alias,
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": text},
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": len(text) // 4,
                    "total_tokens": prompt_tokens + len(text) // 4,
                },
            }
        )


threading.Timer(300, lambda: os._exit(0)).start()  # never outlive a broken test
ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()
