"""The two pages' HTML: shells the console's script fills from the live streams (it sets
text, never markup, so nothing an agent says can become part of a page)."""

from __future__ import annotations

_HEAD = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="agentrt-csrf" content="{csrf}">
<title>{title} - agentrt console</title>
<link rel="stylesheet" href="static/console.css">
<script src="static/console.js" defer></script>
</head><body data-page="{page}">
<header><a href="./" class="brand">agentrt console</a> <span id="conn">connecting</span></header>
"""

_FLEET = """<main>
<h1>Fleet <span id="count"></span></h1>
<section id="approvals-section" hidden>
 <h2>Tool calls waiting for you</h2>
 <div id="approvals"></div>
</section>
<section class="charts">
 <figure><figcaption>Fleet cost over time (USD)</figcaption><div id="chart-cost"></div></figure>
 <figure><figcaption>Fleet turns over time</figcaption><div id="chart-turns"></div></figure>
 <figure><figcaption>Last outcome, by kind</figcaption><div id="chart-outcomes"></div></figure>
 <figure><figcaption>Cost by agent (USD)</figcaption><div id="chart-agents"></div></figure>
</section>
<p id="chart-span" class="note"></p>
<form id="filters">
 <label>State <select id="f-state"><option value="">all</option></select></label>
 <label>Node <select id="f-node"><option value="">all</option></select></label>
 <label>Backend <select id="f-backend"><option value="">all</option></select></label>
 <label>Name <input id="f-name" type="search" placeholder="contains"></label>
</form>
<table id="fleet"><thead><tr>
 <th data-key="name">Name</th><th data-key="node">Node</th><th data-key="pid">PID</th>
 <th data-key="backend">Backend</th><th data-key="mode">Mode</th><th data-key="state">State</th>
 <th data-key="session_id">Session</th><th data-key="turns">Turns</th>
 <th data-key="cost_usd">Cost</th><th data-key="restarts">Restarts</th>
 <th data-key="queued">Queued</th><th data-key="oldest_queued">Oldest queued</th>
 <th data-key="last_outcome">Last outcome</th><th data-key="updated_at">Updated</th>
 <th data-key="budget_left_usd">Budget left</th>
</tr></thead><tbody></tbody></table>
</main></body></html>
"""

_AGENT = """<main>
<h1>Agent <span id="agent-name"></span> <span id="agent-state" class="state"></span></h1>
<p id="unreachable" class="error" hidden></p>
<dl id="facts"></dl>
<section class="actions">
 <textarea id="prompt" rows="3" placeholder="a prompt for this agent"></textarea>
 <div>
  <button id="do-ask">Ask</button><button id="do-tell">Tell</button>
  <button id="do-interrupt">Interrupt</button><button id="do-halt">Halt</button>
  <button id="do-unhalt">Unhalt</button><button id="do-reset_session">Reset session</button>
  <button id="do-stop" class="danger">Stop</button>
 </div>
 <p id="outcome" role="status"></p>
</section>
<h2>Queued requests <span id="queue-count"></span></h2>
<p id="queue-why" class="note" hidden></p>
<table id="queue"><thead><tr>
 <th>Request</th><th>Key</th><th>Waiting</th><th>Prompt</th><th></th>
</tr></thead><tbody></tbody></table>
<h2>Running turn <span id="turn-ref"></span></h2>
<pre id="live"></pre>
<ol id="events"></ol>
<h2>Turn history</h2>
<section class="charts">
 <figure><figcaption>Cost over time (USD)</figcaption><div id="h-cost"></div></figure>
 <figure><figcaption>Turns over time</figcaption><div id="h-turns"></div></figure>
 <figure><figcaption>Turn durations (s)</figcaption><div id="h-durations"></div></figure>
 <figure><figcaption>Outcomes, by kind</figcaption><div id="h-outcomes"></div></figure>
</section>
<p id="history-why" class="note" hidden></p>
<table id="history"><thead><tr>
 <th>Ended</th><th>Node</th><th>Outcome</th><th>Duration</th><th>Cost</th>
 <th>Tokens in / out</th><th>Prompt</th><th>Answer</th>
</tr></thead><tbody></tbody></table>
<p><button id="history-newer" disabled>Newer</button>
 <button id="history-older" disabled>Older</button> <span id="history-at"></span></p>
<h2>Stored transcript</h2>
<pre id="transcript"></pre>
</main></body></html>
"""


def page(name: str, csrf: str) -> bytes:
    """The fleet page or the agent page, carrying the CSRF token of this console."""
    title = "Fleet" if name == "fleet" else "Agent"
    head = _HEAD.format(csrf=csrf, title=title, page=name)
    return (head + (_FLEET if name == "fleet" else _AGENT)).encode()
