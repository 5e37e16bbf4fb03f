"""The backend contract: one method that turns requests into completions.

Every backend (hf, vllm, openai) takes a `ModelSpec` and implements `generate`. Shared behaviour
(fingerprinting for the cache, engine identity, start-up, closing) lives here, not in copies.

Lifecycle: a backend is cheap to build; `start()` loads the weights or starts the engine (the first
`generate` does it too); `close()` releases it. A backend is a context manager, and every caller that
builds one closes it (`with open_backend(spec) as backend:`): a vLLM engine left open keeps its
EngineCore process alive, and the interpreter then waits for it at exit, forever.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from types import TracebackType
from typing import Any, ClassVar, Self

from workbench import prompting
from workbench.errors import WorkbenchError
from workbench.types import Completion, GenerationRequest, ModelSpec


class Backend(abc.ABC):
    """Generates completions for a model.

    Contract for `generate`:
        - returns one list per request, in request order, holding exactly `request.sampling.n` completions;
        - honours `temperature`, `top_p`, `max_tokens`, `stop`, `seed` and `logprobs` (when `logprobs` is
          set and the backend cannot give them, `Completion.token_logprobs` is None, never made up);
        - applies `request.adapter` when given (raises `WorkbenchError` if the backend cannot);
        - raises `WorkbenchError` for a user error (bad model path, unsupported option); any other
          exception is a bug.
    """

    name: ClassVar[str]
    #: True: `spec.model` (and an adapter) are local directories or hub ids this process loads, checked and
    #: resolved (`smollm2`, a .gguf file) before the run starts. False: names a server knows (openai).
    local_model: ClassVar[bool] = True
    #: Prompts the runner sends per `generate` call; a backend that batches well wants many.
    preferred_batch_size: ClassVar[int] = 32

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec

    @abc.abstractmethod
    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Completion]]:
        """Complete every request; see the class docstring for the contract."""

    @property
    def batch_size(self) -> int:
        """Prompts per batch: the `batch_size` backend option, else `preferred_batch_size`."""
        value: Any = self.spec.option("batch_size", self.preferred_batch_size)
        try:
            size = int(value)
        except (TypeError, ValueError):
            size = 0
        if size < 1:
            raise WorkbenchError(f"backend option `batch_size` must be a whole number >= 1, got `{value}`")
        return size

    @property
    def tokenizer(self) -> Any:
        """The model's tokenizer (transformers), for chat templates and token counts. Backends that
        have none locally (a remote server) raise WorkbenchError."""
        raise WorkbenchError(f"the {self.name} backend has no local tokenizer")

    def format_chat(self, question: str, system_prompt: str | None = None) -> str:
        """The tokenizer's chat template applied to one user turn (suites with `template: chat`).

        Backends whose server applies the template itself (openai with endpoint=chat) override this."""
        try:
            return prompting.render_chat(self.tokenizer, prompting.chat_messages(question, system_prompt))
        except ValueError:
            raise WorkbenchError(f"model `{self.spec.model}` has no chat template; use a plain `template` "
                                 "with {question}") from None

    def fingerprint(self) -> str:
        """Content hash of what produces the text (weights + adapter); keys the generation cache."""
        from workbench.fingerprint import model_fingerprint

        return model_fingerprint(self.spec)

    def engine(self) -> str:
        """What turns the weights into text, beyond the weights: engine name and version, dtype, device
        (e.g. "vllm 0.32.0 float32 cpu"). Two engines may answer differently on the same weights (kernels,
        dtypes, batching), so this is part of the generation cache key and stored with every answer.
        Known without starting the engine (a fully cached rerun never starts one)."""
        return self.name

    def start(self) -> None:  # noqa: B027 - optional hook
        """Load the weights / start the engine now (else the first `generate` does). The runner calls it
        under its own time allowance, apart from the per-batch stall watchdog."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release engines, processes, GPU memory. Idempotent."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
