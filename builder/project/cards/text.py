"""``kind = "text"``: a transformers model (its local config, or the user's factory) over the test table's text columns."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from builder.kkb_runtime.vocabulary import CardKind
from builder.project.cards.base import NetworkCard, check_arguments, check_reference
from builder.project.spec_values import relative_path
from builder.project.text_inputs import OWN_TOKENIZATION, check_text_inputs


class TextCard(NetworkCard):
    """``model_dir`` (config.json and the tokenizer's files) or ``factory``, and the text columns it reads."""

    kind: Literal[CardKind.TEXT]
    # float16 autocast on a GPU only when asked: a notebook's transformers inference runs float32 unless it says so.
    amp: bool = False
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
    # --- parity with a notebook's own input (builder.project.text_inputs, docs/parity.md) ---------------
    # "module:function": the notebook's own tokenization (the test table and the tokenizer in, input ids per row out).
    encode_function: str | None = None
    # The encode function's own arguments, passed as keyword arguments (two cards, one function, two budgets).
    encode_args: dict[str, Any] = Field(default_factory=dict)
    # "dynamic": each length-sorted batch padded to its longest row; "max_length": every batch to max_len.
    padding: Literal["dynamic", "max_length"] = "dynamic"
    # Where kkb's own truncation is used: each text column's own budget of tokens, before the columns are joined.
    column_max_len: dict[str, int] = Field(default_factory=dict)

    @field_validator("model_dir", "tokenizer")
    @classmethod
    def _folders_inside(cls, value: str | None) -> str | None:
        return None if value is None else relative_path(value)

    @field_validator("encode_function")
    @classmethod
    def _encode_reference(cls, value: str | None) -> str | None:
        return check_reference(value, "your tokenization: the test table and the tokenizer in, input ids per row out")

    @field_validator("column_max_len")
    @classmethod
    def _budgets(cls, value: dict[str, int]) -> dict[str, int]:
        bad = [f"{column} = {tokens}" for column, tokens in value.items() if tokens < 1]
        if bad:
            raise ValueError(f"column_max_len: {', '.join(bad)}: a budget is a positive number of tokens")
        return value

    def unused_keys(self) -> dict[str, str]:
        """With an encode function, kkb's own tokenization keys (and ``max_len``, unless rows are padded to it)."""
        if self.encode_function is None:
            return {}
        why = f"encode_function {self.encode_function} does the tokenization"
        keys = ["text_columns", *OWN_TOKENIZATION, *(["max_len"] if self.padding != "max_length" else [])]
        return dict.fromkeys(keys, why)

    @model_validator(mode="after")
    def _consistent(self) -> TextCard:
        if self.model_dir is None and self.factory is None:  # both: the factory gets the folder (model_dir=)
            raise ValueError(f"[[models]] '{self.name}': a text card needs model_dir (a folder with the transformers "
                             "config.json) or factory ('package.module:function' returning the nn.Module), or both")
        check_text_inputs(self)  # encode_function, or text_columns (and column_max_len naming them)
        check_arguments(self, "encode_function", "encode_args")
        return self


__all__ = ["TextCard"]
