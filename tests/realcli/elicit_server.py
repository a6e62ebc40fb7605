"""A stdio MCP server (the ``mcp`` package) whose tool ``pick`` asks the user for a colour
and a count (MCP's elicitation) and returns what it was told: the action, then the content."""

from typing import Annotated

from mcp.server.mcpserver import Elicit, ElicitationResult, MCPServer, Resolve
from pydantic import BaseModel

app = MCPServer("asker")


class Choice(BaseModel):
    colour: str
    count: int


def ask() -> Elicit[Choice]:
    return Elicit("Which colour, and how many?", Choice)


@app.tool()
async def pick(answer: Annotated[ElicitationResult[Choice], Resolve(ask)]) -> str:
    """Ask the user for a colour and a count."""
    data = getattr(answer, "data", None)
    told = "" if data is None else f" colour={data.colour!r} count={data.count!r}"
    return f"action={answer.action}{told}"


if __name__ == "__main__":
    app.run("stdio")
