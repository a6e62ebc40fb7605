"""The text of a turn's segment: deltas folded per read, messages, retraction."""

from __future__ import annotations

from agentrt._segment import SegmentText


def test_text_and_messages_across_folds() -> None:
    segment = SegmentText()
    segment.parts += ["Hé", "llo "]
    segment.fold()
    segment.parts.append("wörld.")
    segment.end_message()
    segment.parts.append(" Bye \ud800")  # a lone surrogate passes through
    segment.fold()
    assert segment.last_message() == " Bye \ud800"  # the open message
    text, last = segment.close()
    assert (text, last) == (
        "Héllo wörld. Bye \ud800".encode("utf-8", "surrogatepass"),
        " Bye \ud800",
    )
    assert segment.close() == (b"", "")


def test_the_last_complete_message_when_none_is_open() -> None:
    segment = SegmentText()
    segment.parts += ["one"]
    segment.end_message()
    segment.parts += ["two"]
    segment.end_message()
    assert segment.last_message() == "two"


def test_retraction_takes_only_the_end_of_the_open_message() -> None:
    segment = SegmentText()
    segment.parts.append("Done.")
    segment.end_message()
    segment.parts += ["Partial ", "ä"]
    segment.fold()
    segment.parts.append("ns")
    segment.retract("Partial äns")  # spans a fold
    segment.retract("Done.")  # a complete message: not ours to take back
    segment.retract("x")  # does not end the message
    segment.parts.append("Whole.")
    segment.end_message()
    text, last = segment.close()
    assert (text, last) == (b"Done.Whole.", "Whole.")
