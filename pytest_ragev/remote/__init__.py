"""Remote pipelines: an OpenAI-compatible chat client, deployed RAG services over HTTP,
and user factories named ``module:callable``.

Standard library only; nothing here is imported when the plugin merely loads.
"""

from __future__ import annotations

from pytest_ragev.remote.chat import ChatClient, ChatConfig, ChatResult

__all__ = ["ChatClient", "ChatConfig", "ChatResult"]
