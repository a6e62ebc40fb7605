"""The runtime's forms for callers that are not trio programs: the runtime in a trio thread
of its own (`_runtime_thread`), awaited from asyncio (`_asyncio_runtime`, public as
``agentrt.asyncio``) or called from plain threads (`_sync_runtime`, public as
``agentrt.sync``), each method made from `agentrt.Runtime`'s own (`_forwarding`)."""
