"""``kind = "text"``: a transformers model (its local config, or the user's factory) over the test table's text columns."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from builder.kkb_runtime.vocabulary import CardKind
from builder.project.cards.base import NetworkCard
from builder.project.spec_values import relative_path


class TextCard(NetworkCard):
    """``model_dir`` (config.json and the tokenizer's files) or ``factory``, and the text columns it reads."""

    kind: Literal[CardKind.TEXT]
    # A folder in the kernel folder with config.json (and the tokenizer's files): shipped in the weights.
    model_dir: str | None = None
    # The tokenizer's folder, when it is not model_dir.
    tokenizer: str | None = None
    text_columns: list[str] = Field(default_factory=list)
    # A second segment (the tokenizer's pair: [SEP] between, token_type_ids 1), e.g. the answer.
    text_pair_columns: list[str] = Field(default_factory=list)
    separator: str = " "
    max_len: int = Field(default=512, gt=4)
    truncation: Literal["head_tail", "head", "tail"] = "head_tail"
    # head_tail: how many tokens of the start are kept (default: half of what fits).
    head_tokens: int | None = Field(default=None, ge=0)
    # What forward() returns, when it is not the logits: an index of a tuple or a key of a dict.
    output: int | str | None = None

    @field_validator("model_dir", "tokenizer")
    @classmethod
    def _folders_inside(cls, value: str | None) -> str | None:
        return None if value is None else relative_path(value)

    @model_validator(mode="after")
    def _consistent(self) -> TextCard:
        if (self.model_dir is None) == (self.factory is None):
            raise ValueError(f"[[models]] '{self.name}': a text card needs exactly one of model_dir (a folder with the "
                             "transformers config.json) or factory ('package.module:function' returning the nn.Module)")
        if not self.text_columns:
            raise ValueError(f"[[models]] '{self.name}': a text card needs text_columns (the test table's columns it reads)")
        return self


__all__ = ["TextCard"]
