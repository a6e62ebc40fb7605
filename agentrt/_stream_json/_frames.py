"""The stream-json frames most of a turn's stdout lines are (stream events, assistant and
user messages), as typed structs, and `decode_frame`, the decoding `StreamJsonTranslator`
hands the driver for them."""

from __future__ import annotations

from typing import Any

import msgspec


# Most lines of a streamed turn are stream events (text deltas above all), then assistant
# and user messages: those get a typed decoding, which skips every field the translator does
# not read (a tool result's ``tool_use_result`` echo, often as big as the result itself,
# is never built). Any other frame, or one of an unexpected shape, fails this schema early
# and is decoded generically by the driver; ``feed`` makes such a stream, assistant or user
# dict the typed frame it stands for, so one set of rules translates both (system and
# result frames are always dicts: their events keep the frame itself).
class TextDelta(msgspec.Struct, gc=False, tag="text_delta"):
    text: str


class InputJsonDelta(msgspec.Struct, gc=False, tag="input_json_delta"):
    pass


class ThinkingDelta(msgspec.Struct, gc=False, tag="thinking_delta"):
    pass


class SignatureDelta(msgspec.Struct, gc=False, tag="signature_delta"):
    pass


class BlockDelta(msgspec.Struct, gc=False, tag="content_block_delta"):
    delta: TextDelta | InputJsonDelta | ThinkingDelta | SignatureDelta
    index: int = 0


class Message(msgspec.Struct, gc=False):
    model: Any = None
    id: Any = None
    usage: Any = None


class MessageStart(msgspec.Struct, gc=False, tag="message_start"):
    message: Message


class BlockStart(msgspec.Struct, gc=False, tag="content_block_start"):
    pass


class BlockStop(msgspec.Struct, gc=False, tag="content_block_stop"):
    pass


class MessageDelta(msgspec.Struct, gc=False, tag="message_delta"):
    usage: Any = None


class AbandonedBlocks(msgspec.Struct, gc=False):
    from_block_index: int = 0


class MessageStop(msgspec.Struct, gc=False, tag="message_stop"):
    pass


class StreamEvent(msgspec.Struct, gc=False, tag_field="type", tag="stream_event"):
    event: BlockDelta | MessageStart | BlockStart | BlockStop | MessageDelta | MessageStop
    session_id: str | None = None
    parent_tool_use_id: Any = None
    # Set (on a message_stop) when the CLI gave up this reply mid-stream and retries it.
    abandoned_blocks: AbandonedBlocks | None = None


# Content blocks. Decoded JSON values cannot form reference cycles, so none of these needs
# the garbage collector's attention, even those holding a dict.
class TextBlock(msgspec.Struct, gc=False, tag="text"):
    text: str | None = None


class ToolUseBlock(msgspec.Struct, gc=False, tag="tool_use"):
    id: str | None = None
    name: str | None = None
    input: Any = None


class ServerToolUseBlock(ToolUseBlock, gc=False, tag="server_tool_use"):
    pass


class ThinkingBlock(msgspec.Struct, gc=False, tag="thinking"):
    pass


class RedactedThinkingBlock(msgspec.Struct, gc=False, tag="redacted_thinking"):
    pass


class ToolResultBlock(msgspec.Struct, gc=False, tag="tool_result"):
    tool_use_id: str | None = None
    content: Any = None
    is_error: Any = None


class AssistantMessage(msgspec.Struct, gc=False):
    content: list[
        TextBlock | ToolUseBlock | ServerToolUseBlock | ThinkingBlock | RedactedThinkingBlock
    ] = []
    id: Any = None
    model: Any = None
    usage: Any = None


class Assistant(msgspec.Struct, gc=False, tag_field="type", tag="assistant"):
    message: AssistantMessage
    session_id: str | None = None
    parent_tool_use_id: Any = None


class UserMessage(msgspec.Struct, gc=False):
    content: list[ToolResultBlock | TextBlock] = []


class User(msgspec.Struct, gc=False, tag_field="type", tag="user"):
    message: UserMessage
    session_id: str | None = None
    parent_tool_use_id: Any = None


decode_frame = msgspec.json.Decoder(StreamEvent | Assistant | User).decode
