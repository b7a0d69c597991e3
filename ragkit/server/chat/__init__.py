"""Chat endpoints for existing clients: Ollama's ``/api/*`` and OpenAI's ``/v1/*``.

Each protocol is a router factory that takes the app's request-context
dependency (``ChatContext``: an open ``RAG`` and the request's principal).
Every route depends on it, so whatever the app checks there (API keys,
workspaces) guards every chat route; the routers work under any prefix::

    app.include_router(ollama_router(context), prefix="/w/{workspace}")
    app.include_router(openai_router(context), prefix="/w/{workspace}")

The query mode is picked by model name (``ragkit:local``) or by a ``/mode``
prefix in the last user message (``/local who leads Haijia?``).
"""

from ragkit.server.chat.context import ChatContext, ChatLimits, ContextDependency
from ragkit.server.chat.ollama_api import ollama_router
from ragkit.server.chat.openai_api import openai_router

__all__ = ["ChatContext", "ChatLimits", "ContextDependency", "ollama_router", "openai_router"]
