"""Model backends behind one small protocol (:class:`~orchestrator.llm.providers.base.ChatProvider`).

Backends are imported only when a step uses them, so the heavy SDKs (``openai``,
``llama_cpp``) never slow down commands that make no model call.
"""
