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
        "Héllo wörld.\n\n Bye \ud800".encode("utf-8", "surrogatepass"),
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
    assert (text, last) == (b"Done.\n\nWhole.", "Whole.")


def test_messages_are_joined_by_a_break_only_between_two_with_text() -> None:
    segment = SegmentText()
    segment.end_message()  # no text yet: no message, no break
    segment.parts.append("Counting.")
    segment.end_message()
    segment.end_message()  # an empty message between: still one break
    segment.parts.append("Partial")
    segment.retract("Partial")  # the open message emptied: its break goes with it
    assert segment.last_message() == "Counting."
    segment.parts.append("Three words.")
    segment.end_message()
    text, last = segment.close()
    assert (text, last) == (b"Counting.\n\nThree words.", "Three words.")
    segment.parts.append("Alone.")
    segment.end_message()  # a boundary that ends the segment adds nothing
    assert segment.close() == (b"Alone.", "Alone.")
