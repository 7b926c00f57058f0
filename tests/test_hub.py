"""Model cards, model folders and Hub uploads.

Uploads go to a recording Hub started here on 127.0.0.1 (bounded: it stops itself after `SERVER_LIFETIME` seconds).
It speaks the part of the Hub protocol `huggingface_hub` uses for `create_repo` + `upload_folder` and checks what it
receives the way the Hub does where that is cheap:

* `POST /api/repos/create`;
* `GET /api/agent-harnesses` (huggingface_hub's user-agent telemetry): an empty registry;
* `POST /api/validate-yaml`: the README metadata must parse, and every model-index result needs a task type, a
  dataset name and type, and metrics with a type and a value (400 with errors otherwise);
* `POST /api/models/<repo>/preupload/<rev>`: binary files (`.safetensors`, `.png`, sentencepiece models) are "lfs",
  the others "regular", as the Hub's default `.gitattributes` decides;
* the legacy LFS transfer: `POST /<repo>.git/info/lfs/objects/batch`, then `PUT` of each object (its sha256 and
  size must match, 400 otherwise);
* `POST /api/models/<repo>/commit/<rev>` (NDJSON): regular files arrive base64-encoded; an `lfsFile` must name an
  object uploaded before (400 otherwise).

Not served: the Xet storage protocol that `huggingface_hub` prefers when `hf_xet` is installed (a content-addressed
chunk store behind a token exchange); the tests set `HF_HUB_DISABLE_XET` so the legacy LFS path is exercised instead.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import struct
import subprocess
import sys
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
import yaml
from huggingface_hub import ModelCard
from huggingface_hub import constants as hub_constants
from transformers import AutoConfig
from transformers.utils import logging as hf_logging

from hf_headsel import (
    HeadSelMarianConfig,
    HeadSelMarianMTModel,
    HeadSelSpeech2TextConfig,
    HeadSelSpeech2TextForConditionalGeneration,
)
from hf_headsel.conversion import export_task_model
from hf_headsel.hub import (
    DEFAULT_IGNORE_PATTERNS,
    MARIAN,
    SHARED_REMOTE_CODE,
    MetricRecord,
    collect_metrics,
    prepare_model_folder,
    push_to_hub,
    remote_code_files,
    write_model_card,
)

hf_logging.set_verbosity_error()
hf_logging.disable_progress_bar()

ROOT = Path(__file__).resolve().parents[1]
SERVER_LIFETIME = 120.0
LFS_SUFFIXES = (".safetensors", ".bin", ".png", ".model", ".spm")
REMOTE_CODE = {"head_selection.py", "conversion.py", "pipeline_headsel.py", "configuration_headsel_marian.py",
               "modeling_headsel_marian.py"}
TINY = dict(d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
            encoder_ffn_dim=32, decoder_ffn_dim=32, vocab_size=40)


def marian_model(seed: int = 0, **overrides) -> HeadSelMarianMTModel:
    torch.manual_seed(seed)
    config = HeadSelMarianConfig(**{**TINY, "max_position_embeddings": 32, "pad_token_id": 39,
                                    "decoder_start_token_id": 39, "encoder_tasks": ["en", "de"],
                                    "decoder_tasks": ["fr", "it", "es"], **overrides})
    model = HeadSelMarianMTModel(config).eval()
    with torch.no_grad():
        for selector in model.head_selection.values():
            selector.logits.normal_(std=3.0)
    return model


def tiny_png() -> bytes:
    """A valid 1x1 grey PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    pixels = zlib.compress(b"\x00\x80")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


# --------------------------------------------------------------------------------------------------------------------
# Metrics and model cards
# --------------------------------------------------------------------------------------------------------------------


def test_collect_metrics_reads_trainer_and_nested_metrics():
    flat = {"eval_bleu": 20.0, "eval_bleu_en-fr": 21.5, "eval_bleu_pooled": 19.0, "eval_loss": 2.0,
            "predict_wer_es": 12.0, "epoch": 3.0, "bleu": 1.0}
    assert collect_metrics(flat) == [
        MetricRecord("validation", "bleu", None, 20.0),
        MetricRecord("validation", "bleu", "en-fr", 21.5),
        MetricRecord("validation", "bleu", "pooled", 19.0),
        MetricRecord("test", "wer", "es", 12.0),
        MetricRecord("validation", "bleu", None, 1.0),
    ]
    nested = {"eval": {"eval_wer": 10.0, "eval_wer_es": 9.0}, "predict": {"predict_wer_fr": 11.0}}
    assert collect_metrics(nested) == [MetricRecord("validation", "wer", None, 10.0),
                                       MetricRecord("validation", "wer", "es", 9.0),
                                       MetricRecord("test", "wer", "fr", 11.0)]
    assert collect_metrics({"fr": {"bleu": 30.0}, "it": {"chrf": 50.0}}) == [
        MetricRecord("validation", "bleu", "fr", 30.0), MetricRecord("validation", "chrf", "it", 50.0)]
    assert collect_metrics(None) == []


def test_model_card_metadata_and_sections(tmp_path):
    model = marian_model(default_decoder_task="fr")
    heatmap = tmp_path / "plots" / "sharing.png"
    heatmap.parent.mkdir()
    heatmap.write_bytes(tiny_png())
    metrics = {"eval_bleu": 20.0, "eval_bleu_en-fr": 21.5, "eval_bleu_de-it": 18.25, "eval_loss": 2.0}
    path = write_model_card(
        tmp_path / "model", model, metrics, repo_id="me/mt-headsel", dataset_name="Europarl-ST",
        dataset_id="europarl_st", base_model="Helsinki-NLP/opus-mt-en-de", heatmap_path=heatmap,
        training_args={"learning_rate": 5e-4, "max_steps": 1000, "callbacks": object()},
    )
    card = ModelCard.load(path)
    data = card.data
    assert data.language == ["en", "de", "fr", "it", "es"]
    assert data.license == "apache-2.0" and data.library_name == "transformers"
    assert data.pipeline_tag == "translation" and data.base_model == "Helsinki-NLP/opus-mt-en-de"
    assert data.datasets == ["europarl_st"]
    assert {"head-selection", "marian", "multilingual", "custom_code"} <= set(data.tags)
    results = {(r.dataset_config, r.metric_type): r.metric_value for r in data.eval_results}
    assert results == {(None, "bleu"): 20.0, ("en-fr", "bleu"): 21.5, ("de-it", "bleu"): 18.25}
    assert all(r.dataset_name == "Europarl-ST" and r.task_type == "translation" for r in data.eval_results)

    text = card.text
    assert 'AutoModelForSeq2SeqLM.from_pretrained("me/mt-headsel", trust_remote_code=True, task="fr")' in text
    assert 'pipeline("translation", model="me/mt-headsel"' in text and '{"decoder_task": "fr"}' in text
    assert "| validation | en-fr | 21.50 |" in text
    assert "![Heads shared between tasks](head_sharing.png)" in text
    assert (tmp_path / "model" / "head_sharing.png").read_bytes() == heatmap.read_bytes()
    assert "| `learning_rate` | 0.0005 |" in text and "| `max_steps` | 1000 |" in text and "callbacks" not in text
    assert "| `head_selection_strategy` | `group` |" in text
    # the sharing table: the fraction of the 4 heads "fr" and "it" share, averaged over the 2 layers
    heads = model.selected_heads()["decoder_self"]
    shared = sum(len(set(heads[0, layer].tolist()) & set(heads[1, layer].tolist())) for layer in range(2)) / 8
    assert f"| fr | 1.00 | {shared:.2f} |" in text


def test_model_card_for_speech_and_exported_models(tmp_path):
    torch.manual_seed(0)
    config = HeadSelSpeech2TextConfig(**TINY, input_feat_per_channel=8, encoder_tasks=["tedx", "covost"],
                                      decoder_tasks=["tedx", "covost"], task_type="domain",
                                      head_selection_strategy="subset")
    model = HeadSelSpeech2TextForConditionalGeneration(config).eval()
    card = ModelCard.load(write_model_card(tmp_path / "asr", model, {"eval_wer_tedx": 12.0}))
    assert card.data.pipeline_tag == "automatic-speech-recognition" and card.data.language is None
    assert "multi-domain" in card.data.tags and "Tasks are **domains**" in card.text
    assert card.data.eval_results[0].task_type == "automatic-speech-recognition"
    assert 'model_kwargs={"encoder_task": "tedx", "decoder_task": "tedx"}' in card.text

    exported = export_task_model(marian_model(), encoder_task="de", decoder_task="it")
    card = ModelCard.load(write_model_card(tmp_path / "de-it", exported, {"bleu": 18.0},
                                           exported_tasks={"encoder": "de", "decoder": "it"},
                                           source_model="me/mt-headsel", languages=["de", "it"]))
    assert card.data.language == ["de", "it"] and "custom_code" not in card.data.tags
    assert [(r.dataset_config, r.metric_value) for r in card.data.eval_results] == [("de-it", 18.0)]
    assert "encoder task `de`, decoder task `it`" in card.text and "`me/mt-headsel`" in card.text
    assert "MarianMTModel.from_pretrained" in card.text and "trust_remote_code" not in card.text
    with pytest.raises(ValueError, match="exported_tasks"):
        write_model_card(tmp_path / "x", exported)
    with pytest.raises(ValueError, match="exported_tasks"):
        write_model_card(tmp_path / "x", model, exported_tasks={"decoder": "tedx"})


def test_prepare_model_folder(tmp_path):
    model = marian_model()
    model.save_pretrained(tmp_path / "model")
    (tmp_path / "model" / "conversion.py").unlink(missing_ok=True)
    written = prepare_model_folder(tmp_path / "model")
    assert {"conversion.py", "pipeline_headsel.py", "config.json"} <= set(written)
    needed = set(remote_code_files((*MARIAN.modules, *SHARED_REMOTE_CODE)))  # with what they import
    assert REMOTE_CODE | {"head_selection.py"} <= needed <= {p.name for p in (tmp_path / "model").glob("*.py")}
    config = json.loads((tmp_path / "model" / "config.json").read_text())
    assert config["custom_pipelines"]["translation"]["impl"] == "pipeline_headsel.HeadSelTranslationPipeline"
    assert config["auto_map"]["AutoModelForSeq2SeqLM"] == "modeling_headsel_marian.HeadSelMarianMTModel"
    assert AutoConfig.from_pretrained(tmp_path / "model").custom_pipelines == config["custom_pipelines"]
    assert prepare_model_folder(tmp_path / "model") == []  # idempotent
    # an exported (stock) folder stays stock
    export_task_model(model, encoder_task="en", decoder_task="fr").save_pretrained(tmp_path / "stock")
    before = (tmp_path / "stock" / "config.json").read_text()
    assert prepare_model_folder(tmp_path / "stock") == []
    assert (tmp_path / "stock" / "config.json").read_text() == before
    with pytest.raises(ValueError, match="no config.json"):
        prepare_model_folder(tmp_path)
    # writing the card into a saved folder completes it too (the card advertises the pipelines)
    (tmp_path / "model" / "pipeline_headsel.py").unlink()
    write_model_card(tmp_path / "model", model)
    assert (tmp_path / "model" / "pipeline_headsel.py").is_file()


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

    def handle(self, method: str, path: str, body: bytes) -> tuple[int, dict]:
        self.requests.append((method, path.split("?")[0]))
        route = path.split("?")[0].strip("/").split("/")
        if method == "POST" and route == ["api", "repos", "create"]:
            payload = json.loads(body)
            self.created.append(payload)
            return 200, {"url": f"{self.url}/{payload['organization']}/{payload['name']}"}
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
            return self._commit(f"{route[2]}/{route[3]}", route[5], body)
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

    def _commit(self, repo_id: str, revision: str, body: bytes) -> tuple[int, dict]:
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
        self.commits.append({"repo_id": repo_id, "revision": revision, "summary": header["value"]["summary"],
                             "files": files, "lfs": lfs})
        return 200, {"commitUrl": f"{self.url}/{repo_id}/commit/{oid}", "commitOid": oid, "pullRequestUrl": None}

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
                status, payload = hub.handle(self.command, self.path, self._body())
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


@pytest.fixture
def hub(monkeypatch):
    """The recording Hub, with huggingface_hub allowed to reach it (offline mode off, Xet off, a fake token)."""
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub_constants, "HF_HUB_DISABLE_XET", True)
    with RecordingHub() as server:
        yield server


def saved_folder(tmp_path: Path) -> tuple[Path, HeadSelMarianMTModel]:
    """A training output folder: model, card, a plot, and things that must not be uploaded."""
    model = marian_model()
    folder = tmp_path / "output"
    model.save_pretrained(folder)
    (folder / "head_sharing.png").write_bytes(tiny_png())
    (folder / "checkpoint-10").mkdir()
    (folder / "checkpoint-10" / "model.safetensors").write_bytes(b"old")
    (folder / "runs").mkdir()
    (folder / "runs" / "events.out").write_bytes(b"log")
    (folder / "optimizer.pt").write_bytes(b"state")
    return folder, model


def test_push_to_hub_uploads_the_folder(tmp_path, hub):
    folder, model = saved_folder(tmp_path)
    write_model_card(folder, model, {"eval_bleu_en-fr": 21.5}, repo_id="me/tiny",
                     heatmap_path=folder / "head_sharing.png")
    info = push_to_hub(folder, "me/tiny", endpoint=hub.url, token="hf_fake", private=True,
                       commit_message="first upload")

    assert hub.errors == []
    assert hub.created == [{"name": "tiny", "organization": "me", "visibility": "private", "type": "model"}]
    commit = hub.commits[-1]
    assert (commit["repo_id"], commit["revision"], commit["summary"]) == ("me/tiny", "main", "first upload")
    expected = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    expected -= {"checkpoint-10/model.safetensors", "runs/events.out", "optimizer.pt"}
    assert set(hub.files()) == expected
    assert REMOTE_CODE | {"README.md", "config.json", "model.safetensors", "head_sharing.png"} <= expected
    for name, content in hub.files().items():
        assert content == (folder / name).read_bytes(), name
    assert set(commit["lfs"]) == {"model.safetensors", "head_sharing.png"}  # went through the LFS transfer
    assert json.loads(hub.files()["config.json"])["custom_pipelines"]["translation"]
    assert ModelCard(hub.files()["README.md"].decode()).data.eval_results[0].metric_value == 21.5
    assert [r for r in hub.requests if r[1] == "/api/validate-yaml"]
    assert info.commit_url.startswith(f"{hub.url}/me/tiny/commit/")


def test_push_to_hub_stops_on_invalid_card_metadata(tmp_path, hub):
    folder, _ = saved_folder(tmp_path)
    (folder / "README.md").write_text("---\nmodel-index:\n- name: x\n  results:\n  - metrics: [{value: 1}]\n---\n")
    with pytest.raises(ValueError, match="Invalid metadata in README.md"):
        push_to_hub(folder, "me/tiny", endpoint=hub.url, token="hf_fake")
    assert hub.commits == []  # nothing committed


def test_push_to_hub_needs_a_model_folder(tmp_path):
    with pytest.raises(ValueError, match="no config.json"):
        push_to_hub(tmp_path, "me/tiny", endpoint="http://127.0.0.1:9", token="hf_fake")


def test_ignore_patterns_are_relative_globs():
    assert "checkpoint-*/**" in DEFAULT_IGNORE_PATTERNS and "runs/**" in DEFAULT_IGNORE_PATTERNS


def test_push_cli_with_hf_endpoint(tmp_path):
    """`training/push_to_hub.py` in a fresh process, pointed at the recording Hub with `HF_ENDPOINT`; the folder has
    no card, so the tool writes one (with the Trainer's scores) before uploading."""
    folder, _ = saved_folder(tmp_path)
    (folder / "all_results.json").write_text(json.dumps({"eval_bleu": 17.0, "eval_bleu_de-it": 16.0}))
    env = {key: value for key, value in os.environ.items() if key not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    with RecordingHub() as hub:
        env.update(HF_ENDPOINT=hub.url, HF_TOKEN="hf_fake", HF_HUB_DISABLE_XET="1", NO_PROXY="127.0.0.1",
                   HF_HOME=str(tmp_path / "hf_home"))
        completed = subprocess.run(
            [sys.executable, str(ROOT / "training" / "push_to_hub.py"), str(folder), "me/cli-model",
             "--dataset_name", "Europarl-ST"],
            capture_output=True, text=True, env=env, timeout=180,
        )
        assert completed.returncode == 0, completed.stderr[-3000:]
        assert hub.errors == []
        files = hub.files()
    assert completed.stdout.strip().splitlines()[-1].startswith(f"{hub.url}/me/cli-model/commit/")
    assert REMOTE_CODE | {"README.md", "config.json", "model.safetensors", "all_results.json"} <= set(files)
    assert not {name for name in files if name.startswith(("checkpoint-", "runs/")) or name == "optimizer.pt"}
    card = ModelCard(files["README.md"].decode())
    assert {(r.dataset_config, r.metric_value) for r in card.data.eval_results} == {(None, 17.0), ("de-it", 16.0)}
    assert 'from_pretrained("me/cli-model", trust_remote_code=True' in card.text
    assert files["model.safetensors"] == (folder / "model.safetensors").read_bytes()
