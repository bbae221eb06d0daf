"""OpenAI Responses API input items: ``load``, ``dump`` and ``validate``.

The payload is the ``input`` list of a ``/v1/responses`` request. User, system and developer
``message`` items each load as one message; ``function_call_output`` items as ``tool`` messages;
the assistant-side items between two of those (assistant ``message``, ``reasoning``,
``function_call`` and built-in tool items such as ``web_search_call`` or ``compaction``) load as
one assistant message. Item ids, statuses, annotations and ``encrypted_content`` stay in
``provider_details["openai_responses"]`` of the block they belong to; built-in tool items stay
verbatim in the assistant message's ``provider_details["openai_responses"]["items"]``. See
``docs/formats.md``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from threadline.errors import UserError
from threadline.formats._common import (
    JSON,
    WRAPPED_ROLES,
    Problems,
    arguments,
    attach,
    details,
    dump_arguments,
    expect_dict,
    expect_list,
    guarded,
    image_data_url,
    image_from_url,
    leftovers,
    place_foreign,
    unwrap,
    with_details,
    wrap,
)
from threadline.formats.policy import Sender
from threadline.model.content import (
    Block,
    ImageBlock,
    Message,
    TextBlock,
    Thinking,
    ThinkingBlock,
    ToolResult,
    ToolResultBlock,
    ToolUse,
    ToolUseBlock,
    Usage,
    text,
)

NAME = "openai_responses"
_THINK = re.compile(r"\A<think>\n(.*)\n</think>\Z", re.DOTALL)
_INPUT_ROLES = ("user", "system", "developer")


# -- load -----------------------------------------------------------------------------------


@guarded("openai_responses payload")
def load(data: Any) -> list[Message]:
    """Messages from a Responses ``input`` list (a request body with ``input`` works too; a
    plain string is one user message)."""
    if isinstance(data, dict) and "input" in data:
        data = data["input"]
    if isinstance(data, str):
        return [Message(role="user", content=[text(data)])]
    return _Loader().run(expect_list(data, "Responses input"))


class _Loader:
    def __init__(self) -> None:
        self.out: list[Message] = []
        self.group: Message | None = None  # the assistant message being gathered
        self.items = 0  # provider items gathered into the group so far
        self.open_text = False  # the group's last item was an assistant text item

    def run(self, items: list[Any]) -> list[Message]:
        for n, raw in enumerate(items):
            where = f"input[{n}]"
            item = expect_dict(raw, where)
            kind = item.get("type", "message" if "role" in item else None)
            if kind == "message" and item.get("role") == "assistant":
                self._assistant_message(item, where)
            elif kind == "message":
                self._close()
                self.out.extend(_input_message(item, where))
            elif kind == "function_call_output":
                self._close()
                self.out.append(_output(item, where))
            elif kind == "function_call":
                self._add([_call(item, where)])
            elif kind == "reasoning":
                self._add([_reasoning(item)])
            else:  # built-in tool calls, compaction, item references…: kept verbatim
                self._foreign(item)
        self._close()
        return self.out

    def _ensure(self) -> Message:
        if self.group is None:
            self.group = Message(role="assistant", content=[])
            self.items = 0
        return self.group

    def _add(self, blocks: list[Block], *, open_text: bool = False) -> None:
        self._ensure().content.extend(blocks)
        self.items += 1
        self.open_text = open_text

    def _foreign(self, item: JSON) -> None:
        group = self._ensure()
        mine = details(group, NAME)
        mine.setdefault("items", []).append([self.items, item])
        group.provider_details = {NAME: mine}
        self.items += 1
        self.open_text = False

    def _close(self) -> None:
        if self.group is not None:
            self.out.append(self.group)
        self.group = None
        self.open_text = False

    def _assistant_message(self, item: JSON, where: str) -> None:
        content = item.get("content")
        extra = leftovers(item, ("role", "content"))
        if isinstance(content, str):
            m = _THINK.match(content)
            if m:
                block: Block = ThinkingBlock(thinking=Thinking(content=m.group(1)))
                self._add([attach(block, NAME, {"item": extra} if extra else {})])
                return
            blocks: list[Block] = [text(content)]
            form_hint = False
        else:
            parts = expect_list(content, f"{where}.content")
            loaded = [
                _part(expect_dict(p, f"{where}.content[{k}]"), "assistant")
                for k, p in enumerate(parts)
            ]
            if not loaded or any(b is None for b in loaded):
                self._foreign(item)
                return
            blocks = [b for b in loaded if b is not None]
            form_hint = (
                len(blocks) == 1
                and isinstance(blocks[0], TextBlock)
                and not blocks[0].provider_details
            )
        # mark where the item starts only when dump would not start one there by itself
        if extra or form_hint or self.open_text:
            marker = dict(extra)
            if form_hint:
                marker["parts"] = True
            attach(blocks[0], NAME, {"item": marker})
        self._add(blocks, open_text=True)


def _input_message(item: JSON, where: str) -> list[Message]:
    role = item.get("role")
    if role not in _INPUT_ROLES:
        raise UserError(
            f"{where}: role {role!r} is not a Responses message role "
            "(user, assistant, system, developer)"
        )
    extra = leftovers(item, ("role", "content"))
    content = item.get("content")
    if isinstance(content, str):
        blocks: list[Block] = [text(content)]
    else:
        parts = expect_list(content, f"{where}.content")
        blocks = []
        foreign: list[list[Any]] = []
        for k, p in enumerate(parts):
            b = _part(expect_dict(p, f"{where}.content[{k}]"), "user")
            if b is None:
                foreign.append([k, p])
            else:
                blocks.append(b)
        if foreign:
            extra["parts_kept"] = foreign
        if (
            len(blocks) == 1
            and isinstance(blocks[0], TextBlock)
            and not foreign
            and not blocks[0].provider_details
        ):
            extra["parts"] = True
    if role == "developer":
        extra["role"] = "developer"
    if role == "user" and not extra:
        return unwrap("user", blocks)
    return [
        Message(
            role="system" if role == "developer" else role,
            content=blocks,
            provider_details=with_details(NAME, extra),
        )
    ]


_NO_ANNOTATIONS = "annotations_absent"  # a loaded output_text had no "annotations" key


def _part(p: JSON, side: str) -> Block | None:
    kind = p.get("type")
    if kind in ("input_text", "output_text") and isinstance(p.get("text"), str):
        consumed = ["text"]
        if kind == ("output_text" if side == "assistant" else "input_text"):
            consumed.append("type")
        extra = leftovers(p, consumed)
        if kind == "output_text" and p.get("annotations") == []:
            del extra["annotations"]  # the default: written back on every output_text
        elif kind == "output_text" and "annotations" not in p:
            extra[_NO_ANNOTATIONS] = True  # so a dump gives the part back exactly as it came
        return attach(text(p["text"]), NAME, extra)
    if kind == "input_image" and isinstance(p.get("image_url"), str):
        consumed = ["type", "image_url"]
        if p.get("detail") == "auto":
            consumed.append("detail")
        return attach(image_from_url(p["image_url"]), NAME, leftovers(p, consumed))
    return None


def _call(item: JSON, where: str) -> ToolUseBlock:
    if "call_id" not in item or "name" not in item:
        raise UserError(f"{where}: a function_call needs call_id and name")
    raw_args = item.get("arguments", "")
    value = arguments(raw_args, where)
    extra = leftovers(item, ("type", "call_id", "name", "arguments"))
    if not isinstance(raw_args, str) or dump_arguments(value) != raw_args:
        extra["arguments"] = raw_args
    block = ToolUseBlock(
        tool_use=ToolUse(id=str(item["call_id"]), name=str(item["name"]), input=value)
    )
    attach(block, NAME, extra)
    return block


def _reasoning(item: JSON) -> ThinkingBlock:
    summary = item.get("summary") or []
    texts = [s.get("text", "") for s in summary if isinstance(s, dict)]
    content = "\n\n".join(texts)
    kept = leftovers(item, ("type", "summary"))
    if _summary(content) != summary:
        kept["summary"] = summary
    block = ThinkingBlock(thinking=Thinking(content=content))
    attach(block, NAME, {"reasoning": kept})
    return block


def _summary(content: str) -> list[JSON]:
    return [{"type": "summary_text", "text": content}] if content else []


def _output(item: JSON, where: str) -> Message:
    if "call_id" not in item:
        raise UserError(f"{where}: a function_call_output needs call_id")
    out = item.get("output", "")
    content: str | list[TextBlock | ImageBlock]
    extra = leftovers(item, ("type", "call_id", "output"))
    if isinstance(out, str):
        content = out
    else:
        parts = [
            _part(expect_dict(p, f"{where}.output"), "user")
            for p in expect_list(out, f"{where}.output")
        ]
        if all(isinstance(b, (TextBlock, ImageBlock)) for b in parts):
            content = [b for b in parts if isinstance(b, (TextBlock, ImageBlock))]
        else:
            content = ""
            extra["output"] = out
    block = ToolResultBlock(
        tool_result=ToolResult(tool_use_id=str(item["call_id"]), content=content)
    )
    return Message(role="tool", content=[block], provider_details=with_details(NAME, extra))


# -- dump -----------------------------------------------------------------------------------


@guarded("openai_responses dump (a message's provider_details)")
def shape(messages: Sequence[Message]) -> list[JSON]:
    """The Responses ``input`` items for a context.

    Tool results become ``function_call_output`` items; an assistant message becomes its items
    in order (reasoning, text messages, function calls, kept built-in items). Thinking with no
    Responses reasoning item behind it (from another provider) goes as an assistant text item
    ``<think>\\n…\\n</think>``; redacted thinking is left out.
    """
    out: list[JSON] = []
    for m in messages:
        if not m.content and not details(m, NAME):
            continue  # nothing the Responses API can be sent
        if m.role == "assistant":
            out.extend(_dump_assistant(m))
        elif m.role in ("user", "tool"):
            rest: list[Block] = []
            for b in m.content:
                if isinstance(b, ToolResultBlock):
                    out.append(_dump_output(m, b))
                else:
                    rest.append(b)
            if rest:
                kept = m.provider_details if m.role == "user" else None
                out.append(_dump_input(Message(role="user", content=rest, provider_details=kept)))
        elif m.role == "system":
            out.append(_dump_input(m))
        elif m.role in WRAPPED_ROLES:
            out.append(_dump_input(Message(role="user", content=wrap(m, WRAPPED_ROLES[m.role]))))
        else:
            raise UserError(f"Message role {m.role!r} has no Responses mapping")
    return out


def _dump_input(m: Message) -> JSON:
    extra = details(m, NAME)
    role = extra.pop("role", m.role)
    parts_hint = extra.pop("parts", False)
    foreign = extra.pop("parts_kept", None)
    item: JSON = {**extra, "role": role}
    blocks = m.content
    if (
        len(blocks) == 1
        and isinstance(blocks[0], TextBlock)
        and not parts_hint
        and not foreign
        and not details(blocks[0], NAME)
    ):
        item["content"] = blocks[0].text.content
    else:
        item["content"] = place_foreign([_dump_part(b, "user") for b in blocks], foreign)
    return item


def _dump_part(b: Block, side: str) -> JSON:
    extra = details(b, NAME)
    extra.pop("item", None)
    if isinstance(b, TextBlock):
        if side == "assistant":
            if extra.pop(_NO_ANNOTATIONS, False):
                return {"type": "output_text", **extra, "text": b.text.content}
            return {"type": "output_text", "annotations": [], **extra, "text": b.text.content}
        return {"type": "input_text", **extra, "text": b.text.content}
    if isinstance(b, ImageBlock):
        return {"type": "input_image", "detail": "auto", **extra, "image_url": image_data_url(b)}
    raise UserError(f"A {type(b).__name__} cannot go in Responses message content")


def _dump_output(m: Message, b: ToolResultBlock) -> JSON:
    r = b.tool_result
    extra = details(m, NAME) if m.role == "tool" else {}
    output: Any
    if isinstance(r.content, str):
        output = f"Error: {r.content}" if r.is_error else r.content
    else:
        output = [_dump_part(p, "user") for p in r.content]
    return {"type": "function_call_output", "call_id": r.tool_use_id, "output": output, **extra}


def _dump_assistant(m: Message) -> list[JSON]:
    items: list[JSON] = []
    current: list[Block] | None = None  # blocks of the open assistant text item
    marks: list[tuple[int, list[Block], JSON]] = []
    for b in m.content:
        extra = details(b, NAME)
        if isinstance(b, ThinkingBlock):
            current = None
            if "reasoning" in extra:
                kept = dict(extra["reasoning"])
                summary = kept.pop("summary", _summary(b.thinking.content))
                items.append({"type": "reasoning", **kept, "summary": summary})
            elif not b.thinking.redacted:
                items.append(
                    {
                        **extra.get("item", {}),
                        "role": "assistant",
                        "content": f"<think>\n{b.thinking.content}\n</think>",
                    }
                )
        elif isinstance(b, ToolUseBlock):
            current = None
            items.append(_dump_call(b, extra))
        elif isinstance(b, (TextBlock, ImageBlock)):
            if "item" in extra or current is None:
                current = []
                marks.append((len(items), current, dict(extra.get("item", {}))))
                items.append({})
            current.append(b)
        else:
            raise UserError(
                "A tool_result block cannot be in an assistant message; put it in a "
                "user or tool message"
            )
    for index, blocks, marker in marks:
        parts_hint = marker.pop("parts", False)
        item: JSON = {**marker, "role": "assistant"}
        if (
            len(blocks) == 1
            and isinstance(blocks[0], TextBlock)
            and not parts_hint
            and not set(details(blocks[0], NAME)) - {"item"}
        ):
            item["content"] = blocks[0].text.content
        else:
            item["content"] = [_dump_part(b, "assistant") for b in blocks]
        items[index] = item
    return place_foreign(items, details(m, NAME).get("items"))


def _dump_call(b: ToolUseBlock, extra: JSON) -> JSON:
    kept = "arguments" in extra  # a kept null is an original value too
    raw_args = extra.pop("arguments", None)
    u = b.tool_use
    args = raw_args if kept and _same_args(raw_args, u.input) else dump_arguments(u.input)
    return {"type": "function_call", **extra, "call_id": u.id, "name": u.name, "arguments": args}


def _same_args(raw: Any, value: Any) -> bool:
    try:
        return bool(arguments(raw, "") == value)
    except UserError:
        return False


# -- validate -------------------------------------------------------------------------------

_PARTS = {
    "assistant": {"output_text", "refusal"},
    "user": {"input_text", "input_image", "input_file", "input_audio"},
}


def validate(payload: Any) -> None:
    """Check a Responses ``input`` list; raise ``UserError`` listing every broken rule (message
    roles and part types, no empty content, function calls with call_id, name and JSON
    arguments, every call answered by one ``function_call_output`` after it, reasoning items
    with ids)."""
    p = Problems(NAME)
    if not isinstance(payload, list):
        p.add("payload", "must be a list of input items")
        p.raise_if_any()
        return
    if not payload:
        p.add("input", "is empty")
    pending: dict[str, str] = {}
    answered: set[str] = set()
    for n, item in enumerate(payload):
        where = f"input[{n}]"
        if not isinstance(item, dict):
            p.add(where, "is not an object")
            continue
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            _check_message(p, where, item)
        elif kind == "function_call":
            cid = item.get("call_id")
            if not isinstance(cid, str) or not cid or not item.get("name"):
                p.add(where, "function_call without call_id or name")
                continue
            if cid in pending or cid in answered:
                p.add(where, f"call_id {cid!r} is used twice")
            pending[cid] = where
            if not isinstance(item.get("arguments"), str) or not _is_json(item["arguments"]):
                p.add(where, "function_call arguments must be a JSON string")
        elif kind == "function_call_output":
            cid = item.get("call_id")
            if cid in pending:
                del pending[cid]
                answered.add(cid)
            elif cid in answered:
                p.add(where, f"second output for call_id {cid!r}")
            else:
                p.add(where, f"function_call_output {cid!r} answers no earlier function_call")
            if "output" not in item:
                p.add(where, "function_call_output without output")
        elif kind == "reasoning":
            if not item.get("id"):
                p.add(where, "reasoning item without id")
            if not isinstance(item.get("summary"), list):
                p.add(where, "reasoning item without a summary list")
        elif kind is None:
            p.add(where, "item without type or role")
    for cid, where in pending.items():
        p.add(where, f"function_call {cid!r} has no function_call_output")
    p.raise_if_any()


def _check_message(p: Problems, where: str, item: JSON) -> None:
    role = item.get("role")
    if role not in ("assistant", *_INPUT_ROLES):
        p.add(where, f"unknown role {role!r}")
        return
    content = item.get("content")
    if content == "" or content == [] or content is None:
        p.add(where, "empty content")
        return
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        p.add(where, "content must be a string or a list of parts")
        return
    allowed = _PARTS["assistant" if role == "assistant" else "user"]
    for k, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in allowed:
            p.add(f"{where}.content[{k}]", f"a {kind!r} part cannot be in a {role} message")
        elif kind == "input_image" and not (part.get("image_url") or part.get("file_id")):
            p.add(f"{where}.content[{k}]", "input_image without image_url or file_id")


def _is_json(value: str) -> bool:
    try:
        arguments(value, "")
    except UserError:
        return False
    return True


# -- responses ------------------------------------------------------------------------------


@guarded("openai_responses response")
def load_response(body: Any) -> Message:
    """The assistant message made of a Responses API response's ``output`` items, with
    ``model``, ``stop_reason`` (``completed``, or the reason it is incomplete) and ``usage``."""
    body = expect_dict(body, "Responses response")
    output = expect_list(body.get("output"), "Responses response output")
    loaded = _Loader().run(output)
    if len(loaded) != 1 or loaded[0].role != "assistant":
        raise UserError(
            "Responses response output holds more than assistant items; load it "
            "with openai_responses.load instead"
        )
    message = loaded[0]
    u = body.get("usage") or {}
    cached = int((u.get("input_tokens_details") or {}).get("cached_tokens") or 0)
    message.usage = Usage(
        input=int(u.get("input_tokens") or 0) - cached,
        output=int(u.get("output_tokens") or 0),
        cache_read=cached,
        total=int(u.get("total_tokens") or 0),
    )
    message.model = body.get("model")
    incomplete = body.get("incomplete_details") or {}
    message.stop_reason = incomplete.get("reason") or body.get("status")
    return message


dump = Sender(NAME, shape, validate)
