"""A small MCP server written with the official Python SDK (mcp 2.x), so lrg
is checked against a second implementation nobody in this repository wrote.

Run over stdio: `python server.py`. Offers a tool, a structured-output tool,
a resource, a prompt, a tool that asks the person (elicitation) and one that
asks the client's model (sampling). lrg-chat/tests/mcp_python.rs drives it.
"""

import warnings

from pydantic import BaseModel, Field

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import SamplingMessage, TextContent, ToolAnnotations

# Sampling is marked deprecated (SEP-2577); this server checks lrg honours it.
warnings.simplefilter("ignore")

server = MCPServer("lrg-python-fixture")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def add(a: int, b: int) -> str:
    """Add two integers."""
    return f"{a} + {b} = {a + b}"


class Weather(BaseModel):
    """The weather in a city."""

    city: str
    celsius: float = Field(description="Temperature in degrees Celsius")
    conditions: str


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def weather(city: str) -> Weather:
    """The weather in a city, as structured content."""
    return Weather(city=city, celsius=21.5, conditions="sunny")


@server.resource("fixture://greeting", mime_type="text/plain")
def greeting() -> str:
    """A fixed greeting."""
    return "Hello from the Python SDK"


@server.prompt()
def review(language: str, code: str = "print(1)") -> str:
    """Ask for a code review."""
    return f"Review this {language} code:\n{code}"


class Contact(BaseModel):
    name: str = Field(description="Your name")
    age: int = Field(description="Your age", ge=0, le=150)
    subscribe: bool = Field(default=False, description="Send news?")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def register(ctx: Context) -> str:
    """Ask the person for their contact details."""
    result = await ctx.elicit("Who are you?", Contact)
    if result.action == "accept":
        data = result.data
        return f"registered {data.name}, {data.age}, subscribe={data.subscribe}"
    return f"not registered: {result.action}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def summarize(text: str, ctx: Context) -> str:
    """Ask the client's model for a one-line summary."""
    result = await ctx.session.create_message(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=f"Summarize: {text}"))],
        max_tokens=30,
        system_prompt="Answer in one line.",
    )
    content = result.content
    text_out = content.text if isinstance(content, TextContent) else str(content)
    return f"summary by {result.model}: {text_out}"


if __name__ == "__main__":
    server.run("stdio")
