"""A recording Hub for upload tests: a loopback HTTP server speaking the part of the Hub protocol that
`huggingface_hub` uses for `create_repo` + `upload_folder`, checking what it receives the way the Hub does where that
is cheap (bounded: it stops itself after `SERVER_LIFETIME` seconds). The `hub` fixture (in `conftest.py`) starts it
with `huggingface_hub` allowed to reach it. Served:

* `GET /api/whoami-v2`: the token's user, [`USER`];
* `POST /api/repos/create` (a name without a namespace is created under [`USER`]; a repository that exists is
  answered 409 with its URL, as the Hub does, which `create_repo(exist_ok=True)` passes over; `created` records
  every request, an older client's `private` flag as the `visibility` it means) and
  `POST /api/models/<repo>/branch/<branch>`;
* `GET /api/agent-harnesses` (huggingface_hub's user-agent telemetry): an empty registry;
* `POST /api/validate-yaml`: the README metadata must parse, and every model-index result needs a task type, a
  dataset name and type, and metrics with a type and a value (400 with errors otherwise);
* `POST /api/models/<repo>/preupload/<rev>`: binary files (`.safetensors`, `.png`, sentencepiece models) are "lfs",
  the others "regular", as the Hub's default `.gitattributes` decides;
* the legacy LFS transfer: `POST /<repo>.git/info/lfs/objects/batch`, then `PUT` of each object (its sha256 and
  size must match, 400 otherwise);
* `POST /api/models/<repo>/commit/<rev>` (NDJSON): the repository and branch must exist (404 otherwise); regular
  files arrive base64-encoded; an `lfsFile` must name an object uploaded before (400 otherwise). With
  `?create_pr=1` it opens pull request N: the commit goes to a new ref `refs/pr/N` (a later commit may name it as
  its revision) and the answer carries the pull request's URL. Each commit records the token it was sent with (its
  `Authorization` header).

Not served: the Xet storage protocol that `huggingface_hub` prefers when `hf_xet` is installed (a content-addressed
chunk store behind a token exchange); the tests set `HF_HUB_DISABLE_XET` so the legacy LFS path is exercised instead.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

SERVER_LIFETIME = 120.0
USER = "me"  # the namespace a repository created without one gets (the token's user)
LFS_SUFFIXES = (".safetensors", ".bin", ".png", ".model", ".spm")

# --------------------------------------------------------------------------------------------------------------------
# The recording Hub
# --------------------------------------------------------------------------------------------------------------------


class RecordingHub:
    """A loopback HTTP server that records an upload (see the module docstring for what it serves and checks)."""

    def __init__(self):
        self.requests: list[tuple[str, str]] = []
        self.created: list[dict] = []
        self.lfs_objects: dict[str, bytes] = {}
        self.commits: list[dict] = []
        self.branches: dict[str, set[str]] = {}  # repo id -> its branches
        self.errors: list[str] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.timer = threading.Timer(SERVER_LIFETIME, self.server.shutdown)

    def __enter__(self):
        self.thread.start()
        self.timer.start()
        return self

    def __exit__(self, *exc):
        self.timer.cancel()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def files(self) -> dict[str, bytes]:
        """What the last commit holds: path -> content."""
        return self.commits[-1]["files"] if self.commits else {}

    # ---- protocol -------------------------------------------------------------------------------------------

    def handle(self, method: str, path: str, body: bytes, token: str | None = None) -> tuple[int, dict]:
        self.requests.append((method, path.split("?")[0]))
        route = path.split("?")[0].strip("/").split("/")
        if method == "GET" and route == ["api", "whoami-v2"]:
            return 200, {"type": "user", "name": USER}
        if method == "POST" and route == ["api", "repos", "create"]:
            payload = json.loads(body)
            if "private" in payload:  # huggingface_hub 1.5 sends `private`, 2.x `visibility`; the Hub takes both
                payload["visibility"] = "private" if payload.pop("private") else "public"
            self.created.append(payload)
            repo_id = f"{payload.get('organization') or USER}/{payload['name']}"  # a bare name: the token's user's
            if repo_id in self.branches:
                return 409, {"error": "You already created this model repo", "url": f"{self.url}/{repo_id}"}
            self.branches[repo_id] = {"main"}
            return 200, {"url": f"{self.url}/{repo_id}"}
        if method == "POST" and route[:2] == ["api", "models"] and len(route) == 6 and route[4] == "branch":
            self.branches.setdefault(f"{route[2]}/{route[3]}", {"main"}).add(unquote(route[5]))
            return 200, {}
        if method == "GET" and route == ["api", "agent-harnesses"]:  # huggingface_hub's user-agent telemetry
            return 200, {"standardEnvVars": [], "harnesses": {}}
        if method == "POST" and route == ["api", "validate-yaml"]:
            errors = validate_card_metadata(json.loads(body)["content"])
            return (400 if errors else 200), {"errors": [{"message": e} for e in errors], "warnings": []}
        if method == "POST" and route[:2] == ["api", "models"] and len(route) == 6 and route[4] == "preupload":
            files = json.loads(body)["files"]
            modes = [{"path": f["path"], "uploadMode": "lfs" if f["path"].endswith(LFS_SUFFIXES) else "regular",
                      "shouldIgnore": False, "oid": None} for f in files]
            return 200, {"files": modes}
        if method == "POST" and route[-4:] == ["info", "lfs", "objects", "batch"]:
            return 200, self._lfs_batch(json.loads(body))
        if method == "PUT" and route[0] == "lfs-upload":
            return self._lfs_put(route[1], int(route[2]), body)
        if method == "POST" and route[:2] == ["api", "models"] and len(route) == 6 and route[4] == "commit":
            create_pr = parse_qs(urlsplit(path).query).get("create_pr") == ["1"]
            return self._commit(f"{route[2]}/{route[3]}", unquote(route[5]), body, create_pr, token)
        self.errors.append(f"unexpected {method} {path}")
        return 404, {"error": f"not served: {method} {path}"}

    def _lfs_batch(self, payload: dict) -> dict:
        objects = []
        for item in payload["objects"]:
            href = f"{self.url}/lfs-upload/{item['oid']}/{item['size']}"
            objects.append({"oid": item["oid"], "size": item["size"], "authenticated": True,
                            "actions": {"upload": {"href": href, "header": {}}}})
        return {"transfer": "basic", "objects": objects}

    def _lfs_put(self, oid: str, size: int, body: bytes) -> tuple[int, dict]:
        if hashlib.sha256(body).hexdigest() != oid or len(body) != size:
            self.errors.append(f"LFS object {oid} does not match its content")
            return 400, {"error": "sha256 or size mismatch"}
        self.lfs_objects[oid] = body
        return 200, {}

    def _commit(self, repo_id: str, revision: str, body: bytes, create_pr: bool, token: str | None
                ) -> tuple[int, dict]:
        if revision not in self.branches.get(repo_id, ()):  # the Hub commits to existing branches of existing repos
            self.errors.append(f"commit to {repo_id}@{revision}, which does not exist")
            return 404, {"error": f"{repo_id}@{revision} not found"}
        lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
        header, files = lines[0], {}
        if header["key"] != "header":
            return 400, {"error": "the first line must be the header"}
        for line in lines[1:]:
            value = line["value"]
            if line["key"] == "file":
                files[value["path"]] = base64.b64decode(value["content"])
            elif line["key"] == "lfsFile":
                if value["oid"] not in self.lfs_objects:
                    self.errors.append(f"commit names LFS object {value['oid']} that was never uploaded")
                    return 400, {"error": f"LFS object {value['oid']} not found"}
                files[value["path"]] = self.lfs_objects[value["oid"]]
            else:
                return 400, {"error": f"unexpected commit operation {line['key']}"}
        oid = hashlib.sha1(body).hexdigest()
        lfs = [line["value"]["path"] for line in lines if line["key"] == "lfsFile"]
        pull_request = None
        if create_pr:  # a pull request against `revision`: the commit goes to its own ref
            number = 1 + sum(ref.startswith("refs/pr/") for ref in self.branches[repo_id])
            revision, pull_request = f"refs/pr/{number}", f"{self.url}/{repo_id}/discussions/{number}"
            self.branches[repo_id].add(revision)
        self.commits.append({"repo_id": repo_id, "revision": revision, "summary": header["value"]["summary"],
                             "files": files, "lfs": lfs, "token": token})
        return 200, {"commitUrl": f"{self.url}/{repo_id}/commit/{oid}", "commitOid": oid,
                     "pullRequestUrl": pull_request}

    def _handler(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _body(self) -> bytes:
                if "chunked" in self.headers.get("Transfer-Encoding", ""):
                    chunks = []
                    while (size := int(self.rfile.readline().split(b";")[0], 16)) > 0:
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                    self.rfile.readline()
                    return b"".join(chunks)
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _serve(self):
                token = self.headers.get("Authorization", "").removeprefix("Bearer ") or None
                status, payload = hub.handle(self.command, self.path, self._body(), token)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

        return Handler


def validate_card_metadata(content: str) -> list[str]:
    """What the Hub's YAML validation rejects, in brief: unparsable metadata and incomplete model-index results."""
    if not content.startswith("---\n"):
        return ["no metadata block"]
    try:
        metadata = yaml.safe_load(content.split("---\n")[1])
    except yaml.YAMLError as error:
        return [f"invalid YAML: {error}"]
    if not isinstance(metadata, dict):
        return ["metadata must be a mapping"]
    errors = []
    for entry in metadata.get("model-index", []):
        for result in entry.get("results", []):
            if not result.get("task", {}).get("type"):
                errors.append("model-index result without task.type")
            if not (result.get("dataset", {}).get("name") and result.get("dataset", {}).get("type")):
                errors.append("model-index result without dataset name and type")
            if not all("type" in m and "value" in m for m in result.get("metrics", [])):
                errors.append("model-index metric without type and value")
    return errors
